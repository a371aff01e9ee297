r"""Transport costs ``c(x, y)`` evaluated row by row on batches.

A cost is any callable ``cost(x, y) -> (n,)`` on torch batches ``x`` shaped
``(n, *source_shape)`` and ``y`` shaped ``(n, *target_shape)``; it must be differentiable in
``y``. :class:`QuadraticCost` is the paper's :math:`c(x, y) = \tau \|x - y\|^2`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from icml25_core import check_scalar

Cost = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class QuadraticCost:
    r""":math:`c(x, y) = \tau \sum_i (x_i - y_i)^2` over all non-batch dimensions.

    Scaling the cost by ``tau`` leaves the optimal plan unchanged; it only rescales the
    potential, so ``tau`` is a conditioning knob for training (smaller ``tau`` for
    higher-dimensional data keeps the cost and the potential on similar scales).
    """

    tau: float = 1.0

    def __post_init__(self):
        check_scalar(self.tau, "tau", low=0.0, low_inclusive=False)

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.tau * (x - y).flatten(1).pow(2).sum(1)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "quadratic", "tau": self.tau}


def check_cost(cost: Any, x: torch.Tensor, y: torch.Tensor) -> None:
    """Evaluate ``cost`` once on small batches and check it returns a finite ``(n,)`` tensor."""
    if not callable(cost):
        raise TypeError(f"cost must be callable as cost(x, y) -> (n,) tensor, got {cost!r}")
    out = cost(x, y)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (x.shape[0],):
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(
            f"cost(x, y) must return a tensor shaped ({x.shape[0]},) for batches of "
            f"{x.shape[0]} rows, got {got}"
        )
    if not bool(torch.isfinite(out).all()):
        raise ValueError("cost(x, y) returned NaN or inf on the first batch")
