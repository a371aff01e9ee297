"""The paper's claim at laptop scale: ``log-regret``.

Per seed, random MDPs ``(H, S, A) = (2, 2, 2)`` and ``(5, 3, 2)`` (drawn with that seed):
FedQ-Hoeffding with ``M = 1`` and ``M = 10`` agents and single-agent UCB-Hoeffding run
``T`` episodes per agent. The regret is exact per round (dynamic programming); it is
read on a logarithmic grid of episode counts. Measured per run:

- ``exponent``: the slope of log regret against log t over the last decade
  ``[T/10, T]``; ``exponent_prev`` over the decade before;
- ``log_ratio``: (R(T) / log T) / (R(T/10) / log(T/10)), which is about 1 when
  regret / log T has levelled off; ``sqrt_ratio``: the same with sqrt, below 1 when
  regret / sqrt T falls;
- ``rounds``, and ``rounds_slope``: rounds against log t fitted over the last decade
  ``[T/10, T]`` (the asymptotic slope; earlier rounds carry the burn-in).

Sweeps (one seed each, base ``(H, S, A, M) = (2, 2, 2, 2)``) vary M, S and A over
``{2, 4, 6, 8}`` and record ``rounds_slope``.

Claim (Zhang, Zheng & Xue, 2025): with a positive gap, the regret grows like log T, not
sqrt T. The per-agent regret improves with M. The rounds grow linearly in log T, with a
slope nearly free of M, S and A. Here it holds when:

- for every MDP and M, the median exponent is below 0.5 and falls from the previous
  decade, ``log_ratio <= 1.25`` and ``sqrt_ratio < 1``;
- the per-agent regret at T is lower with M = 10 than with M = 1;
- in each sweep the rounds slope varies by at most 50 % of its mean.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from icml25_core import Experiment, Row, Verdict, line_panels

from .agents import FedQBernstein, FedQHoeffding, RunResult, UCBHoeffding
from .mdp import random_mdp

METHOD = "fedq-gap"
PROFILES = {
    "smoke": {
        "mdps": ((2, 2, 2),),
        "Ms": (1, 4),
        "T": 1000,
        "c": 0.1,
        "bernstein": False,
        "sweep_T": 300,
        "sweep_values": (2, 4),
    },
    "quick": {
        "mdps": ((2, 2, 2), (5, 3, 2)),
        "Ms": (1, 10),
        "T": 50_000,
        "c": 0.1,
        "bernstein": False,
        "sweep_T": 10_000,
        "sweep_values": (2, 4, 6, 8),
    },
    "full": {
        "mdps": ((2, 2, 2), (5, 3, 2)),
        "Ms": (1, 10),
        "T": 1_000_000,
        "c": 0.1,
        "bernstein": True,
        "sweep_T": 100_000,
        "sweep_values": (2, 4, 6, 8),
    },
}
"""MDP shapes, agent counts, episodes per agent, bonus constant ``c``, whether
FedQ-Bernstein runs too, and the sweeps' episodes and values."""
LOG_RATIO_MAX = 1.25
SLOPE_SPREAD_MAX = 0.5
SWEEP_BASE = {"H": 2, "S": 2, "A": 2, "M": 2}


def _grid(T: int) -> np.ndarray:
    return np.unique(np.geomspace(10, T, 40).astype(np.int64))


def _slope(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.polyfit(x, y, 1)[0])


def measure(result: RunResult) -> tuple[dict[str, float], dict[str, list[float]]]:
    """The metrics (see the module docstring) and the curves of one run."""
    T = result.T
    t = _grid(T)
    regret = result.regret(t)
    metrics = {"regret": float(result.regret([T])[0])}
    last, prev = t >= T / 10, (t >= T / 100) & (t <= T / 10)
    positive = regret > 0
    for name, mask in (("exponent", last), ("exponent_prev", prev)):
        use = mask & positive
        metrics[name] = (
            _slope(np.log(t[use]), np.log(regret[use])) if use.sum() >= 3 else float("nan")
        )
    r_tenth = float(result.regret([max(T // 10, 1)])[0])
    if r_tenth > 0 and T >= 100:
        metrics["log_ratio"] = (metrics["regret"] / np.log(T)) / (r_tenth / np.log(T / 10))
        metrics["sqrt_ratio"] = (metrics["regret"] / np.sqrt(T)) / (r_tenth / np.sqrt(T / 10))
    else:
        metrics["log_ratio"] = metrics["sqrt_ratio"] = float("nan")
    if result.federated:
        rounds = result.rounds_at(t)
        window = t >= T / 10
        metrics["rounds"] = float(result.rounds)
        metrics["rounds_slope"] = _slope(np.log(t[window]), rounds[window].astype(float))
        metrics["uploads"] = float(result.uploads[-1])
    curves = {"t": t.astype(float).tolist(), "regret": regret.tolist()}
    if "rounds" in metrics:
        curves["rounds"] = result.rounds_at(t).astype(float).tolist()
    return metrics, curves


def _run(config: dict, seed: int, out_dir: Path) -> list[Row]:
    rows: list[Row] = []
    c, T = config["c"], config["T"]
    for H, S, A in config["mdps"]:
        mdp = random_mdp(H, S, A, seed=seed)
        shape = f"{H},{S},{A}"
        for M in config["Ms"]:
            learners = {"FedQ-Hoeffding": FedQHoeffding(mdp, M=M, c=c, seed=seed)}
            if config["bernstein"]:
                learners["FedQ-Bernstein"] = FedQBernstein(mdp, M=M, c=c, seed=seed)
            for name, learner in learners.items():
                metrics, curves = measure(learner.run(T))
                metrics["min_gap"] = mdp.min_gap()
                rows.append(Row(name, seed, metrics, {"mdp": shape, "M": M}, curves=curves))
        metrics, curves = measure(UCBHoeffding(mdp, c=c, seed=seed).run(T))
        rows.append(
            Row(
                "UCB-Hoeffding", seed, metrics, {"mdp": shape, "M": 1}, baseline=True, curves=curves
            )
        )
    if seed == 0:  # the sweeps: one seed
        for swept in ("M", "S", "A"):
            for value in config["sweep_values"]:
                shape = {**SWEEP_BASE, swept: value}
                mdp = random_mdp(shape["H"], shape["S"], shape["A"], seed=100 + value)
                run = FedQHoeffding(mdp, M=shape["M"], c=c, seed=seed).run(config["sweep_T"])
                metrics, _ = measure(run)
                rows.append(Row("FedQ-Hoeffding", seed, metrics, {"sweep": swept, "value": value}))
    return rows


def _median(rows: list[Row], metric: str, method: str, **setting) -> float:
    vals = [
        r.metrics[metric]
        for r in rows
        if r.method == method
        and metric in r.metrics
        and all(r.setting.get(k) == v for k, v in setting.items())
    ]
    return float(np.nanmedian(vals)) if vals else float("nan")


def _judge(rows: list[Row]) -> Verdict:
    shapes = sorted({r.setting["mdp"] for r in rows if "mdp" in r.setting})
    Ms = sorted(
        {r.setting["M"] for r in rows if r.method == "FedQ-Hoeffding" and "mdp" in r.setting}
    )
    parts, ok = [], True
    for shape in shapes:
        for M in Ms:
            get = lambda m, s=shape, M=M: _median(rows, m, "FedQ-Hoeffding", mdp=s, M=M)  # noqa: E731
            e, e0, lr, sr = (
                get("exponent"),
                get("exponent_prev"),
                get("log_ratio"),
                get("sqrt_ratio"),
            )
            held = e < 0.5 and e < e0 and lr <= LOG_RATIO_MAX and sr < 1
            ok &= held
            parts.append(
                f"({shape}) M={M}: exponent {e:.2f} (prev {e0:.2f}), regret/logT ratio {lr:.2f}, "
                f"regret/sqrtT ratio {sr:.2f}"
            )
        if len(Ms) > 1:
            low, high = (
                _median(rows, "regret", "FedQ-Hoeffding", mdp=shape, M=Ms[-1]),
                _median(rows, "regret", "FedQ-Hoeffding", mdp=shape, M=Ms[0]),
            )
            ok &= low < high
            parts.append(f"({shape}) per-agent regret M={Ms[-1]} {low:.1f} vs M={Ms[0]} {high:.1f}")
    for swept in ("M", "S", "A"):
        slopes = [r.metrics["rounds_slope"] for r in rows if r.setting.get("sweep") == swept]
        if slopes:
            spread = (max(slopes) - min(slopes)) / np.mean(slopes)
            ok &= spread <= SLOPE_SPREAD_MAX
            shown = ", ".join(f"{s:.0f}" for s in slopes)
            parts.append(f"rounds per unit log T over {swept}: {shown} (spread {spread:.0%})")
    return Verdict(bool(ok), "; ".join(parts))


def _plot(rows: list[Row], out_dir: Path) -> list[Path]:
    panels_regret, panels_rounds = {}, {}
    for shape in sorted({r.setting["mdp"] for r in rows if "mdp" in r.setting}):
        lines_r, lines_c = [], []
        groups = {}
        for r in rows:
            if r.setting.get("mdp") == shape:
                groups.setdefault((r.method, r.setting["M"]), []).append(r)
        for (method, M), group in groups.items():
            t = np.array(group[0].curves["t"])
            x = np.log10(t).tolist()
            reg = np.array([g.curves["regret"] for g in group]) / np.log(t)
            lo, mid, hi = np.percentile(reg, [10, 50, 90], axis=0)
            label = f"{method} M={M}"
            lines_r.append(
                {"x": x, "y": mid.tolist(), "lo": lo.tolist(), "hi": hi.tolist(), "label": label}
            )
            if "rounds" in group[0].curves:
                rounds = np.median([g.curves["rounds"] for g in group], axis=0)
                lines_c.append({"x": np.log(t).tolist(), "y": rounds.tolist(), "label": label})
        panels_regret[f"(H,S,A)=({shape})"] = lines_r
        panels_rounds[f"(H,S,A)=({shape})"] = lines_c
    return [
        line_panels(
            panels_regret,
            out_dir / "regret-over-log-t.png",
            xlabel="log10 episodes per agent",
            ylabel="per-agent regret / log t (median, 10-90 %)",
        ),
        line_panels(
            panels_rounds, out_dir / "rounds.png", xlabel="log t", ylabel="communication rounds"
        ),
    ]


LOG_REGRET = Experiment(
    name="log-regret",
    claim=(
        "FedQ-Hoeffding's regret grows like log T (fitted exponent < 0.5 and falling, "
        "regret/log T levelling off while regret/sqrt T falls), the per-agent regret "
        "improves with M, and the rounds grow linearly in log T with a slope nearly free "
        "of M, S, A"
    ),
    run=_run,
    judge=_judge,
    profiles=PROFILES,
    plot=_plot,
    default_seeds=5,
)
