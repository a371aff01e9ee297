"""Baseline: a generic first-order solver of the same dual (scipy's L-BFGS-B).

This is what one would write without the paper: hand the concave dual to a quasi-Newton
optimiser. It doubles as an independent oracle for the Sinkhorn solution in tests.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.optimize import minimize

from .divergences import Divergence, get_divergence
from .solver import _validate

__all__ = ["dual_lbfgs"]


def dual_lbfgs(
    a: Any,
    b: Any,
    C: Any,
    divergence: str | Divergence = "kl",
    reg: float = 1.0,
    R: Any = None,
    tol: float = 1e-9,
    max_iter: int = 10000,
    log: bool = False,
):
    r"""Maximise the dual of the generalized bridge with L-BFGS-B (NumPy, float64).

    Parameters are as in :func:`~gsb_sinkhorn.sinkhorn`. The gradient of the dual is
    :math:`(a - \pi 1,\ b - \pi^\top 1)`, so ``tol`` bounds its relative 1-norm (L-BFGS-B's
    ``gtol`` is set from it).

    A divergence whose domain ends at a finite ``high`` (contingency: :math:`t < 0`) has a
    dual that is infinite past the boundary, which a line search cannot come back from.
    Since no entry of a feasible plan exceeds the total mass :math:`M`, the optimum has
    :math:`t_{ij} \le t_0 := \psi^{-1}(M)`; past :math:`t_0` the conjugate is replaced by
    its second-order Taylor expansion at :math:`t_0`. The extended dual is concave, finite
    everywhere, and has the same maximiser.

    Returns
    -------
    plan : numpy.ndarray, shape (n, m)
    log : dict
        Only if ``log=True``: ``f``, ``g``, ``n_iter`` (L-BFGS iterations), ``n_eval``
        (objective evaluations), ``converged`` and ``message``.
    """
    div = get_divergence(divergence)
    if div.conjugate is None:
        raise ValueError(f"divergence {div.name!r} has no conjugate: the dual cannot be evaluated")
    a, b, C = (np.asarray(x, dtype=float) for x in (a, b, C))
    R = None if R is None else np.asarray(R, dtype=float)
    _validate(a, b, C, R, reg, tol, max_iter, div)
    n, m = C.shape
    Rm = np.ones((n, m)) if R is None else R
    K = C / reg
    mass = a.sum()
    high = div.domain[1]

    conjugate, psi = div.conjugate, div.psi
    if math.isfinite(high):
        conjugate, psi = _extend_past(div, _psi_inverse(div, float(mass)))

    def negdual(x: np.ndarray) -> tuple[float, np.ndarray]:
        u, v = x[:n], x[n:]
        t = u[:, None] + v[None, :] - K
        with np.errstate(over="ignore"):
            val = a @ u + b @ v - np.sum(Rm * conjugate(t))
            P = Rm * psi(t)
        grad = np.concatenate([a - P.sum(1), b - P.sum(0)])
        return -val / mass, -grad / mass

    x0 = np.zeros(n + m)
    if math.isfinite(high):  # start inside the domain: t <= high - 1
        x0[:] = (K.min() + high - 1.0) / 2
    res = minimize(
        negdual,
        x0,
        jac=True,
        method="L-BFGS-B",
        options={
            "maxiter": max_iter,
            "maxfun": 2 * max_iter,
            "gtol": tol / (n + m),
            "ftol": 0.0,
            "maxcor": 20,
        },
    )
    u, v = res.x[:n], res.x[n:]
    t = u[:, None] + v[None, :] - K
    inside = not math.isfinite(high) or bool(np.all(t[Rm > 0] < high))
    plan = Rm * psi(t)
    err = (np.abs(plan.sum(1) - a).sum()) / mass
    if not log:
        return plan
    return plan, {
        "f": reg * u,
        "g": reg * v,
        "n_iter": int(res.nit),
        "n_eval": int(res.nfev),
        "converged": bool(inside and err <= tol),
        "message": str(res.message),
    }


def _psi_inverse(div: Divergence, value: float) -> float:
    """The ``t`` in the domain with ``psi(t) = value``, by bisection (psi is increasing)."""
    high = div.domain[1]
    lo, hi = high - 1.0, high
    while float(div.psi(np.array([lo]))[0]) > value:
        lo = high - 2.0 * (high - lo)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if float(div.psi(np.array([mid]))[0]) < value else (lo, mid)
    return lo


def _extend_past(div: Divergence, t0: float):
    """Conjugate and psi continued past ``t0`` by the conjugate's quadratic Taylor expansion."""
    at = np.array([t0])
    c0, p0, d0 = (float(f(at)[0]) for f in (div.conjugate, div.psi, div.dpsi))

    def conjugate(t: np.ndarray) -> np.ndarray:
        d = np.maximum(t - t0, 0.0)
        return np.where(t <= t0, div.conjugate(np.minimum(t, t0)), c0 + p0 * d + 0.5 * d0 * d * d)

    def psi(t: np.ndarray) -> np.ndarray:
        return np.where(t <= t0, div.psi(np.minimum(t, t0)), p0 + d0 * np.maximum(t - t0, 0.0))

    return conjugate, psi
