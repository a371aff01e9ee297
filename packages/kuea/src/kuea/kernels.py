"""Kernel matrices of a batch of embeddings, and the student kernel's parameters.

Every kernel here is a normalized similarity matrix of one batch ``x`` of shape
``(n, d)``: symmetric, unit diagonal, positive semi-definite.

- polynomial: :math:`K_{ij} = k_{ij} / \\sqrt{k_{ii} k_{jj}}` with
  :math:`k = (\\gamma\\, x x^\\top + c_0)^{p}` (``degree`` p = 3 in the paper); the
  teacher's default is :math:`\\gamma = 1/d`, :math:`c_0 = 1`;
- gaussian: :math:`K_{ij} = \\exp(-\\lVert x_i - x_j \\rVert^2 / (2 \\sigma^2))` (unit
  diagonal already);
- cosine: :math:`K_{ij} = \\langle x_i, x_j \\rangle / (\\lVert x_i \\rVert \\lVert x_j \\rVert)`.

The normalized polynomial kernel depends on :math:`\\gamma` and :math:`c_0` only through
their ratio (scaling both by the same factor cancels in the normalization), so only
:math:`\\gamma / c_0` can be fitted or learned; :class:`StudentKernel` keeps both, as the
official code does, because their scale sets the step size of a learned kernel.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from icml25_core import check_choice, check_scalar

__all__ = [
    "KERNELS",
    "StudentKernel",
    "cosine_kernel",
    "gaussian_kernel",
    "kernel_matrix",
    "normalize_kernel",
    "polynomial_kernel",
    "teacher_kernel",
]

KERNELS = ("polynomial", "gaussian", "cosine")


def _check_batch(x: Tensor, name: str = "x") -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape (n, d), got {type(x).__name__}")
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
        raise ValueError(f"{name} must have shape (n, d) with n, d >= 1, got {tuple(x.shape)}")
    return x


def normalize_kernel(k: Tensor) -> Tensor:
    """Cosine-normalize a kernel matrix: ``k_ij / sqrt(k_ii k_jj)``.

    Parameters
    ----------
    k : Tensor, shape (n, n)
        A kernel matrix with a positive diagonal.
    """
    diag = k.diagonal()
    if not bool((diag > 0).all()):
        raise ValueError(
            "the kernel's diagonal must be positive to normalize it (a zero embedding, or "
            "gamma * |x|^2 + c0 <= 0)"
        )
    d = diag.sqrt()
    return k / (d[:, None] * d[None, :])


def polynomial_kernel(
    x: Tensor, gamma: float | Tensor | None = None, c0: float | Tensor = 1.0, degree: int = 3
) -> Tensor:
    """Normalized polynomial kernel ``(gamma x x^T + c0)^degree`` of ``x`` (n, d) -> (n, n).

    ``gamma=None`` is ``1/d`` (the teacher kernel of the paper).
    """
    _check_batch(x)
    check_scalar(degree, "degree", low=1, integer=True)
    if gamma is None:
        gamma = 1.0 / x.shape[1]
    return normalize_kernel((x @ x.T * gamma + c0) ** degree)


def gaussian_kernel(x: Tensor, bandwidth: float | Tensor) -> Tensor:
    """Gaussian kernel ``exp(-|x_i - x_j|^2 / (2 bandwidth^2))`` of ``x`` (n, d) -> (n, n).

    Squared distances come from the Gram matrix (exactly zero on the diagonal), not from
    ``cdist``, whose gradient is NaN at a zero distance.
    """
    _check_batch(x)
    if not isinstance(bandwidth, Tensor):
        check_scalar(bandwidth, "bandwidth", low=0.0, low_inclusive=False)
    g = x @ x.T
    sq = g.diagonal()
    dist2 = (sq[:, None] + sq[None, :] - 2 * g).clamp_min(0.0)
    dist2 = dist2 - torch.diag_embed(dist2.diagonal())
    return torch.exp(-dist2 / (2 * bandwidth**2))


def cosine_kernel(x: Tensor) -> Tensor:
    """Cosine-similarity kernel of ``x`` (n, d) -> (n, n)."""
    _check_batch(x)
    norm = x.norm(dim=1, keepdim=True)
    if not bool((norm > 0).all()):
        raise ValueError("the cosine kernel is undefined for a zero embedding")
    u = x / norm
    return u @ u.T


def kernel_matrix(
    x: Tensor,
    kind: str,
    *,
    gamma: float | Tensor | None = None,
    c0: float | Tensor = 1.0,
    bandwidth: float | Tensor | None = None,
    degree: int = 3,
) -> Tensor:
    """The ``kind`` ("polynomial", "gaussian", "cosine") kernel matrix of ``x`` (n, d)."""
    check_choice(kind, "kind", KERNELS)
    if kind == "polynomial":
        return polynomial_kernel(x, gamma, c0, degree)
    if kind == "gaussian":
        if bandwidth is None:
            raise ValueError("the gaussian kernel needs bandwidth > 0")
        return gaussian_kernel(x, bandwidth)
    return cosine_kernel(x)


def teacher_kernel(
    d: Tensor, kind: str = "polynomial", *, bandwidth: float | None = None, degree: int = 3
) -> Tensor:
    """The teacher's kernel of the paper: ``(d d^T / n_feat + 1)^3`` normalized (default),
    or a gaussian/cosine kernel of the teacher features ``d`` (n, d_t)."""
    return kernel_matrix(d, kind, bandwidth=bandwidth, degree=degree)


class StudentKernel(nn.Module):
    """The student's kernel with its parameters, fixed (buffers) or learned (parameters).

    Parameters
    ----------
    kind : {"polynomial", "gaussian", "cosine"}
    gamma, c0 : float
        Polynomial kernel ``(gamma e e^T + c0)^degree`` (both > 0; see
        :func:`kuea.fit_kernel_params`).
    bandwidth : float
        Gaussian kernel width sigma.
    degree : int
        Polynomial degree (3 in the paper).
    learnable : bool
        Learn the parameters (as ``nn.Parameter`` in log space, so they stay positive)
        instead of keeping them fixed as buffers. Either way they move with ``.to(device)``.
    """

    def __init__(
        self,
        kind: str = "polynomial",
        *,
        gamma: float | None = None,
        c0: float = 1.0,
        bandwidth: float | None = None,
        degree: int = 3,
        learnable: bool = False,
    ) -> None:
        super().__init__()
        check_choice(kind, "kind", KERNELS)
        check_scalar(degree, "degree", low=1, integer=True)
        self.kind, self.degree, self.learnable = kind, degree, bool(learnable)
        values: dict[str, float] = {}
        if kind == "polynomial":
            if gamma is None:
                raise ValueError("kind='polynomial' needs gamma > 0 (fit_kernel_params fits it)")
            check_scalar(gamma, "gamma", low=0.0, low_inclusive=False)
            values["gamma"] = float(gamma)
            check_scalar(c0, "c0", low=0.0, low_inclusive=False)
            values["c0"] = float(c0)
        elif kind == "gaussian":
            if bandwidth is None:
                raise ValueError("kind='gaussian' needs bandwidth > 0 (fit_kernel_params fits it)")
            check_scalar(bandwidth, "bandwidth", low=0.0, low_inclusive=False)
            values["bandwidth"] = float(bandwidth)
        elif learnable:
            raise ValueError("the cosine kernel has no parameters: learnable must be False")
        self._names = tuple(values)
        for name, value in values.items():
            self._register(name, value)

    def _register(self, name: str, value: float) -> None:
        log = torch.tensor(math.log(value), dtype=torch.float32)
        if self.learnable:
            self.register_parameter(f"log_{name}", nn.Parameter(log))
        else:
            self.register_buffer(f"log_{name}", log)

    def params(self) -> dict[str, float]:
        """The current kernel parameters as floats."""
        return {n: float(getattr(self, f"log_{n}").detach().exp()) for n in self._names}

    def forward(self, e: Tensor) -> Tensor:
        """The normalized kernel matrix (n, n) of embeddings ``e`` (n, d)."""
        _check_batch(e, "e")
        p = {n: getattr(self, f"log_{n}").exp().to(e.dtype) for n in self._names}
        return kernel_matrix(e, self.kind, degree=self.degree, **p)

    def extra_repr(self) -> str:
        shown = ", ".join(f"{k}={v:.4g}" for k, v in self.params().items())
        return f"kind={self.kind!r}, {shown}, learnable={self.learnable}"
