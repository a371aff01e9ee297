"""Maximising the class-1 probability, shared by DRE-BO-SSL and the supervised baseline.

Sampling scenario (continuous search space, the unit cube): draw ``n_candidates`` uniform
points; if at least ``n`` have probability >= ``certain`` (0.99 in the paper), return that
many of them at random (the classifier cannot rank them further); otherwise run L-BFGS-B
from the ``n_starts`` best candidates and return the best end points, ties within ``1e-8``
broken at random. ``certain=None`` always maximises (the literature's BORE). Without a
gradient (``optimize=False``, a piecewise-constant classifier such as a random forest)
the best candidates are returned instead of running L-BFGS-B.

Pool scenario (a finite set of candidates): the same rule over the pool, otherwise the
arg-max, ties broken at random.

Both return, beside the points, a record of the branch that chose them: ``"sure"`` (a
random pick among the sure candidates), ``"optimizer"`` (L-BFGS-B), ``"argmax"`` (the best
candidates or pool rows), and ``n_sure``, the number of sure candidates.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.optimize import minimize

TIE = 1e-8


def _best(values: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of the ``n`` largest values, ties within ``TIE`` shuffled."""
    return np.lexsort((rng.random(values.size), -np.round(values / TIE)))[:n]


def _sure(values: np.ndarray, certain: float | None) -> np.ndarray:
    return np.zeros(0, dtype=int) if certain is None else np.flatnonzero(values >= certain)


def maximize_sampling(
    proba: Callable[[np.ndarray], np.ndarray],
    dim: int,
    rng: np.random.Generator,
    *,
    n: int = 1,
    n_candidates: int = 1000,
    n_starts: int = 100,
    value_and_grad: Callable[[np.ndarray], tuple[float, np.ndarray]] | None = None,
    certain: float | None = 0.99,
    optimize: bool = True,
) -> tuple[np.ndarray, dict]:
    """``n`` points of the unit cube ``(n, dim)`` with high class-1 probability, and the
    record ``{"branch", "n_sure"}``.

    ``proba`` maps ``(m, dim)`` to ``(m,)``; ``value_and_grad(z)`` (optional) gives the
    probability and its gradient at one point, else L-BFGS-B uses finite differences.
    """
    cands = rng.random((n_candidates, dim))
    p = proba(cands)
    sure = _sure(p, certain)
    info = {"n_sure": int(sure.size)}
    if sure.size >= n:
        return cands[rng.choice(sure, size=n, replace=False)], {"branch": "sure", **info}
    if not optimize:
        return cands[_best(p, n, rng)], {"branch": "argmax", **info}
    starts = cands[np.argsort(-p)[: max(n_starts, n)]]
    bounds = [(0.0, 1.0)] * dim
    ends, vals = [], []
    for z0 in starts:
        if value_and_grad is not None:

            def fun(z):
                v, g = value_and_grad(z)
                return -v, -g

            res = minimize(fun, z0, jac=True, method="L-BFGS-B", bounds=bounds)
        else:
            res = minimize(
                lambda z: -float(proba(z[None])[0]), z0, method="L-BFGS-B", bounds=bounds
            )
        ends.append(np.clip(res.x, 0.0, 1.0))
        vals.append(-float(res.fun))
    ends, vals = np.asarray(ends), np.asarray(vals)
    return ends[_best(vals, n, rng)], {"branch": "optimizer", **info}


def maximize_pool(
    proba: Callable[[np.ndarray], np.ndarray],
    pool: np.ndarray,
    rng: np.random.Generator,
    *,
    n: int = 1,
    certain: float | None = 0.99,
) -> tuple[np.ndarray, dict]:
    """Indices of ``n`` distinct pool rows with high class-1 probability, and the record."""
    values = proba(pool)
    sure = _sure(values, certain)
    info = {"n_sure": int(sure.size)}
    if sure.size >= n:
        return rng.choice(sure, size=n, replace=False), {"branch": "sure", **info}
    return _best(values, n, rng), {"branch": "argmax", **info}
