"""Toy measures for the spurious-solution experiments, and coloured digits for images.

Every sampler returns ``float32`` arrays shaped ``(n, *sample_shape)`` and takes a NumPy
``Generator`` (or seed). Nothing is downloaded: the digits ship inside scikit-learn.
"""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_digits, make_moons

from icml25_core import as_float_array, check_array, check_scalar


def _rng(seed) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _n(n: int) -> int:
    return check_scalar(n, "n", low=1, integer=True)


def gaussian(n: int, mean, cov, seed=None) -> np.ndarray:
    """``n`` samples of N(mean, cov)."""
    mean = as_float_array(mean, "mean", ndim=1)
    cov = as_float_array(cov, "cov", shape=(mean.size, mean.size))
    return _rng(seed).multivariate_normal(mean, cov, size=_n(n)).astype(np.float32)


def eight_gaussians(n: int, radius: float = 2.0, std: float = 0.1, seed=None) -> np.ndarray:
    """Mixture of 8 equal Gaussians (std ``std``) on a circle of radius ``radius``."""
    rng = _rng(seed)
    k = rng.integers(8, size=_n(n))
    angle = 2 * np.pi * k / 8
    centres = radius * np.stack([np.cos(angle), np.sin(angle)], 1)
    return (centres + std * rng.normal(size=(n, 2))).astype(np.float32)


def moons(n: int, noise: float = 0.05, seed=None) -> np.ndarray:
    """scikit-learn's two moons, centred."""
    seed = int(_rng(seed).integers(2**31))
    x, _ = make_moons(_n(n), noise=noise, random_state=seed)
    return (x - np.array([0.5, 0.25])).astype(np.float32)


def segment(n: int, start=(-1.0, 0.0), end=(1.0, 0.0), seed=None) -> np.ndarray:
    """Uniform on the segment from ``start`` to ``end``: a 1-D measure in the plane."""
    t = _rng(seed).uniform(size=(_n(n), 1))
    start, end = np.asarray(start, float), np.asarray(end, float)
    return ((1 - t) * start + t * end).astype(np.float32)


def point_masses(n: int, points, weights=None, seed=None) -> np.ndarray:
    """Samples of the discrete measure ``sum_k weights[k] delta_{points[k]}``."""
    points = as_float_array(points, "points", ndim=2)
    k = points.shape[0]
    w = np.full(k, 1.0 / k) if weights is None else np.asarray(weights, float)
    check_array(w, "weights", shape=(k,), nonnegative=True)
    if w.sum() <= 0:
        raise ValueError("weights must have a positive sum")
    idx = _rng(seed).choice(k, size=_n(n), p=w / w.sum())
    return points[idx].astype(np.float32)


def dirac(n: int, point=(0.0, 0.0)) -> np.ndarray:
    """``n`` copies of one point: the Dirac source of the one-to-many task."""
    point = as_float_array(point, "point", ndim=1)
    return np.repeat(point[None].astype(np.float32), _n(n), axis=0)


def gaussian_and_segment(n: int, seed=None) -> np.ndarray:
    """Half a 2-D Gaussian (std 0.3), half the segment from (-1, 0) to (1, 0): a source
    with a lower-dimensional part."""
    rng = _rng(seed)
    n_seg = _n(n) // 2
    return np.concatenate(
        [segment(n_seg, seed=rng), 0.3 * rng.normal(size=(n - n_seg, 2)).astype(np.float32)]
    )[rng.permutation(n)]


def digits_gray_and_colour(seed=None) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 8x8 digits as grey and as randomly coloured RGB images.

    Returns ``(grey, colour)``, each ``(1797, 3, 8, 8)`` in [0, 1]: ``grey`` repeats the
    intensity over three channels; ``colour`` multiplies it by one random RGB colour per
    image (uniform on the cube, normalised so its channel mean is 1, then clipped). The two
    sets are shuffled independently, so no pairing is given: the OT plan from grey to colour
    keeps shape and intensity and is one-to-many in colour.
    """
    rng = _rng(seed)
    img = load_digits().images.astype(np.float32) / 16.0  # (1797, 8, 8)
    grey = np.repeat(img[:, None], 3, axis=1)
    colours = rng.uniform(0.05, 1.0, size=(img.shape[0], 3)).astype(np.float32)
    colours /= colours.mean(1, keepdims=True)
    colour = np.clip(img[:, None] * colours[:, :, None, None], 0.0, 1.0)
    return grey[rng.permutation(len(grey))], colour[rng.permutation(len(colour))]
