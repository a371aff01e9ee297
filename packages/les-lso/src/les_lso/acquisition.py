"""LES in BoTorch: a penalty for ``PenalizedAcquisitionFunction`` and a nonlinear
constraint for ``optimize_acqf``.

Both score latents in the acquisition's own space: BoTorch optimizes in float64 and in
the box it is given; the decoder runs in its own dtype and the score comes back in the
input's. ``transform`` maps the optimizer's inputs to latents (e.g. un-normalizing from the
unit cube) when the acquisition works in another space.

Example::

    from botorch.acquisition import PenalizedAcquisitionFunction, qLogExpectedImprovement

    acqf = PenalizedAcquisitionFunction(
        qLogExpectedImprovement(gp, best_f=y.max()),
        penalty_func=LESPenalty(vae.decoder),
        regularization_parameter=0.1,
    )
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from icml25_core import check_scalar

from .score import Decoder, les

__all__ = ["LESPenalty", "les_constraint"]


class LESPenalty(torch.nn.Module):
    """``X (batch, q, d) -> (batch,)``: the sum over the ``q`` points of ``-LES(x)``, or
    with ``threshold`` of the hinge ``max(0, threshold - LES(x))`` (no penalty inside the
    region the decoder knows). ``PenalizedAcquisitionFunction`` subtracts
    ``regularization_parameter`` times this from the acquisition value.

    Parameters
    ----------
    decoder : callable
        ``z (B, d) -> logits (B, L, V)``.
    polarity, jacobian : bool, str
        As in :func:`~les_lso.les`.
    threshold : float, optional
        LES value above which a point is not penalized (e.g. a low quantile of LES on
        encoded training data).
    transform : callable, optional
        Maps the acquisition's inputs ``(..., d)`` to latents.
    """

    def __init__(
        self,
        decoder: Decoder,
        *,
        polarity: bool = False,
        jacobian: str = "autograd",
        threshold: float | None = None,
        transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> None:
        super().__init__()
        if threshold is not None:
            check_scalar(threshold, "threshold")
        self.decoder, self.polarity, self.jacobian = decoder, polarity, jacobian
        self.threshold, self.transform = threshold, transform

    def score(self, X: torch.Tensor) -> torch.Tensor:
        """LES of every point of ``X (..., d)``, shape ``X.shape[:-1]``."""
        z = X if self.transform is None else self.transform(X)
        flat = z.reshape(-1, z.shape[-1])
        return les(self.decoder, flat, polarity=self.polarity, jacobian=self.jacobian).reshape(
            z.shape[:-1]
        )

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        if X.ndim not in (2, 3):
            raise ValueError(f"X must have shape (batch, q, d) or (q, d), got {tuple(X.shape)}")
        s = self.score(X)
        pen = -s if self.threshold is None else torch.relu(self.threshold - s)
        return pen.sum(-1)


def les_constraint(
    decoder: Decoder,
    threshold: float,
    *,
    polarity: bool = False,
    jacobian: str = "autograd",
    transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> tuple[Callable[[torch.Tensor], torch.Tensor], bool]:
    """An intra-point constraint ``LES(x) - threshold >= 0`` for ``optimize_acqf``'s
    ``nonlinear_inequality_constraints``: ``(callable, True)``; the callable takes a point
    ``(d,)`` (or a batch ``(..., d)``) and returns a scalar (or ``(...)``).

    ``optimize_acqf`` then needs feasible starting points (``batch_initial_conditions``,
    e.g. encoded training latents that satisfy it)."""
    check_scalar(threshold, "threshold")
    scorer = LESPenalty(decoder, polarity=polarity, jacobian=jacobian, transform=transform)

    def constraint(x: torch.Tensor) -> torch.Tensor:
        return scorer.score(x) - threshold

    return constraint, True
