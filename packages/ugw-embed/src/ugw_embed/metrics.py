"""Quality measures of joint embeddings."""

from __future__ import annotations

from typing import Any

import numpy as np
import ot
from scipy.spatial.distance import cdist

from icml25_core import as_float_array, check_array

__all__ = ["distortion", "embedded_wasserstein", "foscttm"]


def _cdist(A: np.ndarray, B: np.ndarray, metric: Any) -> np.ndarray:
    """SciPy's ``cdist``, an unknown metric name refused naming ``metric``."""
    try:
        return cdist(A, B, metric=metric)
    except ValueError as exc:
        if not isinstance(metric, str):
            raise
        raise ValueError(
            "metric must be a scipy.spatial.distance.cdist metric such as 'euclidean', "
            f"'sqeuclidean', 'cosine' or 'cityblock', got {metric!r} ({exc})"
        ) from None


def foscttm(E1: Any, E2: Any, metric: str = "euclidean") -> float:
    """Fraction Of Samples Closer Than the True Match, averaged over both directions.

    Row ``i`` of ``E1`` and row ``i`` of ``E2`` embed the same sample. For each sample,
    the fraction of the other set that lies closer than its true match, or exactly as
    close (a tie counts as a failure, so embeddings collapsed onto one point score 1, not
    0); 0 is a perfect alignment, about 0.5 a random one.

    Parameters
    ----------
    E1, E2 : array-like, shape (n, d)
        Matched embeddings in one space.
    metric : str
        Any :func:`scipy.spatial.distance.cdist` metric.
    """
    E1 = as_float_array(E1, "E1", ndim=2)
    E2 = as_float_array(E2, "E2", shape=E1.shape)
    if E1.shape[0] < 2:
        raise ValueError("E1 and E2 must hold at least 2 matched samples")
    d = _cdist(E1, E2, metric)
    true = np.diag(d)
    n = d.shape[0]
    # <= counts ties; minus 1 removes the true match itself
    rows = ((d <= true[:, None]).sum(1) - 1) / (n - 1)
    cols = ((d <= true[None, :]).sum(0) - 1) / (n - 1)
    return float(0.5 * (rows.mean() + cols.mean()))


def embedded_wasserstein(
    E1: Any, E2: Any, w1: Any = None, w2: Any = None, metric: str = "euclidean"
) -> float:
    """Wasserstein-2 distance between two embedded point clouds (exact OT, POT's ``emd2``).

    Parameters
    ----------
    E1, E2 : array-like, shape (n1, d), (n2, d)
    w1, w2 : array-like, optional
        Weights (normalised); default uniform.
    metric : str
        Ground metric, squared inside the transport cost.
    """
    E1 = as_float_array(E1, "E1", ndim=2)
    E2 = as_float_array(E2, "E2", shape=(None, E1.shape[1]))
    w1 = np.full(E1.shape[0], 1 / E1.shape[0]) if w1 is None else np.asarray(w1, float) / np.sum(w1)
    w2 = np.full(E2.shape[0], 1 / E2.shape[0]) if w2 is None else np.asarray(w2, float) / np.sum(w2)
    check_array(w1, "w1", shape=(E1.shape[0],), nonnegative=True)
    check_array(w2, "w2", shape=(E2.shape[0],), nonnegative=True)
    return float(np.sqrt(max(ot.emd2(w1, w2, _cdist(E1, E2, metric) ** 2), 0.0)))


def distortion(D: Any, E: Any) -> float:
    """Relative metric distortion of an embedding: the normalised stress after the best scale.

    ``sqrt(sum (d_E - s d)^2 / sum (s d)^2)`` with ``s`` the least-squares scale, ``d`` the
    given distances (n, n) and ``d_E`` the Euclidean distances of the embedding ``E`` (n, q).
    0 means isometric up to scale.
    """
    D = as_float_array(D, "D", ndim=2, nonnegative=True)
    E = as_float_array(E, "E", shape=(D.shape[0], None))
    dE = cdist(E, E)
    iu = np.triu_indices(D.shape[0], 1)
    d, e = D[iu], dE[iu]
    s = float(d @ e / max(d @ d, 1e-300))
    return float(np.sqrt(np.sum((e - s * d) ** 2) / max(np.sum((s * d) ** 2), 1e-300)))
