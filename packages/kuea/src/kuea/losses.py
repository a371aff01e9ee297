"""The KUEA objective: a regulariser to the frozen CLIP tower plus kernel alignment.

.. math::

    L = w_\\mathrm{reg} \\frac{1}{n} \\sum_i \\lVert e_i - e^0_i \\rVert^2
      + w_\\mathrm{align} \\operatorname{mean}_{ij} (K^c_{ij} - K^d_{ij})^2

with ``e = f(x)`` the trained image tower's embeddings, ``e0 = f0(x)`` the frozen copy's,
``K^c`` the student kernel of ``e`` and ``K^d`` the teacher kernel of ``d = g(x)``. As in
the official code the squared error of the regulariser is summed over dimensions and
averaged over the batch, and the kernel error is averaged over all ``n^2`` entries
(``reduction="mean"``); ``reduction="off_diagonal"`` averages over the ``n (n - 1)``
off-diagonal entries only (the diagonal of a normalized kernel is 1 for both, so it adds
zeros that shrink the loss by ``(n - 1) / n``).
"""

from __future__ import annotations

from torch import Tensor

from icml25_core import check_choice

__all__ = ["REDUCTIONS", "alignment_loss", "regularization_loss"]

REDUCTIONS = ("mean", "off_diagonal")


def regularization_loss(e: Tensor, e0: Tensor) -> Tensor:
    """``mean_i ||e_i - e0_i||^2`` of embeddings ``e``, ``e0`` of shape (n, d)."""
    if e.shape != e0.shape:
        raise ValueError(
            f"the trained and frozen embeddings must have the same shape, got "
            f"{tuple(e.shape)} and {tuple(e0.shape)}"
        )
    return (e - e0).pow(2).sum(dim=1).mean()


def alignment_loss(k_student: Tensor, k_teacher: Tensor, reduction: str = "mean") -> Tensor:
    """Mean squared difference of two (n, n) kernel matrices.

    Parameters
    ----------
    k_student, k_teacher : Tensor, shape (n, n)
    reduction : {"mean", "off_diagonal"}
        Average over all entries (the official code) or over the off-diagonal ones.
    """
    check_choice(reduction, "reduction", REDUCTIONS)
    if k_student.shape != k_teacher.shape or k_student.ndim != 2:
        raise ValueError(
            "the student and teacher kernels must be square matrices over the same batch, "
            f"got {tuple(k_student.shape)} and {tuple(k_teacher.shape)} (do the student and "
            "teacher see the same images?)"
        )
    sq = (k_student - k_teacher).pow(2)
    n = sq.shape[0]
    if reduction == "mean":
        return sq.mean()
    if n < 2:
        raise ValueError("reduction='off_diagonal' needs a batch of at least 2 images")
    return (sq.sum() - sq.diagonal().sum()) / (n * (n - 1))
