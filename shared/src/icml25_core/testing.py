"""The conformance kit: what every icml25 method package owes its users, checked in one call.

In the spirit of scikit-learn's ``check_estimator`` and diffusers' ``PipelineTesterMixin``, a
package's test suite subclasses :class:`PackageConformance` once::

    from icml25_core.testing import PackageConformance


    class TestConformance(PackageConformance):
        distribution = "gsb-sinkhorn"

and pytest then checks that

- the version in the installed metadata, ``__version__`` and (in a checkout) the
  ``pyproject.toml`` agree;
- every name in ``__all__`` exists, and every class, function and module among them has a
  docstring of its own;
- the ``icml25.methods`` entry point loads in a fresh interpreter without importing any of
  :data:`HEAVY_MODULES` (so ``icml25 list`` stays instant);
- the README's quick start runs as written in a subprocess: every fenced ``python`` block
  that directly follows a ``<!-- quick-start -->`` line, in order, as one script;
- every registered experiment runs end to end on its ``smoke`` profile (one seed) and
  returns rows and a :class:`~icml25_core.experiment.Verdict` that reports can be written
  from;
- every ``benchmarks/bench_*.py`` (a source checkout) returns a
  :class:`~icml25_core.bench.BenchReport` from ``run(smoke=True)``.

:func:`kill_during_save` runs a save in a subprocess and SIGKILLs it at a chosen point
(between two files, or between the two renames that replace a folder), for the crash
tests of every multi-file save; :func:`kill_when_marked` is its general form (kill a
script once it writes a marker file), for other writes (a cache build, a checkpoint file).

The README is the checkout's ``README.md`` in a source checkout and the installed
distribution's metadata (its long description) elsewhere, so :func:`run_quick_start` also
works where only the wheel is installed (``python -m icml25_core.testing quick-start NAME
DIR``, which ``ci/isolated.sh`` runs).
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import importlib.util
import inspect
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import tomllib
from dataclasses import is_dataclass
from pathlib import Path

from .bench import BenchReport
from .experiment import Result, Verdict, run_experiment
from .method import ENTRY_POINT_GROUP, Method, get_method
from .report import write_reports

__all__ = [
    "HEAVY_MODULES",
    "QUICK_START_MARKER",
    "PackageConformance",
    "kill_during_save",
    "kill_when_marked",
    "quick_start_blocks",
    "run_quick_start",
]

HEAVY_MODULES: tuple[str, ...] = (
    "torch",
    "tensorflow",
    "jax",
    "transformers",
    "diffusers",
    "flwr",
    "ray",
    "botorch",
    "gpytorch",
    "torch_geometric",
    "scanpy",
    "anndata",
    "sklearn",
    "scipy",
    "pandas",
    "ot",
    "onnxruntime",
)
"""Modules whose import an entry point must not trigger."""

QUICK_START_MARKER = "<!-- quick-start -->"
"""The line that marks the next fenced ``python`` block of a README as part of its quick start."""

_FENCE = re.compile(
    r"^" + re.escape(QUICK_START_MARKER) + r"[ \t]*\n```python[^\n]*\n(.*?)^```", re.S | re.M
)


def quick_start_blocks(markdown: str) -> list[str]:
    """The fenced ``python`` blocks of ``markdown`` marked as quick start, in order.

    A block is marked by a ``<!-- quick-start -->`` line directly above its opening fence
    (invisible when the Markdown is rendered).
    """
    return [textwrap.dedent(block) for block in _FENCE.findall(markdown)]


def _source_root(distribution: str) -> Path | None:
    """The distribution's folder in a source checkout (``pyproject.toml`` beside ``src/``)."""
    spec = importlib.util.find_spec(distribution.replace("-", "_"))
    if spec is None or spec.origin is None:
        return None
    root = Path(spec.origin).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() else None


def readme_text(distribution: str) -> str:
    """The README of an installed distribution: the checkout's ``README.md`` where the
    package runs from a source checkout (an editable install's metadata keeps the README
    of when it was installed), else the metadata's long description (a wheel install)."""
    root = _source_root(distribution)
    if root is not None and (root / "README.md").is_file():
        return (root / "README.md").read_text(encoding="utf-8")
    meta = md.metadata(distribution)
    text = meta.get_payload() or meta.get("Description") or ""
    if not text.strip():
        raise LookupError(f"{distribution} has no README in its metadata (readme = ...)")
    return text


def run_quick_start(distribution: str, cwd: str | Path, *, timeout: float = 600) -> str:
    """Run the README quick start of ``distribution`` as one script in a subprocess.

    Parameters
    ----------
    distribution : str
        An installed distribution, e.g. ``"otp-map"``.
    cwd : path
        Working directory of the script (files the example writes land there).
    timeout : float
        Seconds before the script is killed.

    Returns
    -------
    str
        The script's standard output.

    Raises
    ------
    LookupError
        If the README marks no quick-start block.
    AssertionError
        If the script exits non-zero (its standard error is in the message).
    """
    blocks = quick_start_blocks(readme_text(distribution))
    if not blocks:
        raise LookupError(
            f"the README of {distribution} marks no quick start: put a line "
            f"{QUICK_START_MARKER!r} directly above a ```python block"
        )
    script = Path(cwd) / "quick_start.py"
    script.write_text("\n\n".join(blocks))
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        check=False,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"the README quick start of {distribution} failed (exit {proc.returncode}):\n"
            f"{proc.stderr[-6000:]}"
        )
    return proc.stdout


def _own_docstring(obj: object) -> str:
    doc = (
        obj.__doc__
        if (inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj))
        else "n/a"
    )
    if doc and inspect.isclass(obj) and is_dataclass(obj) and doc.startswith(obj.__name__ + "("):
        return ""  # the signature dataclasses write when the class has no docstring
    return (doc or "").strip()


class PackageConformance:
    """The package contract as pytest tests; subclass it once, setting ``distribution``.

    Attributes
    ----------
    distribution : str
        The distribution name, e.g. ``"otp-map"``.
    quick_start_timeout : float
        Seconds the README quick start may take.

    Override :meth:`pretrained_models` to have the kit check the package's persistence,
    :meth:`divergent_training` to have it check that training at an absurd learning rate
    stops with a ``FloatingPointError`` naming the rate's argument, and
    :meth:`label_consumers` to have it feed bad class labels to every entry point that
    takes them.
    """

    distribution: str = ""
    quick_start_timeout: float = 600

    def pretrained_models(self) -> list:
        """Tiny instances of every model class the package saves with
        :class:`~icml25_core.hub.PretrainedModelMixin` (default: none)."""
        return []

    def divergent_training(self) -> dict:
        """``{name: (train, lr_name)}``: each ``train()`` runs one of the package's training
        entry points on its smoke data at an absurd learning rate (its argument
        ``lr_name``), and must raise :class:`FloatingPointError` naming ``lr_name``
        (through :func:`icml25_core.guards.check_loss`). Default: none."""
        return {}

    def label_consumers(self) -> dict:
        """``{name: (call, argument, labels, n_classes)}``: ``call(y)`` passes ``y`` as the
        class labels ``argument`` to one of the package's entry points, and ``labels``
        (a valid 1-D integer array for ``n_classes`` classes) shows their shape. The kit
        calls it with labels ``>= n_classes``, negative, fractional and NaN labels and
        expects a ``ValueError`` naming ``argument``. Default: none."""
        return {}

    # -- helpers ---------------------------------------------------------------------
    def method(self) -> Method:
        """The package's registered :class:`~icml25_core.method.Method`."""
        if not self.distribution:
            raise TypeError(f"{type(self).__name__} must set `distribution`")
        return get_method(self.distribution)

    def module(self):
        """The package's top-level module."""
        return importlib.import_module(self.method().import_name)

    def source_root(self) -> Path | None:
        """The package's folder in a source checkout (``pyproject.toml`` beside ``src/``)."""
        return _source_root(self.distribution)

    # -- the checks --------------------------------------------------------------------
    def test_version_agrees_everywhere(self) -> None:
        """metadata version == ``__version__`` (== pyproject in a checkout)."""
        module = self.module()
        assert module.__version__ == md.version(self.distribution)
        root = self.source_root()
        if root is not None:
            project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
            assert project["name"] == self.distribution
            assert project["version"] == module.__version__

    def test_public_api_is_documented(self) -> None:
        """Every ``__all__`` name exists; classes, functions, modules have docstrings."""
        module = self.module()
        assert _own_docstring(module), f"{module.__name__} has no module docstring"
        names = getattr(module, "__all__", None)
        assert names, f"{module.__name__} lists no public API in __all__"
        assert len(set(names)) == len(names), "__all__ lists a name twice"
        missing = [n for n in names if not hasattr(module, n)]
        assert not missing, f"__all__ names {missing}, which {module.__name__} does not define"
        undocumented = [n for n in names if not _own_docstring(getattr(module, n))]
        assert not undocumented, f"public names without a docstring: {undocumented}"

    def test_entry_point_is_light(self) -> None:
        """The ``icml25.methods`` entry point loads without importing heavy modules."""
        code = (
            "import importlib.metadata as md, json, sys\n"
            f"eps = [e for e in md.entry_points(group={ENTRY_POINT_GROUP!r}) "
            f"if e.name == {self.distribution!r}]\n"
            "assert eps, 'no entry point'\n"
            "method = eps[0].load()\n"
            f"heavy = sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules)\n"
            "print(json.dumps({'name': method.name, 'heavy': heavy}))\n"
        )
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, proc.stderr
        found = json.loads(proc.stdout.strip().splitlines()[-1])
        assert found["name"] == self.distribution
        assert not found["heavy"], f"loading the entry point imported {found['heavy']}"

    def test_readme_quick_start_runs(self, tmp_path: Path) -> None:
        """The README's marked quick start runs as written, in a subprocess."""
        run_quick_start(self.distribution, tmp_path, timeout=self.quick_start_timeout)

    def test_experiments_run_on_smoke_profile(self, tmp_path: Path) -> None:
        """Every registered experiment runs end to end on ``smoke`` and returns a verdict."""
        method = self.method()
        assert method.experiments, f"{self.distribution} registers no experiment"
        results: list[Result] = []
        for name in method.experiments:
            experiment = method.load_experiment(name)
            result = run_experiment(experiment, profile="smoke", seeds=1, out_dir=tmp_path / name)
            assert result.method == self.distribution, "the experiment is not the registered one"
            assert isinstance(result.verdict, Verdict) and result.verdict.summary
            assert result.rows, f"{name} returned no rows"
            assert any(r.baseline for r in result.rows), f"{name} has no baseline row"
            assert any(not r.baseline for r in result.rows), f"{name} has no method row"
            for row in result.rows:
                for key, value in row.metrics.items():
                    assert isinstance(value, int | float) and not math.isinf(value), (
                        f"{name}: {row.method} metric {key} = {value!r}"
                    )
            results.append(result)
        paths = write_reports(results, tmp_path)
        assert paths["json"].is_file() and paths["markdown"].is_file()

    def test_pretrained_models_save_and_load_safely(self, tmp_path: Path) -> None:
        """Each of :meth:`pretrained_models`: the saved folder loads back the same tensors;
        a second save into it is refused without ``overwrite=True``; a replacement killed
        between its renames leaves the previous model loadable; a truncated weights
        file, an empty or non-object config, and NaN weights are errors naming the file."""
        import pytest

        models = self.pretrained_models()
        if not models:
            pytest.skip(f"{self.distribution} saves no PretrainedModelMixin model")
        import torch
        from safetensors.torch import save_file

        from .hub import CONFIG_NAME, WEIGHTS_NAME

        files = {"weights": WEIGHTS_NAME, "config": CONFIG_NAME}

        for i, model in enumerate(models):
            cls = type(model)
            folder = tmp_path / f"{i}-{cls.__name__}"
            model.save_pretrained(folder)
            loaded = cls.from_pretrained(folder)
            want, got = model.state_dict(), loaded.state_dict()
            assert want.keys() == got.keys(), f"{cls.__name__}: tensors differ after loading"
            for key in want:
                torch.testing.assert_close(got[key], want[key], rtol=0, atol=0)
            with pytest.raises(FileExistsError, match="overwrite=True"):
                model.save_pretrained(folder)
            model.save_pretrained(folder, overwrite=True)
            mine = tmp_path / f"{i}-users-folder"  # a user's own file is never deleted
            shutil.copytree(folder, mine)
            (mine / "thesis.tex").write_text("years of work")
            with pytest.raises(FileExistsError, match=r"thesis\.tex"):
                model.save_pretrained(mine, overwrite=True)
            assert (mine / "thesis.tex").read_text() == "years of work"
            if i == 0 and hasattr(signal, "SIGKILL"):  # a replacement killed mid-way
                script = (
                    f"from {cls.__module__} import {cls.__qualname__} as cls\n"
                    f"cls.from_pretrained({str(folder)!r}).save_pretrained("
                    f"{str(folder)!r}, overwrite=True)\n"
                )
                kill_during_save(script, folder, at="between-renames")
                again = cls.from_pretrained(folder).state_dict()
                for key in want:
                    torch.testing.assert_close(again[key], want[key], rtol=0, atol=0)

            for name, blamed in _CORRUPTIONS.items():
                copy = tmp_path / f"{i}-{name}"
                shutil.copytree(folder, copy)
                _corrupt(copy, name, want, save_file)
                with pytest.raises(ValueError, match=re.escape(str(copy / files[blamed]))):
                    cls.from_pretrained(copy)

    def test_training_diverges_clearly(self) -> None:
        """Each of :meth:`divergent_training` raises ``FloatingPointError`` naming its
        learning-rate argument, never returns NaN weights or losses silently."""
        import pytest

        entries = self.divergent_training()
        if not entries:
            pytest.skip(f"{self.distribution} declares no training entry point")
        for name, (train, lr_name) in entries.items():
            failure = f"{name}: training at an absurd {lr_name} did not stop"
            with pytest.raises(FloatingPointError, match=rf"\b{re.escape(lr_name)}\b"):
                _must_raise(failure, train)

    def test_bad_labels_are_refused(self) -> None:
        """Each of :meth:`label_consumers` refuses labels out of range, negative,
        fractional or NaN with a ``ValueError`` naming the argument."""
        import numpy as np
        import pytest

        entries = self.label_consumers()
        if not entries:
            pytest.skip(f"{self.distribution} declares no entry point taking class labels")
        for name, (call, argument, labels, n_classes) in entries.items():
            good = np.asarray(labels)
            bad = {
                "too large": n_classes,
                "negative": -1,
                "fractional": 0.5,
                "nan": float("nan"),
            }
            for what, value in bad.items():
                y = good.astype(np.float64 if isinstance(value, float) else np.int64)
                y[0] = value
                with pytest.raises(ValueError, match=re.escape(argument)):
                    _must_raise(f"{name}: {what} labels were accepted", call, y)

    def test_benchmarks_run_at_smoke_size(self, tmp_path: Path) -> None:
        """Every ``benchmarks/bench_*.py`` returns a report from ``run(smoke=True)``."""
        from .cli import _load_bench_module

        bench_dir = self.method().benchmarks_dir()
        if bench_dir is None:
            import pytest

            pytest.skip("benchmarks ship with the source checkout only")
        files = sorted(bench_dir.glob("bench_*.py"))
        assert files, f"no bench_*.py in {bench_dir}"
        for path in files:
            report = _load_bench_module(path).run(smoke=True)
            assert isinstance(report, BenchReport), f"{path.name} did not return a BenchReport"
            assert report.comparisons, f"{path.name} compared nothing"
            report.write_json(tmp_path / f"{path.stem}.json")


def _must_raise(failure: str, call, *args) -> None:
    """Call ``call(*args)``; if it returns, fail with ``failure`` (an ``AssertionError``,
    which no ``pytest.raises`` of the expected error type swallows)."""
    call(*args)
    raise AssertionError(failure)


_KILL_PRELUDE = """
import os as _os, sys as _sys, time as _time
_TARGET = _os.path.abspath({target!r})
_SAVING = "." + _os.path.basename(_TARGET) + ".saving-"
_AT, _MARK = {at!r}, {mark!r}

def _block():
    with open(_MARK, "w") as f:
        f.write(str(_os.getpid()))
    _time.sleep(3600)

def _writes(args):
    mode, flags = args[1], args[2]
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & (_os.O_WRONLY | _os.O_RDWR))

def _hook(event, args):
    if _AT == "between-files" and event == "open" and isinstance(args[0], str | bytes):
        folder = _os.path.dirname(_os.path.abspath(_os.fsdecode(args[0])))
        if (
            _os.path.basename(folder).startswith(_SAVING)
            and _os.path.dirname(folder) == _os.path.dirname(_TARGET)
            and _writes(args)
            and _os.listdir(folder)
        ):
            _block()
    elif _AT == "between-renames" and event == "os.rename":
        if _os.path.abspath(_os.fsdecode(args[1])) == _TARGET:  # the new folder moving in
            _block()

_sys.addaudithook(_hook)
"""


def kill_during_save(
    script: str, target: str | Path, *, at: str = "between-files", timeout: float = 300
) -> None:
    """Run ``script`` in a fresh interpreter and SIGKILL it part-way through a save.

    The save is one into ``target`` through :class:`~icml25_core.hub.atomic_directory`
    (a package's ``save_pretrained`` / ``save_checkpoint``). An audit hook stops the
    process, and this function then kills it with SIGKILL, at the point ``at`` names:

    - ``"between-files"``: as the save opens a file for writing in its temporary folder
      while that folder already holds another file (the first file is written, the
      rest are not);
    - ``"between-renames"``: just before the finished temporary folder is renamed to
      ``target`` (an existing ``target`` has been moved aside already); with nested
      saves (a model's ``save_pretrained`` inside a checkpoint's folder), the outermost.

    The caller then checks what a user would find: the previous ``target`` intact, or a
    refusal to resume.

    Parameters
    ----------
    script : str
        Python code that performs the save (its imports included).
    target : path
        The folder the save writes.
    at : {"between-files", "between-renames"}
        Where to kill.
    timeout : float
        Seconds to wait for the save to reach ``at``.

    Raises
    ------
    AssertionError
        If the script ends (or fails) before reaching ``at``: the test could not
        interrupt the save, which is a failure, not a pass.
    """
    import tempfile

    if at not in ("between-files", "between-renames"):
        raise ValueError(f"at must be 'between-files' or 'between-renames', got {at!r}")
    with tempfile.TemporaryDirectory() as scratch:
        mark = os.path.join(scratch, "blocked")
        code = _KILL_PRELUDE.format(target=str(target), at=at, mark=mark) + "\n" + script
        kill_when_marked(code, mark, timeout=timeout, what="the save", point=at)


def kill_when_marked(
    code: str,
    mark: str | Path,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 300,
    what: str = "the script",
    point: str = "its kill point",
) -> None:
    """Run ``python -c code *args`` and SIGKILL it once it has written the file ``mark``.

    The script writes ``mark`` (any non-empty content) at the point to interrupt, then
    sleeps; the caller checks what the kill left behind. ``what`` and ``point`` name the
    script and that point in the errors.

    Raises
    ------
    AssertionError
        If the script ends (or fails) before writing ``mark``, or does not write it within
        ``timeout`` seconds: the test could not interrupt it, which is a failure, not a
        pass. The script's stderr tail is in the message.
    """
    import tempfile
    import time

    if not hasattr(signal, "SIGKILL"):
        import pytest

        pytest.skip("SIGKILL needs a POSIX system")
    mark = Path(mark)
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch, "stderr")
        with log.open("wb") as stderr:  # a file, not a pipe: a chatty child never blocks
            proc = subprocess.Popen(
                [sys.executable, "-c", code, *args],
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=env,
            )
        deadline = time.monotonic() + timeout
        try:
            # the marker may exist before its content is flushed: wait for both
            while not (mark.exists() and mark.read_text()):
                if proc.poll() is not None:
                    raise AssertionError(
                        f"{what} ended (exit {proc.returncode}) before reaching {point}; "
                        f"stderr:\n{log.read_text(errors='replace')[-3000:]}"
                    )
                if time.monotonic() > deadline:
                    raise AssertionError(f"{what} did not reach {point} in {timeout} s")
                time.sleep(0.02)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.wait()
        assert proc.returncode == -signal.SIGKILL, f"{what} exited {proc.returncode}"


# corruption -> the file its error must name: the weights or the config
_CORRUPTIONS = {
    "truncated": "weights",
    "empty-config": "config",
    "list-config": "config",
    "nan": "weights",
    "wrong-shape": "weights",
    "missing-tensor": "weights",
}


def _corrupt(folder: Path, how: str, state: dict, save_file) -> None:
    """Damage a saved model folder the way ``how`` names (see ``_CORRUPTIONS``)."""
    from .hub import CONFIG_NAME, WEIGHTS_NAME

    weights, config = folder / WEIGHTS_NAME, folder / CONFIG_NAME
    if how == "truncated":
        data = weights.read_bytes()
        weights.write_bytes(data[: len(data) // 2])
    elif how == "empty-config":
        config.write_text("")
    elif how == "list-config":
        config.write_text("[]")
    else:
        import torch

        state = {k: v.clone().contiguous() for k, v in state.items()}
        key = next(k for k, v in state.items() if v.is_floating_point() and v.numel())
        if how == "nan":
            state[key].view(-1)[0] = float("nan")
        elif how == "wrong-shape":
            state[key] = torch.zeros(*state[key].shape, 2, dtype=state[key].dtype)
        else:
            del state[key]
        save_file(state, str(weights))


def _main(argv: list[str]) -> int:
    usage = "usage: python -m icml25_core.testing quick-start DISTRIBUTION [DIR]"
    if len(argv) not in (2, 3) or argv[0] != "quick-start":
        print(usage, file=sys.stderr)
        return 2
    cwd = Path(argv[2]) if len(argv) == 3 else Path.cwd()
    cwd.mkdir(parents=True, exist_ok=True)
    out = run_quick_start(argv[1], cwd)
    print(out, end="")
    print(f"{argv[1]}: README quick start ran")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
