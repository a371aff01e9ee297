r"""Evaluation: empirical W2, map error against the Gaussian closed form, plan cost.

All take NumPy arrays (or anything :func:`numpy.asarray` accepts) shaped
``(n, *sample_shape)``; samples are flattened to vectors.
"""

from __future__ import annotations

import numpy as np
import ot

from icml25_core import as_float_array


def _flat(x, name: str) -> np.ndarray:
    x = as_float_array(x, name)
    if x.ndim < 2:
        raise ValueError(f"{name} must be shaped (n, *sample_shape), got {x.shape}")
    return x.reshape(x.shape[0], -1)


def wasserstein2(x, y) -> float:
    r"""Exact :math:`W_2` between the empirical measures of ``x`` and ``y`` (``ot.emd2``).

    .. math:: W_2(\hat\mu, \hat\nu) = \Big(\min_{P \in U(a, b)} \sum_{ij} P_{ij}
        \|x_i - y_j\|^2\Big)^{1/2}, \quad a = 1/n, \; b = 1/m.
    """
    x, y = _flat(x, "x"), _flat(y, "y")
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"x and y must have the same dimension, got {x.shape[1]} and {y.shape[1]}")
    M = ot.dist(x, y)
    return float(np.sqrt(max(ot.emd2(ot.unif(len(x)), ot.unif(len(y)), M, numItermax=10**7), 0)))


def gaussian_map(mean_source, cov_source, mean_target, cov_target):
    r"""The OT map between Gaussians, :math:`T(x) = A x + b` (``ot.gaussian``).

    Returns a function ``x -> x @ A.T + b`` on arrays ``(n, d)``.
    """
    A, b = ot.gaussian.bures_wasserstein_mapping(
        np.asarray(mean_source, float),
        np.asarray(mean_target, float),
        np.asarray(cov_source, float),
        np.asarray(cov_target, float),
    )
    return lambda x: np.asarray(x, float) @ np.asarray(A).T + np.asarray(b)


def map_error(predicted, reference) -> float:
    r"""Relative L2 error :math:`\mathbb E\|\hat T(x) - T(x)\|^2 / \mathrm{tr}\,\mathrm{Cov}(T(x))`."""
    p, r = _flat(predicted, "predicted"), _flat(reference, "reference")
    if p.shape != r.shape:
        raise ValueError(f"predicted and reference must match, got {p.shape} and {r.shape}")
    return float(((p - r) ** 2).sum(1).mean() / r.var(0).sum())


def plan_cost(x, y) -> float:
    r"""Mean squared distance :math:`\frac1n\sum_i \|x_i - y_i\|^2` of paired samples: the
    quadratic transport cost of the coupling that sends ``x[i]`` to ``y[i]``."""
    x, y = _flat(x, "x"), _flat(y, "y")
    if x.shape != y.shape:
        raise ValueError(f"x and y must be paired (same shape), got {x.shape} and {y.shape}")
    return float(((x - y) ** 2).sum(1).mean())


def discrete_ot_cost(x, y) -> float:
    r"""Squared-Euclidean OT cost between the empirical measures, :math:`W_2^2` (``ot.emd2``)."""
    return wasserstein2(x, y) ** 2


def quantization_bound(y, k: int, *, seed: int = 0) -> float:
    r""":math:`\min_{\rho} W_2(\rho, \hat\nu)` over measures :math:`\rho` with at most ``k``
    atoms: the W2 of the best ``k``-point approximation of the sample ``y`` (k-means).

    No deterministic map of a ``k``-atom source can do better: it pushes the source to a
    measure with at most ``k`` atoms. Computed with scikit-learn's ``KMeans`` (10 starts),
    a local optimum, so the value can sit slightly above the true bound, never below it.
    """
    from sklearn.cluster import KMeans

    y = _flat(y, "y")
    if not isinstance(k, int) or not 1 <= k <= len(y):
        raise ValueError(f"k must be an integer in [1, {len(y)}], got {k!r}")
    km = KMeans(n_clusters=k, n_init=10, random_state=seed).fit(y)
    return float(np.sqrt(km.inertia_ / len(y)))
