"""drebo-ssl against BoTorch GP + LogEI: wall time of one suggestion as data grows.

1. One ``ask()`` on Branin after n in {50, 200, 1000} uniform observations: DRE-BO-SSL
   (label propagation, 100 unlabelled points, bandwidth search, L-BFGS-B from 100 of 1000
   candidates) vs BoTorch ``SingleTaskGP`` + ``LogExpectedImprovement`` (``optimize_acqf``,
   10 restarts, 256 raw samples) vs BORE (MLP). Slopes: growth of time with n.
2. The SSL graph alone: one ``ask()`` with 50 observations and 100, 500, 1000 unlabelled
   points.

Run: ``icml25 bench drebo-ssl`` (or ``--smoke``).
"""

from __future__ import annotations

import numpy as np

from drebo_ssl import BORE, DREBOSSL, GPLogEI, get_problem
from icml25_core import BenchReport, compare, make_report

PROBLEM = get_problem("branin")
SWEEP = "DRE-BO-SSL (LP), unlabelled sweep"


def _told(make, n: int):
    rng = np.random.default_rng(0)
    X = PROBLEM.bounds[0] + rng.random((n, 2)) * (PROBLEM.bounds[1] - PROBLEM.bounds[0])
    y = [PROBLEM(x) for x in X]

    def go():
        opt = make()
        opt.tell(X, y)
        opt.ask()

    return go


def run(smoke: bool = False) -> BenchReport:
    sizes = (10, 20) if smoke else (50, 200, 1000)
    unlabeled = (20, 50) if smoke else (100, 500, 1000)
    repeats = 1 if smoke else 3
    b = PROBLEM.bounds
    comparisons = []
    for n in sizes:
        comparisons.append(
            compare(
                {
                    "GP + LogEI (BoTorch)": _told(lambda: GPLogEI(b, seed=0), n),
                    "DRE-BO-SSL (LP)": _told(lambda: DREBOSSL(b, seed=0), n),
                    "BORE (MLP)": _told(lambda: BORE(b, seed=0), n),
                },
                reference="GP + LogEI (BoTorch)",
                label=f"ask after n={n}",
                size=n,
                repeats=1 if n >= 1000 else repeats,
                warmup=0 if smoke or n >= 1000 else 1,
                memory=not smoke,
            )
        )
    for m in unlabeled:
        comparisons.append(
            compare(
                {SWEEP: _told(lambda m=m: DREBOSSL(b, n_unlabeled=m, seed=0), 50)},
                reference=SWEEP,
                label=f"ask, 50 obs, {m} unlabelled",
                size=m,
                repeats=1 if m >= 1000 else repeats,
                warmup=0,
                memory=not smoke,
            )
        )
    notes = [
        "ask rows: time of one suggestion (model fit + acquisition optimisation) after n "
        "observations; ratio to BoTorch GP + LogEI",
        "unlabelled rows: DRE-BO-SSL alone; slope = growth of time with the unlabelled points",
    ]
    return make_report(
        "drebo-ssl vs BoTorch GP + LogEI",
        comparisons,
        "drebo-ssl",
        "botorch",
        "scikit-learn",
        notes=notes,
    )


if __name__ == "__main__":
    run().render()
