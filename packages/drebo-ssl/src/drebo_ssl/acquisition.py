"""Maximising the class-1 probability, shared by DRE-BO-SSL and the supervised baseline.

Sampling scenario (continuous search space, the unit cube): draw ``n_candidates`` uniform
points; if some have probability >= ``certain`` (0.99), return one of them at random (the
classifier cannot rank them further); otherwise run L-BFGS-B from the ``n_starts`` best
candidates and return the best end point, ties within ``1e-8`` broken at random.

Pool scenario (a finite set of candidates): the same 0.99 rule over the pool, otherwise the
arg-max, ties broken at random.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.optimize import minimize

TIE = 1e-8


def _pick(values: np.ndarray, n: int, rng: np.random.Generator, certain: float) -> np.ndarray:
    """Indices of ``n`` distinct picks: random among ``>= certain``, else best with ties."""
    sure = np.flatnonzero(values >= certain)
    if sure.size >= n:
        return rng.choice(sure, size=n, replace=False)
    order = np.lexsort((rng.random(values.size), -np.round(values / TIE)))  # ties shuffled
    return order[:n]


def maximize_sampling(
    proba: Callable[[np.ndarray], np.ndarray],
    dim: int,
    rng: np.random.Generator,
    *,
    n: int = 1,
    n_candidates: int = 1000,
    n_starts: int = 100,
    value_and_grad: Callable[[np.ndarray], tuple[float, np.ndarray]] | None = None,
    certain: float = 0.99,
) -> np.ndarray:
    """``n`` points of the unit cube ``(n, dim)`` with high class-1 probability.

    ``proba`` maps ``(m, dim)`` to ``(m,)``; ``value_and_grad(z)`` (optional) gives the
    probability and its gradient at one point, else L-BFGS-B uses finite differences.
    """
    cands = rng.random((n_candidates, dim))
    p = proba(cands)
    sure = np.flatnonzero(p >= certain)
    if sure.size >= n:
        return cands[rng.choice(sure, size=n, replace=False)]
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
    return ends[_pick(vals, n, rng, certain=np.inf)]


def maximize_pool(
    proba: Callable[[np.ndarray], np.ndarray],
    pool: np.ndarray,
    rng: np.random.Generator,
    *,
    n: int = 1,
    certain: float = 0.99,
) -> np.ndarray:
    """Indices of ``n`` distinct pool rows with high class-1 probability."""
    return _pick(proba(pool), n, rng, certain)
