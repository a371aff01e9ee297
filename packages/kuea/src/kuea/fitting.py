"""Fit the student kernel's parameters to the teacher's kernel on sample images.

The official README says gamma and c0 were "pre-calculated by sampling several images
from the training data and minimizing the L2 distance between kernel matrices of CLIP
and DINOv2"; that code is not released. :func:`fit_kernel_params` does exactly that:
on batches of the sample images it minimizes the mean (over batches and entries) of
``(K_student(theta) - K_teacher)^2`` over the student kernel's parameters theta, by a
log-spaced grid search followed by L-BFGS in log space.

The normalized polynomial kernel depends on gamma and c0 only through r = gamma / c0
(see :mod:`kuea.kernels`), so the fit is over r with c0 held at the value given, and the
gaussian fit is over the bandwidth.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from icml25_core import check_choice, check_scalar

from .kernels import KERNELS, kernel_matrix, teacher_kernel
from .towers import as_images

__all__ = ["KernelFit", "fit_kernel_params", "median_bandwidth"]


@dataclass(frozen=True)
class KernelFit:
    """The fitted student kernel: ``kind``, its ``params`` (keyword arguments of
    :class:`kuea.StudentKernel`), the alignment loss at the fit, and at the grid's
    best point before the local refinement."""

    kind: str
    params: dict[str, float]
    loss: float
    grid_loss: float


def median_bandwidth(x: Tensor) -> float:
    """The median heuristic: the median pairwise distance of the rows of ``x`` (n, d)."""
    d = torch.cdist(x.double(), x.double())
    off = d[~torch.eye(len(x), dtype=torch.bool, device=x.device)]
    value = float(off.median()) if off.numel() else 0.0
    if not value > 0:
        raise ValueError("cannot set a bandwidth: all embeddings are identical")
    return value


def _embed(fn: Callable[[Tensor], Tensor], images: Tensor, batch_size: int) -> Tensor:
    with torch.no_grad():
        return torch.cat(
            [fn(images[i : i + batch_size]) for i in range(0, len(images), batch_size)]
        )


def fit_kernel_params(
    student: Callable[[Tensor], Tensor] | Tensor,
    teacher: Callable[[Tensor], Tensor] | Tensor,
    images: Tensor | None = None,
    *,
    kind: str = "polynomial",
    teacher_kind: str = "polynomial",
    teacher_bandwidth: float | None = None,
    c0: float = 1.0,
    degree: int = 3,
    teacher_degree: int = 3,
    batch_size: int = 64,
    grid: int = 41,
) -> KernelFit:
    """Fit the student kernel's parameters so its kernel matches the teacher's.

    Parameters
    ----------
    student, teacher : callable or Tensor
        ``images -> (n, d)`` embedding functions (a CLIP model is accepted for the student
        and a transformers model for the teacher), or precomputed embeddings (n, d_s) and
        (n, d_t) of the same images.
    images : Tensor, shape (n, C, H, W), optional
        The sample images (needed when student or teacher is a callable).
    kind : {"polynomial", "gaussian"}
        The student kernel to fit (the cosine kernel has no parameters).
    teacher_kind : {"polynomial", "gaussian", "cosine"}
        The teacher's kernel: the paper's ``(d d^T / n_feat + 1)^3`` by default.
    teacher_bandwidth : float, optional
        The teacher's gaussian width (default: the median heuristic on its features).
    c0 : float
        The polynomial ``c0`` held fixed (only gamma / c0 is identifiable).
    batch_size : int
        Kernels are compared on consecutive batches of this size (the batch size of the
        alignment), since the loss is a per-batch quantity.
    grid : int
        Points of the log-spaced grid search (4 decades either side of the scale of the
        embeddings).

    Returns
    -------
    KernelFit
    """
    check_choice(kind, "kind", ("polynomial", "gaussian"))
    check_choice(teacher_kind, "teacher_kind", KERNELS)
    check_scalar(c0, "c0", low=0.0, low_inclusive=False)
    check_scalar(batch_size, "batch_size", low=2, integer=True)
    check_scalar(grid, "grid", low=3, integer=True)
    e, d = _embeddings(student, teacher, images, batch_size)
    if teacher_kind == "gaussian" and teacher_bandwidth is None:
        teacher_bandwidth = median_bandwidth(d)
    starts = range(0, len(e) - 1, batch_size)
    batches = [(e[i : i + batch_size], d[i : i + batch_size]) for i in starts]
    batches = [(a, b) for a, b in batches if len(a) >= 2]
    targets = [
        teacher_kernel(b, teacher_kind, bandwidth=teacher_bandwidth, degree=teacher_degree)
        for _, b in batches
    ]

    if kind == "polynomial":
        scale = 1.0 / float(e.pow(2).sum(dim=1).mean())  # gamma |e|^2 ~ c0 at r = 1 / |e|^2

        def student_kernel(log_p: Tensor, x: Tensor) -> Tensor:
            return kernel_matrix(x, "polynomial", gamma=log_p.exp() * c0, c0=c0, degree=degree)

    else:
        scale = median_bandwidth(e)

        def student_kernel(log_p: Tensor, x: Tensor) -> Tensor:
            return kernel_matrix(x, "gaussian", bandwidth=log_p.exp())

    def objective(log_p: Tensor) -> Tensor:
        total = sum(
            (student_kernel(log_p, a) - t).pow(2).mean()
            for (a, _), t in zip(batches, targets, strict=True)
        )
        return total / len(batches)

    candidates = torch.linspace(-4, 4, grid, dtype=torch.float64) * math.log(10) + math.log(scale)
    with torch.no_grad():
        losses = torch.stack([objective(c) for c in candidates])
    best = int(torch.argmin(losses))
    grid_loss = float(losses[best])
    log_p = candidates[best].clone().requires_grad_(True)
    opt = torch.optim.LBFGS([log_p], lr=1.0, max_iter=100, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = objective(log_p)
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        loss = float(objective(log_p))
    if not (math.isfinite(loss) and loss <= grid_loss):  # keep the grid point
        log_p, loss = candidates[best], grid_loss
    value = float(log_p.detach().exp())
    params = {"gamma": value * c0, "c0": c0} if kind == "polynomial" else {"bandwidth": value}
    return KernelFit(kind, params, loss, grid_loss)


def _embeddings(student, teacher, images, batch_size) -> tuple[Tensor, Tensor]:
    from .towers import as_teacher, image_tower

    images = None if images is None else as_images(images)

    def resolve(model, name, is_student):
        if isinstance(model, Tensor):
            return model
        if images is None:
            raise ValueError(f"images are needed to embed with the {name} model")
        if is_student and isinstance(model, torch.nn.Module) and not _returns_tensor(model):
            tower = image_tower(model)
            tower.check_images(images)
            fn = tower.encode
        else:
            fn = as_teacher(model)
        return _embed(fn, images, batch_size)

    e = resolve(student, "student", True).double()
    d = resolve(teacher, "teacher", False).double()
    for x, name in ((e, "student"), (d, "teacher")):
        if x.ndim != 2 or len(x) < 2:
            raise ValueError(
                f"the {name} embeddings must be (n, d) with n >= 2, got {tuple(x.shape)}"
            )
        if not bool(torch.isfinite(x).all()):
            raise ValueError(f"the {name} embeddings contain NaN or infinite values")
    if len(e) != len(d):
        raise ValueError(
            f"student and teacher embed different numbers of images: {len(e)} vs {len(d)}"
        )
    return e, d


def _returns_tensor(model: torch.nn.Module) -> bool:
    """A plain encoder module (not a CLIP model with towers)."""
    return not (
        (hasattr(model, "vision_model") and hasattr(model, "visual_projection"))
        or (hasattr(model, "visual") and hasattr(model, "encode_image"))
    )
