"""The trainable pieces: SSF scale/shift, DAPT's dynamic adapter and the paper's Hybrid
Attention Adapter.

Shapes: tokens ``t`` are ``(B, T, C)``; a semantic prompt is ``(B, P)``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from icml25_core import check_choice, check_scalar

__all__ = ["SSF", "DynamicAdapter", "HybridAttentionAdapter"]


class SSF(nn.Module):
    """Scale and shift a feature's last axis: ``x * gamma + beta`` (SSF, as DAPT's ``tfts``).

    Parameters
    ----------
    dim : int
    init : {"normal", "identity"}
        ``"normal"``: gamma ~ N(1, 0.02), beta ~ N(0, 0.02), as the official DAPT code;
        ``"identity"``: exactly 1 and 0, so a fresh model equals its frozen backbone.
    """

    def __init__(self, dim: int, init: str = "normal") -> None:
        super().__init__()
        check_choice(init, "ssf_init", ("normal", "identity"))
        self.gamma = nn.Parameter(torch.ones(dim))
        self.beta = nn.Parameter(torch.zeros(dim))
        if init == "normal":
            nn.init.normal_(self.gamma, mean=1.0, std=0.02)
            nn.init.normal_(self.beta, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gamma + self.beta


class DynamicAdapter(nn.Module):
    """DAPT's dynamic adapter: a per-token scale times a bottleneck MLP.

    .. math:: a(t) = \\mathrm{ReLU}(w_s^\\top \\hat t + b_s)\\; W_u\\,
              \\mathrm{GELU}(W_d \\hat t + b_d) + b_u, \\qquad \\hat t = \\mathrm{LN}(t)

    with the up-projection zero-initialised (so a fresh adapter outputs exactly 0).

    Parameters
    ----------
    dim : int
        C.
    rank : int
        Bottleneck width (DAPT: 64).
    dropout : float
        Dropout on the bottleneck (DAPT's configs: 0.2; default 0 here).
    """

    def __init__(self, dim: int, rank: int = 64, dropout: float = 0.0) -> None:
        super().__init__()
        check_scalar(rank, "rank", low=1, integer=True)
        check_scalar(dropout, "adapter_dropout", low=0, high=1, high_inclusive=False)
        self.norm = nn.LayerNorm(dim)
        self.scale = nn.Linear(dim, 1)
        self.down_proj = nn.Linear(dim, rank)
        self.up_proj = nn.Linear(rank, dim)
        self.dropout = nn.Dropout(dropout)
        nn.init.kaiming_uniform_(self.down_proj.weight, a=math.sqrt(5))
        nn.init.zeros_(self.down_proj.bias)
        nn.init.kaiming_uniform_(self.scale.weight, a=math.sqrt(5))
        nn.init.zeros_(self.scale.bias)
        nn.init.zeros_(self.up_proj.weight)
        nn.init.zeros_(self.up_proj.bias)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        x = self.norm(t)
        up = self.up_proj(self.dropout(F.gelu(self.down_proj(x))))
        return up * F.relu(self.scale(x))


class HybridAttentionAdapter(nn.Module):
    """The Hybrid Attention Adapter (HAA): 2-D semantics steer an attention over 3-D tokens.

    .. math::

        \\alpha = 1 + A_2\\,\\mathrm{GELU}(A_1 p), \\quad
        \\beta = B_2\\,\\mathrm{GELU}(B_1 p), \\quad
        T_{mixed} = \\alpha \\odot \\mathrm{LN}(T) + \\beta

        q = W_q T_{mixed}, \\quad k = W_k T_{mixed}, \\quad v = a(T), \\quad
        T_{ada} = \\mathrm{softmax}(q k^\\top / \\sqrt{s})\\, v

    with ``p`` the layer's semantic prompt, ``a`` the :class:`DynamicAdapter` (the
    "DAPT-style" value branch), ``s`` the q/k rank. ``A_2`` and ``B_2`` are
    zero-initialised (at start, :math:`T_{mixed} = \\mathrm{LN}(T)`), and so is the value
    branch's up-projection (a fresh adapter outputs 0).

    The paper's ablation switches: ``semantic=False`` uses :math:`T_{mixed} = T` (no 2-D
    modulation); ``attention=False`` drops the attention, :math:`T_{ada} = a(T_{mixed})`.

    Parameters
    ----------
    dim : int
        C, the 3-D token width.
    prompt_dim : int
        P, the semantic prompt's width (0 when ``semantic=False``).
    rank : int
        Value-branch bottleneck (the paper: 32-128).
    qk_rank : int
        s (the paper: 18).
    mod_rank : int
        Bottleneck of the alpha/beta maps (the paper: 16).
    semantic, attention : bool
        See above.
    dropout : float
        Dropout of the value branch.
    """

    def __init__(
        self,
        dim: int,
        prompt_dim: int,
        *,
        rank: int = 64,
        qk_rank: int = 18,
        mod_rank: int = 16,
        semantic: bool = True,
        attention: bool = True,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if not (semantic or attention):
            raise ValueError("HybridAttentionAdapter needs semantic=True or attention=True")
        check_scalar(qk_rank, "qk_rank", low=1, integer=True)
        check_scalar(mod_rank, "mod_rank", low=1, integer=True)
        self.semantic, self.attention, self.qk_rank = semantic, attention, qk_rank
        self.value = DynamicAdapter(dim, rank, dropout)
        if semantic:
            check_scalar(prompt_dim, "prompt_dim", low=1, integer=True)
            self.norm = nn.LayerNorm(dim, elementwise_affine=False)
            self.alpha = nn.Sequential(
                nn.Linear(prompt_dim, mod_rank), nn.GELU(), nn.Linear(mod_rank, dim)
            )
            self.beta = nn.Sequential(
                nn.Linear(prompt_dim, mod_rank), nn.GELU(), nn.Linear(mod_rank, dim)
            )
            for seq in (self.alpha, self.beta):
                nn.init.zeros_(seq[2].weight)
                nn.init.zeros_(seq[2].bias)
        if attention:
            self.q = nn.Linear(dim, qk_rank, bias=False)
            self.k = nn.Linear(dim, qk_rank, bias=False)

    def forward(self, t: torch.Tensor, prompt: torch.Tensor | None = None) -> torch.Tensor:
        """``t`` (B, T, C), ``prompt`` (B, P) -> (B, T, C)."""
        if self.semantic:
            if prompt is None:
                raise ValueError("this adapter is semantic: a prompt of shape (B, P) is needed")
            alpha = 1 + self.alpha(prompt).unsqueeze(1)
            mixed = alpha * self.norm(t) + self.beta(prompt).unsqueeze(1)
        else:
            mixed = t
        if not self.attention:
            return self.value(mixed)
        q, k = self.q(mixed), self.k(mixed)
        return F.scaled_dot_product_attention(q, k, self.value(t))
