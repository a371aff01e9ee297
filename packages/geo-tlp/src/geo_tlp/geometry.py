r"""Layers on the Poincare ball (geoopt) and their Euclidean counterparts (PyG).

The ball of curvature :math:`-c` is geoopt's :class:`~geoopt.PoincareBall`: ``expmap0`` /
``logmap0`` move between the ball and the tangent space at the origin, ``mobius_add`` is
the ball's addition, ``dist`` its geodesic distance. A hyperbolic graph convolution
(HGCN's form with aggregation in the tangent space at the origin) maps ``x`` on the ball
to

.. math:: y = \sigma^{\otimes}\Big(\exp_0\big(\textstyle\sum_j \hat A_{ij}\, W \log_0 x_j\big)
          \oplus \exp_0(b)\Big),
          \qquad \sigma^{\otimes}(y) = \exp_0(\sigma(\log_0 y)),

with :math:`\hat A = D^{-1/2}(A + I)D^{-1/2}` (PyG's ``gcn_norm``). As :math:`c \to 0`
the maps become the identity and :math:`\oplus` becomes ``+``, so the layer becomes
:math:`\sigma(\hat A X W^\top + b)`, exactly PyG's :class:`~torch_geometric.nn.GCNConv`
followed by :math:`\sigma` (a test checks it).
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

with warnings.catch_warnings():  # both still call torch.jit.script at import (torch >= 2.9)
    warnings.filterwarnings("ignore", message=r"`torch\.jit\.script` is deprecated")
    import geoopt
    from torch_geometric.nn.conv.gcn_conv import gcn_norm
    from torch_geometric.utils import scatter

__all__ = ["HypGCNConv", "poincare_ball", "tangent_aggregate"]


def poincare_ball(curvature: float) -> geoopt.PoincareBall:
    """geoopt's Poincare ball of curvature ``-curvature`` (``curvature > 0``)."""
    if not curvature > 0:
        raise ValueError(f"curvature must be > 0 (the ball has curvature -c), got {curvature!r}")
    return geoopt.PoincareBall(c=float(curvature))


def tangent_aggregate(u: torch.Tensor, edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """:math:`\\hat A u` with PyG's symmetric GCN normalisation and self-loops.

    Parameters
    ----------
    u : torch.Tensor, shape (N, d)
        Tangent vectors (or Euclidean features).
    edge_index : torch.Tensor, shape (2, E)
        Directed edge list (both directions for an undirected graph).
    num_nodes : int
        N.

    Returns
    -------
    torch.Tensor, shape (N, d)
    """
    ei, w = gcn_norm(edge_index, None, num_nodes, add_self_loops=True, dtype=u.dtype)
    return scatter(u[ei[0]] * w.unsqueeze(-1), ei[1], dim=0, dim_size=num_nodes, reduce="sum")


class HypGCNConv(nn.Module):
    """Hyperbolic graph convolution on a Poincare ball (see the module docstring).

    Parameters
    ----------
    in_channels, out_channels : int
        Feature sizes.
    ball : geoopt.PoincareBall
        The manifold (shared by the layers of one model).
    activation : bool
        Apply the hyperbolic ReLU :math:`\\exp_0(\\mathrm{relu}(\\log_0 y))`.
    dropout : float
        Dropout on the tangent features before the linear map.

    Shapes: ``x`` (N, in_channels) on the ball -> (N, out_channels) on the ball.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        ball: geoopt.PoincareBall,
        *,
        activation: bool = True,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.__dict__["ball"] = ball  # the model's manifold, not a submodule of each layer
        self.lin = nn.Linear(in_channels, out_channels, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_channels))
        self.activation = activation
        self.dropout = nn.Dropout(dropout)
        nn.init.xavier_uniform_(self.lin.weight)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """Convolve points ``x`` on the ball over ``edge_index``."""
        u = self.lin(self.dropout(self.ball.logmap0(x)))
        y = self.ball.expmap0(tangent_aggregate(u, edge_index, x.shape[0]))
        y = self.ball.mobius_add(y, self.ball.expmap0(self.bias))
        y = self.ball.projx(y)
        if self.activation:
            y = self.ball.expmap0(torch.relu(self.ball.logmap0(y)))
        return y
