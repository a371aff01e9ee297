"""A record of where a result was measured."""

from __future__ import annotations

import importlib
import importlib.metadata as md
import importlib.util
import os
import platform
import sys
from collections.abc import Iterator
from contextlib import contextmanager


def environment(*distributions: str) -> dict[str, str]:
    """Python, platform, CPU model and count, NumPy/torch versions, device and given
    distributions.

    torch is reported only if it is already imported, so recording the environment never
    pays torch's import time; with it, the vector instructions its CPU kernels use
    (``cpu_capability``, e.g. ``AVX512``) and whether the CPU computes in bfloat16
    natively (``cpu_bf16``: AVX512-BF16 / AMX on x86), which decide how fast its
    low-precision kernels are.
    """
    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cpu_count": str(os.cpu_count()),
    }
    for dist in ("numpy", "icml25-core", *distributions):
        try:
            env[dist] = md.version(dist)
        except md.PackageNotFoundError:
            env[dist] = "not installed"
    torch = sys.modules.get("torch")
    if torch is not None:
        env["torch"] = torch.__version__
        env["cuda"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
        env["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        bf16 = getattr(torch.cpu, "_is_avx512_bf16_supported", None)  # x86 builds only
        env["cpu_bf16"] = "unknown" if bf16 is None else str(bool(bf16()))
        env["torch_threads"] = str(torch.get_num_threads())
        env["deterministic"] = str(torch.are_deterministic_algorithms_enabled())
    return env


def machine_line() -> str:
    """One line naming the machine a result comes from: CPU model, core count, and (when
    torch is imported) the vector instructions of its CPU kernels and its thread count."""
    env = environment()
    line = f"{env['cpu']} ({env['machine']}, {env['cpu_count']} cores)"
    if "torch" in env:
        line += f", torch {env['torch']} {env['cpu_capability']} kernels, {env['torch_threads']} thread(s)"
    return line


@contextmanager
def pinned_numerics(threads: int = 1) -> Iterator[None]:
    """Run a block with the thread counts and algorithms that make a CPU run repeatable.

    Inside the block torch uses ``threads`` intra-op threads and its deterministic
    algorithms (``torch.use_deterministic_algorithms(True, warn_only=True)``: an op with
    no deterministic implementation warns instead of failing), and the BLAS/OpenMP pools
    NumPy and SciPy use (OpenBLAS, MKL; through ``threadpoolctl``) are limited to
    ``threads``. A reduction split over another number of threads adds in another order,
    so fixing the count removes one of the two reasons a result differs between machines;
    the other, the CPU's own kernels (AVX2 on one machine, AVX-512 on another), no
    setting removes, which is why claim tests keep a margin over the spread across seeds
    and kernel paths (``ci/claim_margins.md``). Everything is restored on exit.

    Parameters
    ----------
    threads : int
        Threads per pool, at least 1.
    """
    from threadpoolctl import threadpool_limits

    from .validation import check_scalar

    check_scalar(threads, "threads", low=1, integer=True)
    torch = importlib.import_module("torch") if importlib.util.find_spec("torch") else None
    if torch is not None:
        before = (
            torch.get_num_threads(),
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
        )
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        with threadpool_limits(limits=threads):
            yield
    finally:
        if torch is not None:
            torch.set_num_threads(before[0])
            torch.use_deterministic_algorithms(before[1], warn_only=before[2])


def _cpu_model() -> str:
    """The CPU's model name (Linux: ``/proc/cpuinfo``), else what the platform reports."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
