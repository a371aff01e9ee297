"""How much room every claim-test assertion has, over seeds and CPU kernel paths.

A claim test asserts what its quick experiment measured on its seeds, on one machine. The
same code gives other floating-point results on another CPU (other BLAS kernels and
instruction sets), training takes another path, and a margin set from one run fails on the
next (issue 77). This script re-runs every claim test file unchanged, with two things
varied:

* the seeds: ``--shifts K`` runs each file K times, the k-th time with every seed the test
  uses moved by ``100 * k`` (what an ``Experiment``'s ``run`` is called with, and the
  ``seed`` argument of the functions the test module imports), so a test on the mean of 3
  seeds is judged on means of 3 other seeds;
* the CPU kernel path: ``--variants native,avx2``. ``avx2`` makes torch (ATen kernels,
  MKL, oneDNN) and NumPy's OpenBLAS use their AVX2 code paths, as on an AMD EPYC without
  AVX-512 (Zen 2/3), instead of this machine's AVX-512 ones: other kernels, other rounding,
  the same code.

Every run uses one thread per BLAS/OpenMP pool (as a CI worker does) and records, through
pytest's ``pytest_assertion_pass`` hook, each assertion's source line and the values it
compared, pass or fail. ``report`` turns the records into the table in
``ci/claim_margins.md``: per assertion, the slack (how far the compared sides are from
failing: ``lhs - rhs`` for ``>=``/``>``, ``rhs - lhs`` for ``<=``/``<``) as min / mean /
standard deviation over the runs, and a verdict:

* ``fragile``: an assertion failed in some run, or its mean slack is under twice its spread
  (standard deviation over runs);
* ``ok``: otherwise.

Usage (a resumable background job; each finished run is one JSON file)::

    uv run python ci/claim_spread.py run --shifts 3 --variants native,avx2 [FILES...]
    uv run python ci/claim_spread.py report > ci/claim_margins.md

``tests/test_claim_spread.py`` checks that ``ci/claim_margins.md`` is what ``report``
makes of the committed records in ``ci/claim_runs/``.

Used as a pytest plugin by ``run`` (``-p claim_spread``); it does nothing unless
``ICML25_SPREAD_OUT`` is set.
"""

from __future__ import annotations

import argparse
import ast
import json
import linecache
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: one JSON file per run (committed: the table in claim_margins.md is generated from them)
RECORDS = Path(os.environ.get("ICML25_CLAIM_RUNS", ROOT / "ci" / "claim_runs"))
#: pytest's rewritten test modules (with the pass hook), cached apart from CI's
PYCACHE = ROOT / ".claim-spread-pycache"
#: environment of the kernel-path variants (the single-thread pins apply to every variant)
VARIANTS = {
    "native": {},
    "avx2": {
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "DNNL_MAX_CPU_ISA": "AVX2",
        "OPENBLAS_CORETYPE": "Zen",
    },
}
SINGLE_THREAD = {
    v: "1"
    for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")
}


# --------------------------------------------------------------------------- the plugin


def _out() -> Path | None:
    out = os.environ.get("ICML25_SPREAD_OUT")
    return Path(out) if out else None


_RECORD: dict = {"assertions": [], "tests": {}, "experiments": []}


#: seeds of the k-th shift: the test's own seed plus SEED_STEP * k (disjoint from the
#: test's seeds, which are all below SEED_STEP)
SEED_STEP = 100


def _shifted(fn, position):
    """``fn`` with its ``seed`` argument (keyword, or positional at ``position``) moved by
    the run's shift."""
    shift = int(os.environ.get("ICML25_SEED_SHIFT", "0")) * SEED_STEP

    def wrapper(*args, **kwargs):
        if "seed" in kwargs:
            kwargs["seed"] = int(kwargs["seed"]) + shift
        elif len(args) > position:
            args = (*args[:position], int(args[position]) + shift, *args[position + 1 :])
        return fn(*args, **kwargs)

    wrapper.__wrapped__ = fn
    return wrapper


def pytest_configure(config):
    if _out() is None:
        return
    import icml25_core
    import icml25_core.experiment as experiment_module

    original = experiment_module.run_experiment

    def recorded(experiment, **kwargs):
        result = original(experiment, **kwargs)
        _RECORD["experiments"].append(
            {
                "experiment": result.experiment,
                "profile": result.profile,
                "seeds": result.seeds,
                "seed_shift": int(os.environ.get("ICML25_SEED_SHIFT", "0")) * SEED_STEP,
                "held": result.held,
                "environment": result.environment,
                "rows": [
                    {"method": r.method, "setting": r.setting, "metrics": r.metrics}
                    for r in result.rows
                ],
            }
        )
        return result

    icml25_core.run_experiment = recorded
    experiment_module.run_experiment = recorded


def pytest_collection_modifyitems(items):
    """Move the seeds of what the claim test modules call: every ``Experiment``'s ``run``
    (seed: its second argument) and every imported function with a ``seed`` parameter."""
    if _out() is None:
        return
    import inspect

    from icml25_core import Experiment

    done = set()
    for module in {item.module for item in items if getattr(item, "module", None)}:
        for name, value in list(vars(module).items()):
            if id(value) in done:
                continue
            done.add(id(value))
            if isinstance(value, Experiment) and not hasattr(value.run, "__wrapped__"):
                object.__setattr__(value, "run", _shifted(value.run, 1))
            elif inspect.isfunction(value) and value.__module__ != module.__name__:
                params = list(inspect.signature(value).parameters)
                if "seed" in params:
                    setattr(module, name, _shifted(value, params.index("seed")))
                    _RECORD.setdefault("shifted_functions", []).append(f"{module.__name__}.{name}")


def pytest_assertion_pass(item, lineno, orig, expl):
    if _out() is not None:
        _RECORD["assertions"].append(
            {
                "test": item.nodeid.split("::", 1)[1],
                "line": lineno,
                "source": orig,
                "explanation": expl,
                "passed": True,
            }
        )


def pytest_runtest_logreport(report):
    if _out() is None or report.when != "call":
        return
    test = report.nodeid.split("::", 1)[1]
    _RECORD["tests"][test] = report.outcome
    if report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        source = linecache.getline(crash.path, crash.lineno).strip() if crash else ""
        _RECORD["assertions"].append(
            {
                "test": test,
                "line": crash.lineno if crash else None,
                "source": source.removeprefix("assert ").strip(),
                "explanation": crash.message if crash else str(report.longrepr)[-400:],
                "passed": False,
            }
        )


def pytest_sessionfinish(session):
    out = _out()
    if out is None:
        return
    from icml25_core.files import write_json_atomic

    write_json_atomic(out, _RECORD)


# --------------------------------------------------------------------------- the runs


def claim_files() -> list[str]:
    return sorted(
        p.relative_to(ROOT).as_posix() for p in ROOT.glob("packages/*/tests/test_claim*.py")
    )


def _record_path(file: str, shift: int, variant: str) -> Path:
    stem = file.replace("packages/", "").replace("/tests/", "--").removesuffix(".py")
    return RECORDS / f"{stem}--shift{shift}--{variant}.json"


def run(files: list[str], shifts: int, variants: list[str], reverse: bool = False) -> None:
    """Run every (shift, variant, file) not yet recorded; a second process on the same
    folder (``reverse`` to start from the other end) skips what the first is running."""
    jobs = [(v, k, f) for k in range(shifts) for v in variants for f in files]
    for variant, shift, file in reversed(jobs) if reverse else jobs:
        path = _record_path(file, shift, variant)
        running = path.with_suffix(".running")
        if path.exists() or running.exists():
            continue
        running.touch()
        env = {
            **os.environ,
            **SINGLE_THREAD,
            **VARIANTS[variant],
            "ICML25_SPREAD_OUT": str(path),
            "ICML25_SEED_SHIFT": str(shift),
            "PYTHONPATH": os.pathsep.join([str(ROOT / "ci"), os.environ.get("PYTHONPATH", "")]),
            "PYTHONPYCACHEPREFIX": str(PYCACHE),
        }
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", file, "-q", "-n", "0", "-p", "claim_spread",
             "-p", "no:cacheprovider", "-o", "enable_assertion_pass_hook=true", "--tb=short"],
            cwd=ROOT, env=env, capture_output=True, text=True,
        )  # fmt: skip
        took = time.perf_counter() - start
        print(f"{file} shift={shift} {variant}: rc={proc.returncode} {took:.0f} s", flush=True)
        if path.exists():
            data = json.loads(path.read_text())
            data["wall_s"] = took
            data["returncode"] = proc.returncode
            data["commit"] = subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
            ).stdout.strip()
            path.write_text(json.dumps(data))
        else:
            print(proc.stdout[-2000:], proc.stderr[-2000:], flush=True)
        running.unlink()


# --------------------------------------------------------------------------- the report


def _value(node: ast.AST) -> float | None:
    """The number an arithmetic expression of numbers (pytest's explanation) stands for."""
    try:
        value = eval(compile(ast.Expression(node), "<expl>", "eval"), {"__builtins__": {}})
    except Exception:
        return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def comparison(explanation: str) -> tuple[float, float | None] | None:
    """How far a comparison was from failing, and its margin, from pytest's explanation.

    The first line of the explanation is the comparison with its operands' values
    (``0.203 >= (0.166 + 0.05)``). Returns ``(slack, margin)``: the slack is ``lhs - rhs``
    for ``>``/``>=`` and ``rhs - lhs`` for ``<``/``<=``; the margin is the constant the
    right side adds to (``>=``) or takes from (``<=``) the value it compares with (None for
    a comparison with a plain threshold). None when the line is not one comparison of two
    numbers.
    """
    lines = [ln.strip().removeprefix("AssertionError: ") for ln in explanation.strip().splitlines()]
    # a failure's message comes first ("AssertionError: <the assert's message>"), then
    # the "assert ..." line with the values
    first = next((ln for ln in lines if ln.startswith("assert ")), lines[0] if lines else "")
    first = first.removeprefix("assert ").strip()
    try:
        node = ast.parse(first, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Compare) or len(node.ops) != 1:
        return None
    lhs, rhs = _value(node.left), _value(node.comparators[0])
    if lhs is None or rhs is None:
        return None
    op, right = node.ops[0], node.comparators[0]
    margin = None
    if isinstance(right, ast.BinOp) and isinstance(right.op, (ast.Add, ast.Sub)):
        m, rest = _value(right.right), _value(right.left)
        if m is not None and rest is not None:
            margin = m if isinstance(right.op, ast.Add) else -m
    if isinstance(op, (ast.Gt, ast.GtE)):
        return lhs - rhs, margin
    if isinstance(op, (ast.Lt, ast.LtE)):
        return rhs - lhs, None if margin is None else -margin
    return None


#: checks that only mean something on the test's own seeds: their failures in shifted runs
#: are reported as such, not as fragile margins
SEED_ZERO_ONLY = {
    ("fedq-gap/test_claim", "test_rounds_slope_is_nearly_free_of_m"): (
        "the M/S/A sweeps run on seed 0 only"
    ),
    ("juice-lm/test_claim", "test_each_seed_leaves_its_head_scores"): (
        "reads head-scores-seed0.json"
    ),
    ("otp-map/test_claim", "test_otp_beats_semidual_on_point_masses"): (
        "the experiment keeps samples for its plot on seed 0 only"
    ),
}


def _runs() -> dict[str, dict[str, dict]]:
    """{test file: {"shift/variant": record}} of every finished run."""
    runs: dict[str, dict[str, dict]] = {}
    for path in sorted(RECORDS.glob("*--shift*.json")):
        package, test_file, shift, variant = path.stem.split("--")
        runs.setdefault(f"{package}/{test_file}", {})[
            f"{shift.removeprefix('shift')}/{variant}"
        ] = json.loads(path.read_text())
    return runs


def _statement(source: str) -> str:
    """An assertion's expression as one line, without its comment or message."""
    text = " ".join(source.split("  #")[0].split()).removeprefix("assert ")
    try:
        node = ast.parse(f"assert {text}", mode="exec").body[0]
    except (SyntaxError, IndexError):
        return text
    if isinstance(node, ast.Assert) and node.msg is not None:  # "x >= 0.03, (norm, x)"
        return text[: node.msg.col_offset - len("assert ")].rstrip().removesuffix(",").rstrip()
    return text


def _merge_failures(table: dict) -> None:
    """A failure records only its first source line: file it under the assertion that
    starts on the same line of the same test (when a run passed it)."""
    for key in [k for k in table if all(not p for got in table[k].values() for p, _ in got)]:
        test, line, source = key
        twins = [k for k in table if k[:2] == (test, line) and k != key]
        head = source.rstrip("(").strip()
        match = [k for k in twins if _statement(k[2]).startswith(head[:15])] or twins
        if len(match) == 1:
            for run_id, got in table.pop(key).items():
                table[match[0]].setdefault(run_id, []).extend(got)


def report() -> str:
    """The margin table: one line per numeric claim assertion (a loop's iterations judged
    by their worst case in each run), and per test file its other checks and failures."""
    lines = [
        "| test file | test | assertion | margin | runs | failed | slack min | slack mean "
        "| spread (sd) | verdict |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    cpus, other = set(), []
    for file, by_run in _runs().items():
        table: dict[tuple[str, str], dict[str, list]] = {}
        for run_id, data in by_run.items():
            for e in data["experiments"]:
                env = e["environment"]
                cpus.add(f"{run_id.split('/')[1]}: {env.get('cpu')} ({env.get('cpu_capability')})")
            for a in data["assertions"]:
                key = (a["test"], a["line"] or 0, _statement(a["source"]))
                entry = table.setdefault(key, {})
                entry.setdefault(run_id, []).append((a["passed"], comparison(a["explanation"])))
        _merge_failures(table)
        checks = failures = 0
        for (test, _, source), obs in sorted(table.items()):
            numeric = [f for got in obs.values() for _, f in got if f is not None]
            failed = sum(any(not p for p, _ in got) for got in obs.values())
            if not numeric:
                checks += 1
                if not failed:
                    continue
                why = SEED_ZERO_ONLY.get((file, test))
                shifted_only = all(
                    all(p for p, _ in got)
                    for run_id, got in obs.items()
                    if run_id.split("/")[0] == "0"
                )
                if why and shifted_only:
                    verdict = f"seed 0 only: {why}"
                else:
                    verdict = "fragile"
                    failures += failed
                lines.append(
                    f"| {file} | {test} | `{source[:80]}` | | {len(obs)} | {failed} "
                    f"| | | | {verdict} |"
                )
                continue
            worst = [min(f[0] for _, f in got if f is not None) for got in obs.values()
                     if any(f is not None for _, f in got)]  # fmt: skip
            margins = {f[1] for f in numeric}
            margin = f"{margins.pop():+.3g}" if len(margins) == 1 and None not in margins else ""
            mean = statistics.fmean(worst)
            sd = statistics.stdev(worst) if len(worst) > 1 else float("nan")
            fragile = failed > 0 or (len(worst) > 1 and mean < 2 * sd)
            src = source.split(" #")[0].replace("|", "\\|")[:90]
            loop = f" (x{len(numeric) // len(worst)})" if len(numeric) > len(worst) else ""
            lines.append(
                f"| {file} | {test} | `{src}`{loop} | {margin} | {len(worst)} | {failed} | "
                f"{min(worst):.3g} | {mean:.3g} | {sd:.2g} | {'fragile' if fragile else 'ok'} |"
            )
        walls = [d.get("wall_s", 0.0) for d in by_run.values()]
        other.append(
            f"| {file} | {len(by_run)} | {', '.join(sorted(by_run))} | {checks} | {failures} "
            f"| {statistics.fmean(walls):.0f} |"
        )
    head = [
        "# Claim-test margins and the spread they rest on",
        "",
        "Generated by `uv run python ci/claim_spread.py report > ci/claim_margins.md` from the",
        "runs in `ci/claim_runs/` (one JSON file per run of a claim test file: `shift` k moves",
        f"every seed the test uses by {SEED_STEP} k; `native` is this machine's kernels,",
        "`avx2` torch, MKL, oneDNN and OpenBLAS on their AVX2 paths, as on an AMD EPYC without",
        "AVX-512; one thread each). Per assertion: its margin where it adds one (the lead it",
        "demands; negative: the tolerance it grants), the slack",
        "(how far the compared sides were from failing; a loop's worst iteration per run),",
        "and **fragile** where a run failed or the mean slack is under twice its standard",
        "deviation. Where the two kernel paths give the same figures to the bit (many",
        "packages: too little or too simple float work to take another path), three runs",
        "are two independent samples and the spread is a rough guide; the fixes in",
        'CONTRIBUTING.md ("Claim tests on any CPU") also use the per-seed figures READMEs',
        "and issues recorded on other machines. Runs record the commit they ran from.",
        "",
        "Machines and torch kernel paths: " + "; ".join(sorted(cpus)) + ".",
        "",
        "| test file | runs | shift/variant | other checks | their failed runs | s per run |",
        "|---|---:|---|---:|---:|---:|",
        *other,
        "",
    ]
    return "\n".join(head + lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("files", nargs="*")
    r.add_argument("--shifts", type=int, default=3)
    r.add_argument("--variants", default="native,avx2")
    r.add_argument("--reverse", action="store_true", help="start from the last job")
    sub.add_parser("report")
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args.files or claim_files(), args.shifts, args.variants.split(","), args.reverse)
    else:
        sys.stdout.write(report())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
