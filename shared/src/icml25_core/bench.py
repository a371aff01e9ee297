"""The benchmark harness: interleaved A/B timing, ratios, peak memory, size sweeps.

Timings are medians of repeats that alternate between candidates (A B C, B C A, ...) after
a warm-up, so drift of the machine hits every candidate alike. Ratios are always against a
named reference measured in the same run. Peak memory is measured in the same timed runs
where that costs nothing inside the timed region: the resident-set high-water mark on
Linux (native allocations included, which Python's ``tracemalloc`` alone misses) and the
CUDA allocator's peak. Only where neither exists does one extra, traced call measure it.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import sys
import time
import tracemalloc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from .environment import environment
from .report import format_value
from .validation import check_scalar


@dataclass
class Timing:
    """Repeated wall-clock times of one candidate (seconds) and its peak memory (bytes)."""

    times: list[float]
    peak_memory: int | None = None

    @property
    def median(self) -> float:
        return float(np.median(self.times))


@dataclass
class Comparison:
    """Candidates timed against each other on one case.

    Attributes
    ----------
    label : str
        The case, e.g. ``"n=1000"``.
    size : float or None
        The work size used for sweeps (e.g. ``n``).
    reference : str
        The candidate that ratios are taken against.
    timings : dict of str to Timing
        Per candidate.
    extra : dict
        Anything else the benchmark measured per candidate (accuracy, iterations...).
    """

    label: str
    size: float | None
    reference: str
    timings: dict[str, Timing]
    extra: dict[str, dict[str, float]] = field(default_factory=dict)

    def ratio(self, name: str) -> float:
        """Median time of ``name`` divided by the reference's (below 1: faster)."""
        return self.timings[name].median / self.timings[self.reference].median


def _resident_kib(field_name: str) -> int | None:
    """``VmRSS`` / ``VmHWM`` of this process in KiB (Linux), else ``None``."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _release_free_heap() -> None:
    """Hand freed heap pages back to the OS (glibc ``malloc_trim``), so memory a previous
    candidate freed but the allocator kept is counted again when the next one reuses it."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _reset_resident_peak() -> int | None:
    """Reset the resident-set high-water mark; return the current resident size (KiB).

    Native allocations (torch's CPU tensors, BLAS buffers) escape ``tracemalloc``; the
    high-water mark sees them. ``None`` where /proc/self/clear_refs is not available.
    """
    _release_free_heap()
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return None
    return _resident_kib("VmRSS")


class _MemoryProbe:
    """Peak memory of one call, in bytes, measured without slowing it.

    ``start()`` before and ``stop()`` after the call, both outside its timed region. It
    reads the resident-set high-water mark (Linux) and the CUDA allocator's peak (when
    torch has initialised CUDA); ``available`` is ``False`` when neither can be read, and
    the caller then falls back to :func:`_traced_peak`.
    """

    def __init__(self) -> None:
        torch = sys.modules.get("torch")
        self._torch = torch
        self._cuda = torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized()
        self._resident: int | None = None
        self._base = 0
        self.available = self._cuda or Path("/proc/self/clear_refs").exists()

    def start(self) -> None:
        if self._cuda:
            self._torch.cuda.synchronize()
            self._torch.cuda.reset_peak_memory_stats()
            self._base = self._torch.cuda.memory_allocated()
        self._resident = _reset_resident_peak()

    def stop(self) -> int:
        peak = 0
        high_water = _resident_kib("VmHWM") if self._resident is not None else None
        if high_water is not None and self._resident is not None:
            peak = max(peak, (high_water - self._resident) * 1024)
        if self._cuda:
            self._torch.cuda.synchronize()
            peak = max(peak, self._torch.cuda.max_memory_allocated() - self._base)
        return int(peak)


def _traced_peak(fn: Callable[[], Any], sync: Callable[[], Any] | None) -> int:
    """Peak of the Python/NumPy heap during one extra call (``tracemalloc``)."""
    tracemalloc.start()
    try:
        fn()
        if sync is not None:
            sync()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return int(peak)


Extra = Mapping[str, Mapping[str, float]]


def compare(
    candidates: Mapping[str, Callable[[], Any]],
    *,
    reference: str,
    label: str = "",
    size: float | None = None,
    repeats: int = 5,
    warmup: int = 1,
    memory: bool = True,
    sync: Callable[[], Any] | None = None,
    extra: Extra | Callable[[dict[str, Timing]], Extra] | None = None,
) -> Comparison:
    """Time every candidate, interleaved, against ``reference``.

    Parameters
    ----------
    candidates : mapping of str to callable
        Zero-argument callables doing the work; their return values are ignored.
    reference : str
        Key of the candidate that ratios are taken against.
    label, size : str, float
        Describe the case (``size`` feeds :func:`loglog_slope`).
    repeats, warmup : int
        Timed repeats per candidate and untimed calls before them.
    memory : bool
        Also record peak memory, the largest over the timed repeats: the growth of the
        resident set (Linux: native allocations such as torch CPU tensors included) or the
        CUDA allocator's peak. Without either, one extra call traced by ``tracemalloc``.
    sync : callable, optional
        Called after each timed call, e.g. ``torch.cuda.synchronize``.
    extra : mapping or callable, optional
        What else was measured per candidate (accuracy, iterations...): a mapping
        ``candidate -> {metric: value}`` (read after the timed runs, so the candidates may
        fill it as they run), or a callable taking the timings and returning one.
    """
    if reference not in candidates:
        raise ValueError(f"reference must be one of {list(candidates)}, got {reference!r}")
    check_scalar(repeats, "repeats", low=1, integer=True)
    check_scalar(warmup, "warmup", low=0, integer=True)
    names = list(candidates)
    for _ in range(warmup):
        for name in names:
            candidates[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    peaks: dict[str, int] = dict.fromkeys(names, 0)
    probe = _MemoryProbe() if memory else None
    for r in range(repeats):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            if probe is not None and probe.available:
                probe.start()
            start = time.perf_counter()
            candidates[name]()
            if sync is not None:
                sync()
            times[name].append(time.perf_counter() - start)
            if probe is not None and probe.available:
                peaks[name] = max(peaks[name], probe.stop())
    if probe is not None and not probe.available:
        peaks = {name: _traced_peak(candidates[name], sync) for name in names}
    timings = {name: Timing(times[name], peaks[name] if memory else None) for name in names}
    measured = extra(timings) if callable(extra) else extra
    unknown = sorted(set(measured or {}) - set(names))
    if unknown:
        raise ValueError(f"extra names {unknown}, which are not candidates: {names}")
    return Comparison(
        label=label,
        size=size,
        reference=reference,
        timings=timings,
        extra={k: dict(v) for k, v in (measured or {}).items()},
    )


def loglog_slope(sizes: Sequence[float], times: Sequence[float]) -> float:
    """Least-squares slope of log(time) against log(size): how cost grows with work.

    A slope of 2 means time grows like size squared.
    """
    x = np.log(np.asarray(sizes, dtype=float))
    y = np.log(np.asarray(times, dtype=float))
    if x.size < 2:
        raise ValueError(f"need at least two sizes for a slope, got {x.size}")
    return float(np.polyfit(x, y, 1)[0])


@dataclass
class BenchReport:
    """A benchmark's comparisons, their fitted growth slopes and notes."""

    name: str
    comparisons: list[Comparison]
    notes: list[str] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)

    def slopes(self) -> dict[str, float]:
        """Log-log slope of median time against size, per candidate, over the sized cases
        that time it (a candidate needs at least two), so separate sweeps in one report
        each get their own slope."""
        sized = [c for c in self.comparisons if c.size is not None]
        out = {}
        for name in dict.fromkeys(n for c in sized for n in c.timings):
            points = [(c.size, c.timings[name].median) for c in sized if name in c.timings]
            if len(points) >= 2:
                out[name] = loglog_slope([p[0] for p in points], [p[1] for p in points])
        return out

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for comp, raw in zip(self.comparisons, data["comparisons"], strict=True):
            for name, t in comp.timings.items():
                raw["timings"][name]["median"] = t.median
                raw["timings"][name]["ratio"] = comp.ratio(name)
        data["slopes"] = self.slopes()
        return data

    def write_json(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1))
        return path

    def render(self, console: Console | None = None) -> None:
        """Print one table: per case and candidate, median time, ratio, memory, extras."""
        console = console or Console()
        extra_keys = list(
            dict.fromkeys(k for c in self.comparisons for d in c.extra.values() for k in d)
        )
        table = Table(title=f"benchmark · {self.name}")
        for col in ["case", "candidate", "median s", "ratio vs ref", "peak MiB", *extra_keys]:
            table.add_column(col)
        for c in self.comparisons:
            for name, t in c.timings.items():
                mem = "-" if t.peak_memory is None else f"{t.peak_memory / 2**20:.1f}"
                ref = " (ref)" if name == c.reference else ""
                extras = [format_value(c.extra.get(name, {}).get(k, math.nan)) for k in extra_keys]
                table.add_row(
                    c.label, name + ref, f"{t.median:.4g}", f"{c.ratio(name):.3f}", mem, *extras
                )
        console.print(table)
        slopes = self.slopes()
        if slopes:
            shown = ", ".join(f"{k}: {v:.2f}" for k, v in slopes.items())
            console.print(f"log-log slope of time vs size: {shown}")
        for note in self.notes:
            console.print(f"- {note}")


def make_report(
    name: str, comparisons: list[Comparison], *distributions: str, notes: Sequence[str] = ()
) -> BenchReport:
    """A :class:`BenchReport` with the environment recorded."""
    return BenchReport(name, comparisons, list(notes), environment(*distributions))
