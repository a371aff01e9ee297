"""Building blocks: a GIN layer that weights messages by an edge mask, the encoder, the
edge scorer, the mask, and gradient reversal."""

from __future__ import annotations

import torch
from torch import nn

from icml25_core import check_choice

from ._compat import quiet_pyg_import

with quiet_pyg_import():  # PyG's import calls the deprecated torch.jit.script
    from torch_geometric.nn import MessagePassing, global_add_pool, global_mean_pool

POOLS = {"mean": global_mean_pool, "add": global_add_pool}


def mlp(sizes: list[int], dropout: float = 0.0) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers += [nn.BatchNorm1d(sizes[i + 1]), nn.ReLU(), nn.Dropout(dropout)]
    return nn.Sequential(*layers)


class WeightedGINConv(MessagePassing):
    r"""GIN with edge weights: :math:`h_v' = \mathrm{MLP}\big((1 + \epsilon) h_v +
    \sum_{u \in N(v)} w_{uv} h_u\big)`; ``w = 1`` is PyG's ``GINConv``."""

    def __init__(self, nn_: nn.Module, train_eps: bool = True):
        super().__init__(aggr="add")
        self.nn = nn_
        self.eps = nn.Parameter(torch.zeros(1)) if train_eps else 0.0

    def forward(self, x, edge_index, edge_weight=None):
        out = self.propagate(edge_index, x=x, edge_weight=edge_weight)
        return self.nn((1 + self.eps) * x + out)

    def message(self, x_j, edge_weight):
        return x_j if edge_weight is None else edge_weight.view(-1, 1) * x_j


class GNNEncoder(nn.Module):
    """``layers`` weighted-GIN layers: node features ``(N, in_dim)`` -> ``(N, hidden)``."""

    def __init__(self, in_dim: int, hidden: int = 64, layers: int = 3, dropout: float = 0.0):
        super().__init__()
        dims = [in_dim] + [hidden] * layers
        self.convs = nn.ModuleList(
            WeightedGINConv(mlp([dims[i], hidden, hidden])) for i in range(layers)
        )
        self.norms = nn.ModuleList(nn.BatchNorm1d(hidden) for _ in range(layers))
        self.dropout = dropout

    def forward(self, x, edge_index, edge_weight=None):
        for conv, norm in zip(self.convs, self.norms, strict=True):
            x = torch.relu(norm(conv(x, edge_index, edge_weight)))
            x = nn.functional.dropout(x, self.dropout, self.training)
        return x


class _GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return -ctx.scale * grad, None


def grad_reverse(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """Identity forward, gradient times ``-scale`` backward (adversarial training)."""
    return _GradReverse.apply(x, scale)


def edge_mask(
    logits: torch.Tensor,
    batch_edge: torch.Tensor,
    mode: str,
    ratio: float,
    training: bool,
    temperature: float = 1.0,
) -> torch.Tensor:
    """Edge weights in [0, 1] from scores.

    ``"soft"``: sigmoid, with logistic (concrete) noise while training, as in GSAT.
    ``"topr"``: the top ``ratio`` fraction of edges of each graph get 1, others 0, with a
    straight-through sigmoid gradient.
    """
    check_choice(mode, "mask", ("soft", "topr"))
    if mode == "soft":
        if training:
            u = torch.rand_like(logits).clamp(1e-6, 1 - 1e-6)
            logits = logits + torch.log(u) - torch.log1p(-u)
        return torch.sigmoid(logits / temperature)
    soft = torch.sigmoid(logits)
    hard = torch.zeros_like(soft)
    for g in torch.unique(batch_edge):
        idx = torch.nonzero(batch_edge == g).view(-1)
        k = max(1, round(ratio * idx.numel()))
        hard[idx[torch.topk(logits[idx], k).indices]] = 1.0
    return hard + soft - soft.detach()
