"""Reports: a terminal table, ``report.md``, ``results.json`` and PNG plots."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from .experiment import Result
from .files import json_default


def format_value(mean: float, std: float | None = None) -> str:
    """``mean ± std`` with four significant digits; ``-`` for NaN."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "-"

    def one(v: float) -> str:
        if v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e5):
            return f"{v:.3e}"
        return f"{v:.4g}"

    if std is None or std == 0 or math.isnan(std):
        return one(mean)
    return f"{one(mean)} ± {one(std)}"


def _table_rows(result: Result) -> tuple[list[str], list[list[str]]]:
    summary = result.summary()
    setting_keys = list(dict.fromkeys(k for s in summary for k in s["setting"]))
    metric_keys = list(dict.fromkeys(k for s in summary for k in s["metrics"]))
    header = ["method", *setting_keys, "seeds", *metric_keys]
    body = []
    for s in summary:
        name = s["method"] + (" (baseline)" if s["baseline"] else "")
        cells = [name, *(str(s["setting"].get(k, "")) for k in setting_keys), str(s["seeds"])]
        cells += [format_value(*s["metrics"][k]) if k in s["metrics"] else "" for k in metric_keys]
        body.append(cells)
    return header, body


def render_result(result: Result, console: Console | None = None) -> None:
    """Print the claim, the aggregated table and the verdict."""
    console = console or Console()
    header, body = _table_rows(result)
    status = "[green]HELD[/green]" if result.held else "[red]DID NOT HOLD[/red]"
    table = Table(
        title=f"{result.method} · {result.experiment} · profile={result.profile} · "
        f"seeds={result.seeds}",
        caption=f"{result.wall_time_s:.1f} s",
    )
    for col in header:
        table.add_column(col, overflow="fold")
    for cells in body:
        table.add_row(*cells)
    console.print(f"[bold]Claim:[/bold] {result.claim}")
    console.print(table)
    console.print(f"{status}: {result.verdict.summary}\n")


def markdown_table(result: Result) -> str:
    """The aggregated table of ``result`` as GitHub Markdown (mean ± std over seeds)."""
    header, body = _table_rows(result)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return "\n".join(lines)


def write_reports(results: Sequence[Result], out_dir: str | Path) -> dict[str, Path]:
    """Write ``report.md`` and ``results.json`` for ``results`` into ``out_dir``.

    Returns
    -------
    dict
        ``{"markdown": path, "json": path}``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    parts = ["# icml25 reproduction report", ""]
    for r in results:
        status = "held" if r.held else "did NOT hold"
        resumed = f" ({len(r.resumed)} loaded from an earlier run)" if r.resumed else ""
        parts += [
            f"## {r.method} · {r.experiment}",
            "",
            f"**Claim.** {r.claim}",
            "",
            f"**Result: {status}.** {r.verdict.summary}",
            "",
            f"Profile `{r.profile}`, seeds {r.seeds}{resumed}, {r.wall_time_s:.1f} s. "
            "Values are mean ± std over seeds.",
            "",
            markdown_table(r),
            "",
        ]
        for fig in r.figures:
            parts += [f"![{Path(fig).stem}]({_link(fig, out)})", ""]
        env = ", ".join(f"{k} {v}" for k, v in r.environment.items())
        parts += [f"<sub>Environment: {env}</sub>", ""]
    md_path = out / "report.md"
    md_path.write_text("\n".join(parts))
    json_path = out / "results.json"
    json_path.write_text(json.dumps([r.to_dict() for r in results], indent=1, default=json_default))
    return {"markdown": md_path, "json": json_path}


def _link(path: str | Path, base: Path) -> str:
    """``path`` relative to ``base`` when it lies below it (so the report can move)."""
    full = Path(path).resolve()
    try:
        return full.relative_to(base.resolve()).as_posix()
    except ValueError:
        return full.as_posix()


def line_panels(
    panels: Mapping[str, Sequence[Mapping[str, Any]]],
    path: str | Path,
    *,
    xlabel: str,
    ylabel: str,
    logy: bool = False,
    title: str | None = None,
) -> Path:
    """Draw one subplot per panel, several lines per subplot, into a PNG.

    Parameters
    ----------
    panels : mapping of str to sequence of dict
        Panel title -> lines; each line has ``x``, ``y``, ``label`` and optional
        ``style`` (a matplotlib format string such as ``"--"``) and ``lo`` / ``hi``
        (a shaded band, e.g. mean ± std over seeds).
    path : path
        The PNG to write.
    xlabel, ylabel : str
        Axis labels shared by all panels.
    logy : bool
        Logarithmic y axis.
    title : str, optional
        Figure title.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    n = max(len(panels), 1)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.6), squeeze=False)
    for ax, (name, lines) in zip(axes[0], panels.items(), strict=False):
        for line in lines:
            (drawn,) = ax.plot(
                line["x"], line["y"], line.get("style", "-"), label=line.get("label")
            )
            if "lo" in line and "hi" in line:
                ax.fill_between(
                    line["x"], line["lo"], line["hi"], color=drawn.get_color(), alpha=0.2
                )
        ax.set_title(name)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if logy:
            ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        if any(line.get("label") for line in lines):
            ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    return save_figure(fig, path)


def grouped_bars(
    values: Mapping[str, Sequence[float]],
    groups: Sequence[str],
    path: str | Path,
    *,
    ylabel: str,
    ylim: tuple[float, float] | None = None,
    hline: float | None = None,
) -> Path:
    """Draw one group of bars per entry of ``groups``, one bar per series, into a PNG.

    Parameters
    ----------
    values : mapping of str to sequence of float
        Series label (e.g. a method) -> one value per group.
    groups : sequence of str
        Group labels along the x axis (e.g. settings or datasets).
    path : path
        The PNG to write.
    ylabel : str
    ylim : (float, float), optional
    hline : float, optional
        A dashed reference line (e.g. chance level).
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    for label, vals in values.items():
        if len(vals) != len(groups):
            raise ValueError(
                f"values[{label!r}] has {len(vals)} entries, expected one per group ({len(groups)})"
            )
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(groups)), 3.5))
    width = 0.8 / max(len(values), 1)
    x = np.arange(len(groups))
    for i, (label, vals) in enumerate(values.items()):
        ax.bar(x + i * width, vals, width, label=label)
    ax.set_xticks(x + 0.4 - width / 2)
    tilt = len(groups) > 4
    ax.set_xticklabels(
        groups, rotation=30 if tilt else 0, ha="right" if tilt else "center", fontsize=8
    )
    if hline is not None:
        ax.axhline(hline, color="0.5", ls="--", lw=0.8)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7, ncol=min(len(values), 4))
    return save_figure(fig, path)


def save_figure(fig: Any, path: str | Path, dpi: int = 110) -> Path:
    """Lay out, write and close a matplotlib figure; creates the folder; returns the path."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
