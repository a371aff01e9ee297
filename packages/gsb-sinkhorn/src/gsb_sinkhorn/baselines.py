"""Baseline: a generic first-order solver of the same dual (scipy's L-BFGS-B).

This is what one would write without the paper: hand the concave dual to a quasi-Newton
optimiser. It doubles as an independent oracle for the Sinkhorn solution in tests.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.optimize import minimize

from icml25_core import check_array, check_scalar

from .divergences import Divergence, get_divergence

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
    ``gtol`` is set from it). Outside the divergence's domain the objective is ``+inf``
    for the minimiser, which makes the line search step back.

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
    C = np.asarray(check_array(np.asarray(C, dtype=float), "C", ndim=2), dtype=float)
    n, m = C.shape
    a = np.asarray(check_array(np.asarray(a, dtype=float), "a", shape=(n,), nonnegative=True))
    b = np.asarray(check_array(np.asarray(b, dtype=float), "b", shape=(m,), nonnegative=True))
    Rm = (
        np.ones((n, m))
        if R is None
        else np.asarray(
            check_array(np.asarray(R, dtype=float), "R", shape=(n, m), nonnegative=True)
        )
    )
    check_scalar(reg, "reg", low=0.0, low_inclusive=False)
    K = C / reg
    mass = a.sum()
    high = div.domain[1]

    def negdual(x: np.ndarray) -> tuple[float, np.ndarray]:
        u, v = x[:n], x[n:]
        t = u[:, None] + v[None, :] - K
        if math.isfinite(high) and np.any(t[Rm > 0] >= high):
            return 1e30, np.zeros_like(
                x
            )  # far above any feasible value: the line search steps back
        with np.errstate(over="ignore"):
            val = a @ u + b @ v - np.sum(Rm * div.conjugate(t))
            P = Rm * div.psi(t)
        grad = np.concatenate([a - P.sum(1), b - P.sum(0)])
        return -val / mass, -grad / mass

    # start inside the domain: t = -1 - (K - min K) <= -1 < high
    x0 = np.concatenate([np.full(n, (K.min() - 1.0) / 2), np.full(m, (K.min() - 1.0) / 2)])
    if not math.isfinite(high):
        x0[:] = 0.0
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
    plan = Rm * div.psi(u[:, None] + v[None, :] - K)
    err = (np.abs(plan.sum(1) - a).sum()) / mass
    if not log:
        return plan
    return plan, {
        "f": reg * u,
        "g": reg * v,
        "n_iter": int(res.nit),
        "n_eval": int(res.nfev),
        "converged": bool(err <= tol),
        "message": str(res.message),
    }
