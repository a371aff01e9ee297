"""The experiment harness.

An experiment checks one claim of a paper. Its profiles are data: ``Experiment.profiles``
maps ``"smoke"`` (seconds: the code path end to end, for tests), ``"quick"`` (a laptop CPU,
about a minute: what the claim test asserts) and ``"full"`` (closer to the paper) to a
configuration dictionary. It runs once per seed, ``run(config, seed, out_dir) -> list[Row]``
with the chosen profile's configuration, each :class:`Row` holding one method's or baseline's
metrics in one setting; then ``judge(rows) -> Verdict`` decides over all seeds whether the
claim held and says why. :func:`run_experiment` ties these together into a :class:`Result`.

A claim that does not hold is a result, not an error: ``Result.held`` is ``False`` and the
verdict explains it.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .environment import environment
from .files import json_default, write_json_atomic
from .validation import check_choice

PROFILE_NAMES: tuple[str, ...] = ("smoke", "quick", "full")
SEED_FOLDER = "seeds"
"""Where :func:`run_experiment` records each finished seed, below its ``out_dir``."""
"""The profiles every experiment defines, from seconds (``smoke``) to the paper's scale."""
Setting = dict[str, str | int | float]
Config = Mapping[str, Any]


@dataclass
class Row:
    """One method (or baseline) in one setting for one seed.

    Attributes
    ----------
    method : str
        Who produced the numbers, e.g. ``"gsb-sinkhorn"`` or ``"POT sinkhorn_log"``.
    seed : int
        The seed of the run.
    metrics : dict of str to float
        Measured values. NaN marks a value that does not apply.
    setting : dict
        What was varied, e.g. ``{"divergence": "kl", "n": 200}``.
    baseline : bool
        ``True`` for a baseline or peer, ``False`` for the package's own method.
    curves : dict of str to list of float
        Optional series for plots (for example residual per iteration).
    """

    method: str
    seed: int
    metrics: dict[str, float]
    setting: Setting = field(default_factory=dict)
    baseline: bool = False
    curves: dict[str, list[float]] = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    """Whether a claim held over all seeds, and the numbers that decided it."""

    held: bool
    summary: str


@dataclass(frozen=True)
class Experiment:
    """A claim and how to check it.

    Attributes
    ----------
    name : str
        Short identifier, e.g. ``"linear-convergence"``.
    claim : str
        The paper's claim in words, with the margin that counts as holding.
    run : callable
        ``run(config, seed, out_dir) -> list[Row]``, ``config`` one of ``profiles``.
    judge : callable
        ``judge(rows) -> Verdict`` over the rows of every seed.
    profiles : mapping of str to mapping
        The configuration of each of :data:`PROFILE_NAMES` (``smoke``, ``quick``, ``full``);
        more may be added. ``smoke`` only checks the code path (seconds, its verdict means
        nothing), ``quick`` is what the claim test asserts, ``full`` comes closer to the paper.
    plot : callable, optional
        ``plot(rows, out_dir) -> list[Path]`` writing PNG figures.
    default_seeds : int
        Seeds used when the caller does not say.
    """

    name: str
    claim: str
    run: Callable[[Config, int, Path], list[Row]]
    judge: Callable[[list[Row]], Verdict]
    profiles: Mapping[str, Config]
    plot: Callable[[list[Row], Path], list[Path]] | None = None
    default_seeds: int = 3

    def __post_init__(self) -> None:
        missing = [p for p in PROFILE_NAMES if p not in self.profiles]
        if missing:
            raise ValueError(
                f"profiles of experiment {self.name!r} must define {list(PROFILE_NAMES)}; "
                f"missing {missing}"
            )

    def config(self, profile: str, **overrides: Any) -> dict[str, Any]:
        """A copy of ``profiles[profile]`` with ``overrides`` applied.

        An override must name a key the profile already has, so a typo is an error rather
        than a setting silently ignored.
        """
        check_choice(profile, "profile", tuple(self.profiles))
        cfg = dict(self.profiles[profile])
        unknown = sorted(set(overrides) - set(cfg))
        if unknown:
            raise ValueError(
                f"overrides {unknown} are not settings of {self.name!r}'s {profile!r} "
                f"profile; known: {sorted(cfg)}"
            )
        cfg.update(overrides)
        return cfg


@dataclass
class Result:
    """Everything one experiment produced, ready for reports.

    ``wall_time_s`` is the sum of the seeds' run times (seeds loaded from an earlier,
    interrupted run count with the time they took then); ``resumed`` lists those seeds.
    """

    method: str
    experiment: str
    claim: str
    profile: str
    seeds: list[int]
    rows: list[Row]
    verdict: Verdict
    wall_time_s: float
    environment: dict[str, str]
    figures: list[str] = field(default_factory=list)
    resumed: list[int] = field(default_factory=list)

    @property
    def held(self) -> bool:
        """Whether the claim held (``verdict.held``)."""
        return self.verdict.held

    def summary(self) -> list[dict[str, Any]]:
        """Rows aggregated over seeds: one entry per (method, setting) with mean and std.

        Returns
        -------
        list of dict
            Each has ``method``, ``baseline``, ``setting``, ``seeds`` and ``metrics``, the
            latter mapping a metric name to ``(mean, std)`` over the seeds that reported it.
        """
        groups: dict[tuple[str, str], list[Row]] = {}
        for row in self.rows:
            key = (row.method, json.dumps(row.setting, sort_keys=True))
            groups.setdefault(key, []).append(row)
        out = []
        for (method, _), rows in groups.items():
            names = list(dict.fromkeys(k for r in rows for k in r.metrics))
            metrics = {}
            for name in names:
                vals = np.array([r.metrics[name] for r in rows if name in r.metrics], dtype=float)
                vals = vals[~np.isnan(vals)]
                if vals.size == 0:
                    metrics[name] = (math.nan, math.nan)
                else:
                    metrics[name] = (
                        float(vals.mean()),
                        float(vals.std(ddof=1)) if vals.size > 1 else 0.0,
                    )
            out.append(
                {
                    "method": method,
                    "baseline": rows[0].baseline,
                    "setting": rows[0].setting,
                    "seeds": len(rows),
                    "metrics": metrics,
                }
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary (curves included)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        """Rebuild a result from :meth:`to_dict` output (for example a ``results.json``)."""
        data = dict(data)
        data["rows"] = [Row(**r) for r in data["rows"]]
        data["verdict"] = Verdict(**data["verdict"])
        return cls(**data)


def mean_metric(rows: Sequence[Row], metric: str, method: str, **setting: Any) -> float:
    """Mean of ``metric`` over the rows of ``method`` whose setting matches ``setting``.

    Returns NaN when no row matches (a method or setting that was not run).
    """
    vals = [
        r.metrics[metric]
        for r in rows
        if r.method == method and all(r.setting.get(k) == v for k, v in setting.items())
    ]
    return float(np.mean(vals)) if vals else float("nan")


def _as_json(obj: Any) -> Any:
    """``obj`` as it reads back from JSON (tuples become lists, NumPy values plain)."""
    return json.loads(json.dumps(obj, sort_keys=True, default=json_default))


def _seed_record(path: Path, expected: dict[str, Any]) -> tuple[list[Row], float]:
    """The rows and run time of a recorded seed, after checking it belongs to this run."""
    try:
        data = json.loads(path.read_text())
        rows = [Row(**r) for r in data["rows"]]
        wall = float(data["wall_time_s"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"seed record {path} is corrupt ({exc}); delete it to rerun that seed"
        ) from exc
    differ = sorted(k for k, v in expected.items() if data.get(k) != v)
    if differ:
        raise ValueError(
            f"seed record {path} was written by a different run (its {differ} differ from "
            "this one's): resume only with the same experiment, profile, settings and "
            "method version, or use a new output folder"
        )
    return rows, wall


def registered_method(experiment: Experiment) -> str | None:
    """The name of the installed method whose registration names ``experiment``, if any.

    Only registrations whose experiment module is already imported are compared, so this
    imports nothing heavy.
    """
    from .method import discover_methods

    for method in discover_methods().values():
        for target in method.experiments.values():
            module_name, _, attr = target.partition(":")
            module = sys.modules.get(module_name)
            if module is not None and getattr(module, attr, None) is experiment:
                return method.name
    return None


def run_experiment(
    experiment: Experiment,
    *,
    profile: str = "quick",
    seeds: int | Sequence[int] | None = None,
    out_dir: str | Path,
    overrides: Mapping[str, Any] | None = None,
    method: str | None = None,
    on_seed_done: Callable[[int], None] | None = None,
    resume: bool = False,
) -> Result:
    """Run ``experiment`` for every seed, judge the claim, draw its plots.

    Parameters
    ----------
    experiment : Experiment
        What to run.
    profile : str
        One of ``experiment.profiles``: ``smoke`` (seconds), ``quick`` (a laptop CPU,
        about a minute) or ``full`` (closer to the paper).
    seeds : int or sequence of int, optional
        A count ``N`` (seeds ``0..N-1``) or explicit seeds; defaults to the experiment's.
    out_dir : path
        Where per-experiment files (plots) go; created if missing. Each finished seed is
        recorded atomically in ``out_dir/seeds/seed-<seed>.json`` (its rows, run time,
        profile, settings and the method's version), so an interrupted run loses only the
        seed in progress.
    overrides : mapping, optional
        Settings that replace the profile's (keys the profile has), see
        :meth:`Experiment.config`.
    method : str, optional
        The method package's name for the record. By default the installed method whose
        ``icml25.methods`` registration names this experiment (its version goes into the
        environment record); ``"unregistered"`` when none does.
    on_seed_done : callable, optional
        Called with each seed after it finishes or is loaded (progress reporting).
    resume : bool
        Load the seeds already recorded in ``out_dir`` instead of running them again. A
        record from another experiment, profile, settings or method version, or a corrupt
        one, raises ``ValueError`` naming the file; nothing is silently mixed.
    """
    config = experiment.config(profile, **(overrides or {}))
    if method is None:
        method = registered_method(experiment) or "unregistered"
    distributions = () if method == "unregistered" else (method,)
    if seeds is None:
        seeds = experiment.default_seeds
    if isinstance(seeds, int):
        if seeds < 1:
            raise ValueError(f"seeds must be a positive count or a list of seeds, got {seeds}")
        seed_list = list(range(seeds))
    else:
        seed_list = [int(s) for s in seeds]
        if not seed_list:
            raise ValueError("seeds must not be empty")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    env = environment(*distributions)
    identity = {
        "experiment": experiment.name,
        "profile": profile,
        "config": _as_json(config),
        "method": method,
        "method_version": env.get(method, "unregistered"),
    }
    rows: list[Row] = []
    resumed: list[int] = []
    wall = 0.0
    for seed in seed_list:
        record = out / SEED_FOLDER / f"seed-{seed}.json"
        if resume and record.exists():
            seed_rows, seed_wall = _seed_record(record, {**identity, "seed": seed})
            resumed.append(seed)
        else:
            start = time.perf_counter()
            seed_rows = experiment.run(config, seed, out)
            seed_wall = time.perf_counter() - start
            write_json_atomic(
                record,
                {
                    **identity,
                    "seed": seed,
                    "wall_time_s": seed_wall,
                    "rows": [asdict(r) for r in seed_rows],
                },
            )
        rows.extend(seed_rows)
        wall += seed_wall
        if on_seed_done is not None:
            on_seed_done(seed)
    verdict = experiment.judge(rows)
    if not isinstance(verdict, Verdict):
        raise TypeError(
            f"judge of experiment {experiment.name!r} must return a Verdict, "
            f"got {type(verdict).__name__}"
        )
    figures = [str(p) for p in experiment.plot(rows, out)] if experiment.plot else []
    return Result(
        method=method,
        experiment=experiment.name,
        claim=experiment.claim,
        profile=profile,
        seeds=seed_list,
        rows=rows,
        verdict=verdict,
        wall_time_s=wall,
        environment=env,
        figures=figures,
        resumed=resumed,
    )
