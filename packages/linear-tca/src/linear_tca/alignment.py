r"""Linear test-time correlation alignment on embeddings (You, Lu & Huang, ICML 2025).

Given the embeddings :math:`Z \in \mathbb{R}^{N \times d}` of a test stream and the logits
a model produced for them, LinearTCA

1. scores each sample by the entropy of its softmax prediction;
2. builds a *pseudo-source* set: for every predicted class :math:`c`, the
   :math:`\lfloor k\, p_c \rfloor` lowest-entropy samples predicted as :math:`c`, where
   :math:`p_c` is the class's share relative to a balanced stream (``proportions``);
3. estimates the pseudo-source moments :math:`\mu_s, C_s` and the test moments
   :math:`\mu_t, C_t` (unbiased covariances, optionally shrunk towards
   :math:`\tfrac{\operatorname{tr} C}{d} I`);
4. finds :math:`W` with :math:`W^\top C_t W = C_s`, in closed form
   :math:`W = C_t^{-1/2} C_s^{1/2}` (symmetric square roots) or, as the official code
   does, by a few Adam steps on :math:`\lVert W^\top C_t W - C_s \rVert_F^2` from
   :math:`I`;
5. maps :math:`Z' = (Z - \mu_t) W + \mu_s`; the model's own head classifies :math:`Z'`.

No model parameter changes; the cost is one :math:`d \times d` eigendecomposition pair.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import torch

from icml25_core import check_array, check_choice, check_labels, check_loss, check_scalar

PROPORTIONS = ("predicted", "uniform", "oracle", "official")
#: the choices that count the test labels (ablations only)
LABELLED = ("oracle", "official")
SOLVERS = ("closed_form", "adam")
ALIGNMENTS = ("correlation", "mean")


def softmax_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the softmax of ``logits``, shape ``(N, C) -> (N,)`` (nats)."""
    return -(logits.softmax(1) * logits.log_softmax(1)).sum(1)


def covariance(X: torch.Tensor) -> torch.Tensor:
    r"""Unbiased covariance :math:`\frac{1}{n-1} (X - \bar X)^\top (X - \bar X)`,
    ``(n, d) -> (d, d)``; ``n >= 2``."""
    centered = X - X.mean(0, keepdim=True)
    return centered.T @ centered / (X.shape[0] - 1)


def ledoit_wolf_shrinkage(X: torch.Tensor) -> float:
    r"""The Ledoit-Wolf shrinkage intensity :math:`\alpha \in [0, 1]` of the samples ``X``
    (``(n, d)``), towards the scaled identity :math:`\tfrac{\operatorname{tr} S}{d} I`.

    The same estimator as :func:`sklearn.covariance.ledoit_wolf_shrinkage`, computed on
    ``X``'s device: with :math:`S` the (biased) sample covariance,
    :math:`\alpha = \min(\beta, \delta) / \delta`, :math:`\delta = \lVert S - \mu I
    \rVert_F^2 / d` and :math:`\beta = \frac{1}{n^2 d} \sum_i \lVert x_i x_i^\top - S
    \rVert_F^2`.
    """
    n, d = X.shape
    if n < 2:
        return 1.0
    X = X.detach()
    if X.device.type == "mps":  # no float64 there
        X = X.cpu()
    X = (X - X.mean(0, keepdim=True)).double()
    X2 = X**2
    trace_terms = X2.sum(0) / n
    mu = trace_terms.sum() / d
    beta_sum = (X2.sum(1) ** 2).sum()  # = sum of (X2^T X2), without the d x d matrix
    delta_sum = ((X.T @ X) ** 2).sum() / n**2
    beta = (beta_sum / n - delta_sum) / (d * n)
    delta = (delta_sum - 2.0 * mu * trace_terms.sum() + d * mu**2) / d
    beta = torch.minimum(beta, delta)
    return 0.0 if float(beta) == 0.0 else float(beta / delta)


def shrink(C: torch.Tensor, alpha: float) -> torch.Tensor:
    r""":math:`(1 - \alpha) C + \alpha \tfrac{\operatorname{tr} C}{d} I` for ``C`` of shape
    ``(d, d)``."""
    if alpha == 0.0:
        return C
    d = C.shape[0]
    target = torch.eye(d, dtype=C.dtype, device=C.device) * (torch.trace(C) / d)
    return (1.0 - alpha) * C + alpha * target


def _sym_power(C: torch.Tensor, power: float, eps: float) -> torch.Tensor:
    """``C**power`` of a symmetric PSD matrix through its eigendecomposition (float64 on
    the CPU: eigh is not available on every device); eigenvalues below ``eps`` times the
    largest are raised to that floor first."""
    C64 = C.detach().to("cpu", torch.float64)
    C64 = (C64 + C64.T) / 2
    vals, vecs = torch.linalg.eigh(C64)
    floor = eps * max(float(vals.max()), 0.0)
    vals = vals.clamp_min(floor if floor > 0 else eps)
    return (vecs * vals**power) @ vecs.T


def coral_matrix(
    C_source: torch.Tensor, C_target: torch.Tensor, *, eps: float = 1e-8
) -> torch.Tensor:
    r"""The closed-form CORAL map :math:`W = C_t^{-1/2} C_s^{1/2}` (``(d, d)``, float64,
    CPU), so that :math:`W^\top C_t W = C_s` when :math:`C_t` is full rank.

    Eigenvalues of :math:`C_t` below ``eps`` times its largest are floored there before
    the inverse square root (a rank-deficient target is then only matched on its range).
    """
    return _sym_power(C_target, -0.5, eps) @ _sym_power(C_source, 0.5, eps)


def coral_loss(W: torch.Tensor, C_source: torch.Tensor, C_target: torch.Tensor) -> torch.Tensor:
    r""":math:`\lVert W^\top C_t W - C_s \rVert_F^2`, the objective the official code
    minimises with Adam."""
    return torch.linalg.matrix_norm(W.T @ C_target @ W - C_source, ord="fro") ** 2


def adam_matrix(
    C_source: torch.Tensor,
    C_target: torch.Tensor,
    *,
    n_iter: int = 20,
    lr: float = 1e-3,
) -> torch.Tensor:
    """``W`` after ``n_iter`` Adam steps (learning rate ``lr``) on :func:`coral_loss` from
    the identity: the official code's solver (20 steps at 1e-3 move each entry of ``W`` by
    at most about 0.02). A loss that runs away from its start
    (:data:`icml25_core.guards.RUNAWAY` times) or stops being finite raises
    ``FloatingPointError`` naming ``lr``."""
    d = C_source.shape[0]
    W = torch.eye(d, dtype=C_target.dtype, device=C_target.device, requires_grad=True)
    optimizer = torch.optim.Adam([W], lr=lr)
    Cs, Ct = C_source.detach(), C_target.detach()
    start = None
    with torch.enable_grad():
        for step in range(n_iter):
            optimizer.zero_grad()
            loss = coral_loss(W, Cs, Ct)
            start = float(loss.detach()) if start is None else start
            check_loss(loss, lr=lr, step=step, reference=start, what="CORAL loss")
            loss.backward()
            optimizer.step()
    check_loss(
        coral_loss(W.detach(), Cs, Ct), lr=lr, step=n_iter, reference=start, what="CORAL loss"
    )
    return W.detach()


def class_proportions(
    logits: torch.Tensor, proportions: str, labels: torch.Tensor | None = None
) -> torch.Tensor:
    r"""Per-class multipliers :math:`p_c` of ``k``, shape ``(C,)``: a class's count
    divided by the mean class count :math:`N / C` (so a balanced stream gives 1 each).

    ``"predicted"`` counts the model's predictions (no label leaves the test set),
    ``"uniform"`` is 1 for every class, ``"oracle"`` counts the ground-truth ``labels``;
    ``"official"`` is the official script's rule, the ground-truth counts divided by
    class 0's count instead of the mean (the two differ on imbalanced streams). Both
    label-counting rules are ablations only: they need the test labels.
    """
    n, n_classes = logits.shape
    if proportions == "uniform":
        return torch.ones(n_classes, dtype=torch.float64)
    if proportions == "predicted":
        source = logits.argmax(1)
    else:
        if labels is None:
            raise ValueError(f"proportions={proportions!r} needs labels (the test labels it leaks)")
        source = labels
    counts = torch.bincount(source.detach().cpu().long(), minlength=n_classes)[:n_classes]
    if proportions == "official":
        if counts[0] == 0:
            raise ValueError(
                'proportions="official" divides by the count of class 0, which has no '
                "sample in this stream"
            )
        return counts.double() / counts[0].double()
    return counts.double() / (n / n_classes)


def select_pseudo_source(
    logits: torch.Tensor,
    k: int | None,
    proportions: str = "predicted",
    labels: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Indices of the pseudo-source samples: for each predicted class :math:`c` the
    :math:`\lfloor k\, p_c \rfloor` lowest-entropy samples predicted as :math:`c`
    (:func:`class_proportions`); ``k=None`` keeps every sample.

    Returns
    -------
    torch.Tensor
        Sorted ``int64`` indices into the rows of ``logits`` (on its device).
    """
    n, n_classes = logits.shape
    if k is None:
        return torch.arange(n, device=logits.device)
    entropy = softmax_entropy(logits.float())
    predicted = logits.argmax(1)
    share = class_proportions(logits, proportions, labels)
    chosen = []
    for c in range(n_classes):
        members = torch.nonzero(predicted == c).flatten()
        take = min(math.floor(k * float(share[c]) + 1e-9), members.numel())
        if take > 0:
            order = torch.argsort(entropy[members], stable=True)
            chosen.append(members[order[:take]])
    if not chosen:
        return torch.zeros(0, dtype=torch.long, device=logits.device)
    return torch.sort(torch.cat(chosen)).values


def _as_tensor(x: Any, name: str) -> tuple[torch.Tensor, bool]:
    """``x`` as a floating tensor and whether it came in as NumPy (to return NumPy)."""
    if isinstance(x, torch.Tensor):
        check_array(x, name, ndim=2)
        return (x if x.is_floating_point() else x.float()), False
    arr = np.asarray(x)
    check_array(arr, name, ndim=2)
    return torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float64)), True


class LinearTCA:
    r"""Test-time correlation alignment of embeddings: ``fit(Z, logits)``, ``transform(Z)``.

    Parameters
    ----------
    k : int or None, default=20
        Pseudo-source samples per class on a balanced stream (the official
        ``filter_K_TCA``, 20 by default); each class keeps :math:`\lfloor k\,p_c \rfloor`
        of its lowest-entropy predictions. ``None`` keeps every sample.
    proportions : {"uniform", "predicted", "oracle", "official"}, default="uniform"
        How :math:`p_c` is set (see :func:`class_proportions`). ``"uniform"`` (``k`` per
        class) assumes a roughly balanced stream, as the official code's label counts do
        on balanced data; ``"predicted"`` follows the model's predicted class shares, which
        under a strong shift echo its collapse onto a few classes (measured in the
        experiment's ablation); ``"oracle"`` uses the test labels passed to :meth:`fit` and
        exists only for the leakage ablation; ``"official"`` is the official script's
        label rule (counts relative to class 0's, not to the mean).
    solver : {"closed_form", "adam"}, default="closed_form"
        :func:`coral_matrix` (exact) or the official :func:`adam_matrix`.
    shrinkage : "ledoit-wolf", float in [0, 1] or None, default="ledoit-wolf"
        Shrinkage of both covariances towards :math:`\tfrac{\operatorname{tr} C}{d} I`:
        the Ledoit-Wolf intensity of each sample set, a fixed intensity, or none
        (``None`` or 0, the official behaviour). With fewer pseudo-source samples than
        dimensions (``k * n_classes < d``) :math:`C_s` is rank-deficient; the Ledoit-Wolf
        default then shrinks it by an amount estimated from the data.
    align : {"correlation", "mean"}, default="correlation"
        ``"mean"`` keeps :math:`W = I` (only the mean shift; an ablation).
    n_iter, lr : int, float
        Adam steps and learning rate of ``solver="adam"`` (official: 20, 1e-3).
    eps : float, default=1e-8
        Relative eigenvalue floor of the inverse square root (:func:`coral_matrix`).

    Attributes
    ----------
    W_ : torch.Tensor, shape (d, d)
        The alignment matrix.
    mean_source_, mean_target_ : torch.Tensor, shape (d,)
        Pseudo-source and test means.
    cov_source_, cov_target_ : torch.Tensor, shape (d, d)
        The (shrunk) covariances ``W_`` aligns.
    shrinkage_ : tuple of float
        The intensities used for the pseudo-source and the test covariance.
    support_ : torch.Tensor, shape (n_support,)
        Indices of the pseudo-source samples in the fitted embeddings.
    n_features_in_ : int
        ``d``.
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "k": "int >= 1 or None",
        "proportions": PROPORTIONS,
        "solver": SOLVERS,
        "shrinkage": '"ledoit-wolf", a float in [0, 1] or None',
        "align": ALIGNMENTS,
        "n_iter": "int >= 1",
        "lr": "float > 0",
        "eps": "float in (0, 1)",
    }

    def __init__(
        self,
        *,
        k: int | None = 20,
        proportions: str = "uniform",
        solver: str = "closed_form",
        shrinkage: str | float | None = "ledoit-wolf",
        align: str = "correlation",
        n_iter: int = 20,
        lr: float = 1e-3,
        eps: float = 1e-8,
    ) -> None:
        self.k = k
        self.proportions = proportions
        self.solver = solver
        self.shrinkage = shrinkage
        self.align = align
        self.n_iter = n_iter
        self.lr = lr
        self.eps = eps

    def _validate_params(self) -> None:
        if self.k is not None:
            check_scalar(self.k, "k", low=1, integer=True)
        check_choice(self.proportions, "proportions", PROPORTIONS)
        check_choice(self.solver, "solver", SOLVERS)
        check_choice(self.align, "align", ALIGNMENTS)
        if isinstance(self.shrinkage, str):
            check_choice(self.shrinkage, "shrinkage", ("ledoit-wolf",))
        elif self.shrinkage is not None:
            check_scalar(self.shrinkage, "shrinkage", low=0.0, high=1.0)
        check_scalar(self.n_iter, "n_iter", low=1, integer=True)
        check_scalar(self.lr, "lr", low=0.0, low_inclusive=False)
        check_scalar(self.eps, "eps", low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)

    def _intensity(self, X: torch.Tensor) -> float:
        if self.shrinkage is None:
            return 0.0
        if self.shrinkage == "ledoit-wolf":
            return ledoit_wolf_shrinkage(X)
        return float(self.shrinkage)

    def fit(self, Z: Any, logits: Any, *, labels: Any = None) -> LinearTCA:
        """Estimate the alignment from the test embeddings and the model's logits.

        Parameters
        ----------
        Z : array_like or torch.Tensor, shape (N, d)
            Test embeddings (the featurizer's output), finite.
        logits : array_like or torch.Tensor, shape (N, C)
            The model's logits for the same samples (any base model or TTA method).
        labels : array_like of int, shape (N,), optional
            Ground-truth test labels; used only by ``proportions="oracle"``.

        Returns
        -------
        LinearTCA
            ``self``, fitted.
        """
        self._validate_params()
        Zt, _ = _as_tensor(Z, "Z")
        L, _ = _as_tensor(logits, "logits")
        L = L.to(Zt.device)
        if L.shape[0] != Zt.shape[0]:
            raise ValueError(
                f"logits must have one row per embedding in Z: Z has {Zt.shape[0]} rows, "
                f"logits has {L.shape[0]}"
            )
        if L.shape[1] < 2:
            raise ValueError(f"logits must have at least 2 classes, got shape {tuple(L.shape)}")
        if Zt.shape[0] < 2:
            raise ValueError(f"Z must hold at least 2 samples, got {Zt.shape[0]}")
        y = None
        if self.proportions in LABELLED:
            if labels is None:
                raise ValueError(
                    f"proportions={self.proportions!r} needs labels (the test labels it leaks)"
                )
            y = torch.as_tensor(
                check_labels(
                    labels.cpu().numpy() if isinstance(labels, torch.Tensor) else labels,
                    "labels",
                    n_classes=L.shape[1],
                    n_samples=Zt.shape[0],
                )
            )
        support = select_pseudo_source(L, self.k, self.proportions, y)
        if support.numel() < 2:
            raise ValueError(
                f"the pseudo-source holds {support.numel()} sample(s) (k={self.k}); it needs "
                "at least 2 for a covariance: raise k"
            )
        Xs = Zt[support]
        self.support_ = support
        self.n_features_in_ = Zt.shape[1]
        self.mean_source_ = Xs.mean(0)
        self.mean_target_ = Zt.mean(0)
        alphas = (self._intensity(Xs), self._intensity(Zt))
        self.shrinkage_ = alphas
        self.cov_source_ = shrink(covariance(Xs), alphas[0])
        self.cov_target_ = shrink(covariance(Zt), alphas[1])
        if self.align == "mean":
            W = torch.eye(Zt.shape[1], dtype=torch.float64)
        elif self.solver == "closed_form":
            W = coral_matrix(self.cov_source_, self.cov_target_, eps=self.eps)
        else:
            W = adam_matrix(self.cov_source_, self.cov_target_, n_iter=self.n_iter, lr=self.lr)
        self.W_ = W.to(device=Zt.device, dtype=Zt.dtype)
        if not bool(torch.isfinite(self.W_).all()):
            raise FloatingPointError("the alignment matrix W is not finite; raise eps")
        return self

    def transform(self, Z: Any) -> Any:
        r"""Aligned embeddings :math:`(Z - \mu_t) W + \mu_s`, the type of ``Z`` (NumPy in,
        NumPy out), shape ``(N, d)``."""
        if not hasattr(self, "W_"):
            raise RuntimeError("this LinearTCA is not fitted yet: call fit(Z, logits) first")
        Zt, numpy_in = _as_tensor(Z, "Z")
        if Zt.shape[1] != self.n_features_in_:
            raise ValueError(
                f"Z must have {self.n_features_in_} columns (as in fit), got {Zt.shape[1]}"
            )
        W = self.W_.to(device=Zt.device, dtype=Zt.dtype)
        out = (Zt - self.mean_target_.to(Zt)) @ W + self.mean_source_.to(Zt)
        return out.numpy() if numpy_in else out

    def fit_transform(self, Z: Any, logits: Any, *, labels: Any = None) -> Any:
        """:meth:`fit` then :meth:`transform` on the same embeddings."""
        return self.fit(Z, logits, labels=labels).transform(Z)

    def __repr__(self) -> str:
        params = ", ".join(
            f"{name}={getattr(self, name)!r}" for name in self._parameter_constraints
        )
        return f"LinearTCA({params})"
