"""The ``icml25`` command: list, info, reproduce, bench."""

from __future__ import annotations

import importlib.util
import itertools
import shutil
import sys
import traceback
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from .bench import BenchReport
from .experiment import PROFILE_NAMES, Result, run_experiment
from .method import Method, discover_methods, get_method
from .progress import make_progress
from .report import render_result, write_reports

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Reproduce and benchmark ICML 2025 methods installed from the icml25 packages.",
)
# Outside a terminal (CI logs, pipes) rich would wrap wide claim tables at 80 columns.
console = Console(width=None if sys.stdout.isatty() else 200)


def _method_or_exit(name: str) -> Method:
    try:
        return get_method(name)
    except LookupError as err:
        console.print(f"[red]{err}[/red]")
        raise typer.Exit(2) from None


@app.command("list")
def list_methods() -> None:
    """List the installed methods."""
    methods = discover_methods()
    if not methods:
        console.print("no icml25 method is installed")
        return
    for m in methods.values():
        console.print(f"[bold]{m.name}[/bold] {m.version}  {m.summary}")


@app.command()
def info(name: str) -> None:
    """Show a method's paper, version, experiments and benchmarks."""
    m = _method_or_exit(name)
    console.print(f"[bold]{m.name}[/bold] {m.version}")
    console.print(f"{m.title}")
    console.print(f"{', '.join(m.authors)} · {m.venue}")
    console.print(m.url)
    console.print(m.summary)
    console.print(f"experiments: {', '.join(m.experiments) or 'none'}")
    bench_dir = m.benchmarks_dir()
    console.print(
        f"benchmarks: {bench_dir if bench_dir else 'not in this install (source checkout only)'}"
    )


RUN_MARKER = ".icml25-run"


def _prepare_out(out: Path | None, overwrite: bool, resume: bool = False) -> Path:
    """The folder a command writes into. Default: a new ``runs/<date-time-microseconds>``
    (a suffix if it exists). ``--out DIR``: used if absent or empty; a non-empty DIR is
    refused unless ``--overwrite``, which clears an earlier icml25 run folder (it holds
    the marker file) so that no stale part stays, and writes into any other folder without
    deleting anything there, or ``--resume``, which keeps an earlier icml25 run folder as
    it is (its recorded seeds are reused) and refuses any other folder."""
    if resume:
        if out is None or overwrite:
            console.print(
                "[red]--resume needs --out (the interrupted run) and no --overwrite[/red]"
            )
            raise typer.Exit(2)
        if out.exists() and not (out / RUN_MARKER).is_file():
            console.print(f"[red]--out {out} is not an icml25 run folder: nothing to resume[/red]")
            raise typer.Exit(2)
    if out is None:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
        Path("runs").mkdir(exist_ok=True)
        for i in itertools.count():
            out = Path("runs") / (stamp if i == 0 else f"{stamp}-{i}")
            try:
                out.mkdir()
                break
            except FileExistsError:
                continue
    else:
        if out.exists() and not out.is_dir():
            console.print(f"[red]--out {out} is a file, not a folder[/red]")
            raise typer.Exit(2)
        if out.is_dir() and any(out.iterdir()) and not resume:
            if not overwrite:
                console.print(
                    f"[red]--out {out} is not empty: pass --overwrite to replace an earlier "
                    "run there, or choose another folder[/red]"
                )
                raise typer.Exit(2)
            if not (out / RUN_MARKER).is_file():
                return out  # a folder icml25 did not make: written into, never marked ours
            shutil.rmtree(out)  # an earlier run of ours: its stale parts go too
        out.mkdir(parents=True, exist_ok=True)
    (out / RUN_MARKER).write_text("written by icml25; --overwrite may replace this folder\n")
    return out


@app.command()
def reproduce(
    names: Annotated[
        list[str] | None, typer.Argument(help="Method names; see `icml25 list`.")
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every installed method.")] = False,
    profile: Annotated[
        str, typer.Option(help="smoke (seconds, checks the code path), quick (CPU) or full.")
    ] = "quick",
    seeds: Annotated[
        int | None, typer.Option(min=1, help="Number of seeds (default: the experiment's).")
    ] = None,
    experiment: Annotated[str | None, typer.Option(help="Only this experiment.")] = None,
    out: Annotated[
        Path | None, typer.Option(help="Output folder (default: a new runs/<timestamp>).")
    ] = None,
    overwrite: Annotated[
        bool, typer.Option(help="Write into a non-empty --out (an earlier run there is replaced).")
    ] = False,
    resume: Annotated[
        bool,
        typer.Option(
            help="Continue an interrupted run in --out: its recorded seeds (same profile, "
            "settings and method version) are loaded, the others run."
        ),
    ] = False,
) -> None:
    """Run methods' claim experiments, print the claim tables, write the report.

    Exits non-zero only if an experiment crashes: a claim that does not hold is a result.
    """
    if profile not in PROFILE_NAMES:
        console.print(f"[red]--profile must be one of {PROFILE_NAMES}, got {profile!r}[/red]")
        raise typer.Exit(2)
    if all_ == bool(names):
        console.print("[red]give method names or --all (not both)[/red]")
        raise typer.Exit(2)
    methods = (
        list(discover_methods().values()) if all_ else [_method_or_exit(n) for n in names or []]
    )
    if experiment is not None and not any(experiment in m.experiments for m in methods):
        console.print(
            f"[red]--experiment {experiment!r} is not an experiment of the chosen methods[/red]"
        )
        raise typer.Exit(2)
    out_dir = _prepare_out(out, overwrite, resume)
    results: list[Result] = []
    crashed: list[str] = []
    for m in methods:
        for exp_name in m.experiments:
            if experiment is not None and exp_name != experiment:
                continue
            label = f"{m.name}:{exp_name}"
            try:
                exp = m.load_experiment(exp_name)
                n = seeds or exp.default_seeds
                with make_progress(transient=True) as progress:
                    task = progress.add_task(f"{label} ({profile})", total=n)
                    result = run_experiment(
                        exp,
                        profile=profile,
                        seeds=n,
                        out_dir=out_dir / m.name / exp_name,
                        method=m.name,
                        resume=resume,
                        on_seed_done=lambda _s, task=task, progress=progress: progress.advance(
                            task
                        ),
                    )
            except Exception:
                console.print(f"[red]{label} crashed:[/red]")
                console.print(traceback.format_exc())
                crashed.append(label)
                continue
            render_result(result, console)
            results.append(result)
    if results:
        paths = write_reports(results, out_dir)
        console.print(f"report: {paths['markdown']}  data: {paths['json']}")
    if crashed:
        console.print(f"[red]crashed: {', '.join(crashed)}[/red]")
        raise typer.Exit(1)


def _load_bench_module(path: Path):
    spec = importlib.util.spec_from_file_location(f"icml25_bench_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load benchmark file {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not callable(getattr(module, "run", None)):
        raise AttributeError(f"benchmark file {path} must define run(smoke: bool) -> BenchReport")
    return module


@app.command()
def bench(
    name: str,
    smoke: Annotated[
        bool, typer.Option(help="Tiny sizes, one repeat: checks the benchmark runs.")
    ] = False,
    out: Annotated[
        Path | None, typer.Option(help="Folder for bench JSON (default: a new runs/<timestamp>).")
    ] = None,
    overwrite: Annotated[
        bool, typer.Option(help="Write into a non-empty --out (an earlier run there is replaced).")
    ] = False,
) -> None:
    """Benchmark a method against the library a user would otherwise pick."""
    m = _method_or_exit(name)
    bench_dir = m.benchmarks_dir()
    if bench_dir is None:
        console.print(
            f"[red]{m.name}'s benchmarks ship with its source tree (packages/{m.name}/benchmarks/), "
            "not with the wheel; run this from a checkout of the icml25 repository[/red]"
        )
        raise typer.Exit(2)
    files = sorted(bench_dir.glob("bench_*.py"))
    if not files:
        console.print(f"[red]no bench_*.py in {bench_dir}[/red]")
        raise typer.Exit(2)
    out_dir = _prepare_out(out, overwrite)
    for path in files:
        report: BenchReport = _load_bench_module(path).run(smoke=smoke)
        report.render(console)
        written = report.write_json(
            out_dir / m.name / f"{path.stem}{'-smoke' if smoke else ''}.json"
        )
        console.print(f"written: {written}")


def main() -> None:
    """Console-script entry point."""
    app()
