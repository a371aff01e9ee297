r"""Semi-supervised classifiers (scikit-learn's label propagation / spreading) and the
entropy-minimising choice of their RBF bandwidth.

Inputs are points of the unit cube (the optimiser rescales the bounds), so the bandwidth
:math:`\beta` of the kernel :math:`k(x, x') = \exp(-\beta \|x - x'\|^2)` is in unit-cube
units. Following the paper, :math:`\beta` minimises the mean Shannon entropy of the
predicted class probabilities over labelled and unlabelled points,

.. math:: \beta^\star = \arg\min_{\beta \in [10^{-5}, 10^{5}]}
    \frac1{n}\sum_{i=1}^n H\big(p_\beta(\cdot \mid x_i)\big),

found by L-BFGS-B over :math:`\log_{10}\beta \in [-5, 5]` (the paper's box, better scaled).
The paper starts L-BFGS-B at :math:`\beta = 1` in the problem's own units. In the unit cube
that start often sits on the plateau of small bandwidths, where every point gets the class
proportions and the finite-difference gradient is noise, so the search ends anywhere. We
start instead from the best point of the grid :math:`\beta \in \{10^{-5}, \dots, 10^{5}\}`
(which contains 1), so the result is never worse than :math:`\beta = 1` and does not depend
on the units of the problem.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp
from sklearn.semi_supervised import LabelPropagation, LabelSpreading

from icml25_core import check_choice

SSL_MODELS = ("label_propagation", "label_spreading")
LOG10_BOUNDS = (-5.0, 5.0)


def make_ssl(kind: str, gamma: float, max_iter: int = 1000):
    """An unfitted scikit-learn model: ``LabelPropagation`` or ``LabelSpreading(alpha=0.2)``."""
    check_choice(kind, "ssl", SSL_MODELS)
    if kind == "label_propagation":
        return LabelPropagation(kernel="rbf", gamma=gamma, max_iter=max_iter)
    return LabelSpreading(kernel="rbf", gamma=gamma, alpha=0.2, max_iter=max_iter)


def fit_ssl(kind: str, X: np.ndarray, labels: np.ndarray, gamma: float):
    """Fit on ``X`` (labelled and unlabelled rows) with ``labels`` in {0, 1, -1 (unlabelled)}."""
    model = make_ssl(kind, gamma)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # convergence and 0/0 warnings at extreme bandwidths
        model.fit(X, labels)
    return model


def mean_entropy(kind: str, X: np.ndarray, labels: np.ndarray, gamma: float) -> float:
    """Mean Shannon entropy (nats) of the fitted model's class probabilities at ``X``.

    Degenerate fits (NaN probabilities when every kernel value underflows) count as the
    maximal entropy ``log 2``.
    """
    model = fit_ssl(kind, X, labels, gamma)
    P = model.label_distributions_
    if not np.all(np.isfinite(P)):
        return float(np.log(2.0))
    P = np.clip(P, 1e-12, 1.0)
    return float(-(P * np.log(P)).sum(1).mean())


def select_bandwidth(kind: str, X: np.ndarray, labels: np.ndarray) -> float:
    """The entropy-minimising bandwidth: L-BFGS-B over log10 gamma from the best of the
    grid 1e-5, 1e-4, ..., 1e5 (never worse than any grid point, gamma = 1 included)."""

    def objective(z):
        return mean_entropy(kind, X, labels, 10.0 ** float(np.ravel(z)[0]))

    grid = np.arange(LOG10_BOUNDS[0], LOG10_BOUNDS[1] + 1.0)
    values = [objective(z) for z in grid]
    start = float(grid[int(np.argmin(values))])
    res = minimize(objective, x0=[start], method="L-BFGS-B", bounds=[LOG10_BOUNDS])
    best = float(res.x[0]) if res.fun <= min(values) else start
    return 10.0**best


def class1_probability(model, Z: np.ndarray) -> np.ndarray:
    r"""Class-1 probability of a fitted label propagation / spreading model at ``Z``.

    Equal to the model's ``predict_proba(Z)[:, 1]``,
    :math:`p(x) = \sum_j w_j(x) F_{j1}` with :math:`w(x) = \mathrm{softmax}_j(-\beta
    \|x - x_j\|^2)` over the training rows, but computed in the log domain so it stays
    defined where every kernel value underflows. Shapes: ``Z`` (m, d) -> (m,).
    """
    logits = -model.gamma * _sqdist(Z, model.X_)
    w = np.exp(logits - logsumexp(logits, axis=1, keepdims=True))
    return w @ _class1(model)


def class1_probability_grad(model, z: np.ndarray) -> tuple[float, np.ndarray]:
    """``p(z)`` and its gradient for one point ``z`` (d,), for L-BFGS-B."""
    diff = z[None, :] - model.X_  # (n, d)
    logits = -model.gamma * (diff**2).sum(1)
    w = np.exp(logits - logsumexp(logits))
    F1 = _class1(model)
    p = float(w @ F1)
    # dp/dz = sum_j w_j (F1_j - p) * d logit_j/dz, d logit_j/dz = -2 gamma (z - x_j)
    grad = -2.0 * model.gamma * ((w * (F1 - p))[:, None] * diff).sum(0)
    return p, grad


def _class1(model) -> np.ndarray:
    F = model.label_distributions_
    col = list(model.classes_).index(1)
    F1 = F[:, col]
    return np.where(np.isfinite(F1), F1, 0.0)


def _sqdist(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return np.maximum((A**2).sum(1)[:, None] + (B**2).sum(1)[None, :] - 2.0 * A @ B.T, 0.0)
