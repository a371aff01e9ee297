"""Baseline: entropic Gromov–Wasserstein coupling + barycentric projection (SCOT-style)."""

from __future__ import annotations

from typing import Any

import numpy as np
import ot
from scipy.spatial.distance import cdist

from icml25_core import as_float_array, check_scalar

from .spaces import check_metric

__all__ = ["gw_barycentric_alignment"]


def gw_barycentric_alignment(
    X1: Any,
    X2: Any,
    epsilon: float = 1e-2,
    max_iter: int = 1000,
    *,
    D1: Any = None,
    D2: Any = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Align ``X1`` onto ``X2`` as SCOT does: entropic GW coupling, then projection.

    Distances within each set are Euclidean (or ``D1`` / ``D2``, e.g. geodesic distances
    of a k-NN graph), rescaled to max 1; weights uniform. Each point of ``X1`` is sent to
    the barycentre of the coordinates of the points of ``X2`` it is coupled with.

    Returns
    -------
    E1 : numpy.ndarray, shape (n1, p2)
        ``X1`` projected into ``X2``'s space.
    E2 : numpy.ndarray, shape (n2, p2)
        ``X2`` itself.
    coupling : numpy.ndarray, shape (n1, n2)
    """
    check_scalar(epsilon, "epsilon", low=0.0, low_inclusive=False)
    check_scalar(max_iter, "max_iter", low=1, integer=True)
    X1, X2 = as_float_array(X1, "X1", ndim=2), as_float_array(X2, "X2", ndim=2)
    d1 = cdist(X1, X1) if D1 is None else check_metric(D1, "D1")
    d2 = cdist(X2, X2) if D2 is None else check_metric(D2, "D2")
    for name, d, X in (("D1", d1, X1), ("D2", d2, X2)):
        if d.shape[0] != X.shape[0]:
            raise ValueError(f"{name} must be ({X.shape[0]}, {X.shape[0]}), got {d.shape}")
    for name, d in (("X1", d1), ("X2", d2)):
        if d.max() == 0:
            raise ValueError(f"{name} must hold at least two distinct points")
    d1, d2 = d1 / d1.max(), d2 / d2.max()
    p, q = ot.unif(X1.shape[0]), ot.unif(X2.shape[0])
    G = ot.gromov.entropic_gromov_wasserstein(
        d1, d2, p, q, "square_loss", epsilon=epsilon, max_iter=max_iter, tol=1e-9
    )
    mass = G.sum(1, keepdims=True)
    if not np.isfinite(G).all() or (mass <= 0).any():
        raise FloatingPointError(
            f"the entropic GW coupling underflowed at epsilon={epsilon} (NaN or empty rows); "
            "raise epsilon"
        )
    E1 = (G @ X2) / mass
    return E1, X2, G
