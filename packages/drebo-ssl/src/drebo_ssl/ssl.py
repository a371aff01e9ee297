r"""Semi-supervised classifiers (scikit-learn's label propagation / spreading), their class-1
probability at new points, and the entropy-minimising choice of their RBF bandwidth.

Inputs are points of the unit cube (the optimiser rescales the bounds), so the bandwidth
:math:`\beta` of the kernel :math:`k(x, x') = \exp(-\beta \|x - x'\|^2)` is in unit-cube
units. Following the paper, :math:`\beta` minimises the mean Shannon entropy of the
predicted class probabilities (``predict_proba``) at the labelled and unlabelled points,

.. math:: \beta^\star = \arg\min_{\beta}\ \frac1{n}\sum_{i=1}^n H\big(p_\beta(\cdot \mid x_i)\big),

by L-BFGS-B. The official code searches :math:`\beta \in [10^{-5}, 10^{5}]` from
:math:`\beta = 1` in the problem's own units. For bounds of widths :math:`w_k` a raw-unit
bandwidth :math:`\beta` is the unit-cube bandwidth :math:`\beta s` with
:math:`s = (\prod_k w_k^2)^{1/d}` (exact when the widths are equal), so by default
(``start="official"``) the search runs over :math:`\log_{10}\beta` in
:math:`\log_{10} s \pm 5` from :math:`\log_{10} s`: the official start and box, carried
into the unit cube, on a log scale. ``start="grid"`` starts from the best of the eleven
decades of the unit-cube box :math:`[10^{-5}, 10^5]` instead: never worse than any of
them, and independent of the units of the problem.

A point with no kernel mass (every kernel value to a point that carries a label
distribution underflows) has no defined prediction: scikit-learn returns 0/0 = NaN, which
makes the official objective NaN. Here its entropy is the maximal ``log 2``, so
disconnecting the graph is not rewarded.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp
from sklearn.semi_supervised import LabelPropagation, LabelSpreading

from icml25_core import check_choice

SSL_MODELS = ("label_propagation", "label_spreading")
ACQUISITIONS = ("official", "extrapolate")
STARTS = ("official", "grid")
MAX_ITER = {"label_propagation": 10_000, "label_spreading": 100}  # the official caps
DECADES = 5.0  # the box is start +- 5 decades (official: 1e-5 .. 1e5 around 1)
FD_STEP = 1e-3  # finite-difference step in log10 units (see select_bandwidth)


def make_ssl(kind: str, gamma: float):
    """An unfitted scikit-learn model with the official iteration caps:
    ``LabelPropagation(max_iter=10000)`` or ``LabelSpreading(alpha=0.2, max_iter=100)``."""
    check_choice(kind, "ssl", SSL_MODELS)
    if kind == "label_propagation":
        return LabelPropagation(kernel="rbf", gamma=gamma, max_iter=MAX_ITER[kind])
    return LabelSpreading(kernel="rbf", gamma=gamma, alpha=0.2, max_iter=MAX_ITER[kind])


def fit_ssl(kind: str, X: np.ndarray, labels: np.ndarray, gamma: float):
    """Fit on ``X`` (labelled and unlabelled rows) with ``labels`` in {0, 1, -1 (unlabelled)}."""
    model = make_ssl(kind, gamma)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # convergence and 0/0 warnings at extreme bandwidths
        model.fit(X, labels)
    return model


def mean_entropy(kind: str, X: np.ndarray, labels: np.ndarray, gamma: float) -> float:
    """Mean Shannon entropy (nats) of the fitted model's ``predict_proba`` at ``X``.

    Rows without a defined prediction (no kernel mass: NaN in scikit-learn) count as the
    maximal entropy ``log 2``.
    """
    model = fit_ssl(kind, X, labels, gamma)
    with np.errstate(all="ignore"):
        P = model.predict_proba(X)
    undefined = ~np.all(np.isfinite(P), axis=1)
    P = np.where(undefined[:, None], 0.5, P)
    H = -(P * np.log(np.where(P > 0, P, 1.0))).sum(1)  # 0 log 0 = 0
    return float(H.mean())


def unit_bandwidth_scale(bounds: np.ndarray) -> float:
    """``s`` such that a raw-unit bandwidth ``beta`` is ``beta * s`` in the unit cube:
    the geometric mean of the squared widths of ``bounds`` (2, d)."""
    widths = np.asarray(bounds, dtype=float)[1] - np.asarray(bounds, dtype=float)[0]
    return float(np.exp(np.mean(2.0 * np.log(widths))))


def select_bandwidth(
    kind: str, X: np.ndarray, labels: np.ndarray, *, scale: float = 1.0, start: str = "official"
) -> float:
    """The entropy-minimising bandwidth (unit-cube units) by L-BFGS-B over its log10.

    Parameters
    ----------
    kind : {"label_propagation", "label_spreading"}
    X : ndarray (n, d)
        Labelled and unlabelled points of the unit cube.
    labels : ndarray (n,)
        0, 1, or -1 (unlabelled).
    scale : float
        :func:`unit_bandwidth_scale` of the problem's bounds: the unit-cube value of a
        raw-unit bandwidth of 1. ``start="official"`` searches ``log10(scale) +- 5`` from
        ``log10(scale)``.
    start : {"official", "grid"}
        ``"grid"``: search the unit-cube box ``[-5, 5]`` from its best integer point.
    """
    check_choice(start, "start", STARTS)

    def objective(z):
        return mean_entropy(kind, X, labels, 10.0 ** float(np.ravel(z)[0]))

    if start == "official":
        centre = float(np.log10(scale))
        box = (centre - DECADES, centre + DECADES)
        z0 = centre
    else:
        box = (-DECADES, DECADES)
        grid = np.arange(box[0], box[1] + 1.0)
        z0 = float(grid[int(np.argmin([objective(z) for z in grid]))])
    # L-BFGS-B only accepts steps that lower the objective, so its end is no worse than z0
    res = minimize(objective, x0=[z0], method="L-BFGS-B", bounds=[box], options={"eps": FD_STEP})
    best = float(res.x[0])
    return 10.0**best


def class1_probability(model, Z: np.ndarray, *, acquisition: str = "official") -> np.ndarray:
    r"""Class-1 probability of a fitted label propagation / spreading model at ``Z``.

    With training rows :math:`x_j`, label distributions :math:`F` and kernel weights
    :math:`w_j(x) = \exp(-\beta\|x - x_j\|^2)`, scikit-learn's ``predict_proba`` is

    .. math:: p(x) = \frac{\sum_j w_j(x) F_{j1}}{\sum_j w_j(x) (F_{j0} + F_{j1})}.

    ``acquisition="official"``: that value, and 0 where the denominator underflows to 0
    (the official code maps scikit-learn's NaN to 0), so points beyond the kernel's reach
    are never "sure". ``"extrapolate"``: the same ratio in the log domain, defined
    everywhere: far from the data a point takes the label of the nearest training rows.
    Shapes: ``Z`` (m, d) -> (m,).
    """
    check_choice(acquisition, "acquisition", ACQUISITIONS)
    logits = -model.gamma * _sqdist(Z, model.X_)
    F1, S = _class1(model)
    # log 0 = -inf for rows without class-1 mass; denormal label weights make SciPy's
    # internal rescaling overflow harmlessly (the result stays exact)
    with np.errstate(divide="ignore", over="ignore"):
        p = np.exp(logsumexp(logits, axis=1, b=F1) - logsumexp(logits, axis=1, b=S))
    if acquisition == "official":
        p = np.where(np.exp(logits) @ S > 0, p, 0.0)
    return np.clip(p, 0.0, 1.0)


def class1_probability_grad(
    model, z: np.ndarray, *, acquisition: str = "official"
) -> tuple[float, np.ndarray]:
    """``p(z)`` of :func:`class1_probability` and its gradient for one point ``z`` (d,)."""
    diff = z[None, :] - model.X_  # (n, d)
    logits = -model.gamma * (diff**2).sum(1)
    F1, S = _class1(model)
    if acquisition == "official" and np.exp(logits) @ S == 0:
        return 0.0, np.zeros_like(z, dtype=float)
    w = np.exp(logits - logits.max())
    den = w @ S
    p = float(w @ F1 / den)
    # p = N / D with N = sum w F1, D = sum w S and dw_j/dz = -2 beta (z - x_j) w_j
    grad = -2.0 * model.gamma * ((w * (F1 - p * S))[:, None] * diff).sum(0) / den
    return p, grad


def _class1(model) -> tuple[np.ndarray, np.ndarray]:
    """Class-1 column and row sums of the label distributions (non-finite entries as 0)."""
    F = np.nan_to_num(model.label_distributions_, nan=0.0, posinf=0.0, neginf=0.0)
    col = list(model.classes_).index(1)
    return F[:, col], F.sum(1)


def _sqdist(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return np.maximum((A**2).sum(1)[:, None] + (B**2).sum(1)[None, :] - 2.0 * A @ B.T, 0.0)
