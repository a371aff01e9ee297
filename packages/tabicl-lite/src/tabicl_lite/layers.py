"""Attention building blocks of TabICL: pre-LN blocks, induced set attention, rotary position.

All blocks are pre-LayerNorm transformer blocks built on
:func:`torch.nn.functional.scaled_dot_product_attention`. Attention to "training rows
only" is expressed by passing the training rows as keys and values, never as a mask, so
test rows cannot influence any other row by construction.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class RotaryEmbedding(nn.Module):
    """Rotary position embedding (Su et al., 2021) over a sequence axis.

    Parameters
    ----------
    head_dim : int
        Per-head width; must be even.
    base : float
        Frequency base; position ``p`` rotates channel pair ``i`` by
        ``p * base ** (-2 i / head_dim)``.
    interleaved : bool
        Channel pair ``i`` is ``(2 i, 2 i + 1)`` (TabICL v1) or ``(i, i + head_dim / 2)``
        (the halves, TabICL v2).
    """

    def __init__(self, head_dim: int, base: float = 1e5, interleaved: bool = True):
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"head_dim must be even for rotary embedding, got {head_dim}")
        inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.interleaved = interleaved

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Rotate ``x`` of shape ``(..., L, head_dim)`` by its position along ``L``."""
        pos = torch.arange(x.shape[-2], device=x.device, dtype=torch.float32)
        angles = torch.outer(pos, self.inv_freq.to(x.device))  # (L, head_dim / 2)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        if not self.interleaved:
            x1, x2 = x.chunk(2, dim=-1)
            return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
        if x.dtype in (torch.float32, torch.float64):
            # the pair (x1, x2) as x1 + i x2 times cos + i sin: one fused complex product
            # (9x faster than the four real products and the interleaving copy)
            pairs = x.unflatten(-1, (-1, 2))
            if pairs.stride(-1) != 1 or any(
                n % 2 for n in (*pairs.stride()[:-1], pairs.storage_offset())
            ):
                pairs = pairs.contiguous()
            rotated = torch.view_as_complex(pairs) * torch.complex(cos, sin)
            return torch.view_as_real(rotated).flatten(-2)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
        return out.flatten(-2)


#: query scalings of :class:`Attention` (``ssmax``): none, or TabICL v2's
SSMAX_TYPES = ("none", "qassmax-mlp-elementwise")


class QueryScaling(nn.Module):
    """Query-aware scalable softmax, elementwise (TabICL v2's ``qassmax-mlp-elementwise``).

    Queries ``q`` (..., h, Lq, dh) attending to ``n`` keys are scaled elementwise by
    ``base(log n) * (1 + tanh(query(q)))``: ``base`` maps ``log n`` to one factor per head
    and channel (``Linear(1, 64) - GELU - Linear(64, h * dh)``), ``query`` modulates each
    query by its own content (``Linear(dh, 64) - GELU - Linear(64, dh)``, shared by the
    heads). The attention logits then grow with the context length as the training
    lengths taught, instead of flattening as ``n`` grows (Nakanishi, 2025).
    """

    def __init__(self, n_heads: int, head_dim: int, hidden: int = 64):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, head_dim
        self.base_mlp = nn.Sequential(
            nn.Linear(1, hidden), nn.GELU(), nn.Linear(hidden, n_heads * head_dim)
        )
        self.query_mlp = nn.Sequential(
            nn.Linear(head_dim, hidden), nn.GELU(), nn.Linear(hidden, head_dim)
        )

    def forward(self, query: torch.Tensor, n: int) -> torch.Tensor:
        log_n = torch.full((1, 1), math.log(max(n, 1)), dtype=query.dtype, device=query.device)
        base = self.base_mlp(log_n).view(self.n_heads, 1, self.head_dim)
        return query * base * (1 + torch.tanh(self.query_mlp(query)))


class Attention(nn.Module):
    """Multi-head attention of queries ``q`` (..., Lq, D) over keys/values ``kv`` (..., Lk, D).

    ``ssmax`` (one of :data:`SSMAX_TYPES`) scales the queries by the number of keys
    (:class:`QueryScaling`) before the usual ``1 / sqrt(dh)`` dot product.
    """

    def __init__(
        self,
        dim: int,
        n_heads: int,
        rope: RotaryEmbedding | None = None,
        ssmax: str = "none",
    ):
        super().__init__()
        if dim % n_heads:
            raise ValueError(f"dim ({dim}) must be divisible by n_heads ({n_heads})")
        if ssmax not in SSMAX_TYPES:
            raise ValueError(f"ssmax must be one of {SSMAX_TYPES}, got {ssmax!r}")
        self.n_heads = n_heads
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.out = nn.Linear(dim, dim)
        self.rope = rope
        self.ssmax = QueryScaling(n_heads, dim // n_heads) if ssmax != "none" else None

    def forward(self, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        return self.attend(q, *self.keys_values(kv))

    def keys_values(self, kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of ``kv`` (..., Lk, D), each (..., h, Lk, dh), rotated keys
        included: what a cache of the context holds."""
        key, value = self.kv(kv).unflatten(-1, (2, self.n_heads, -1)).unbind(-3)
        key, value = key.transpose(-3, -2), value.transpose(-3, -2)  # (..., h, Lk, dh)
        if self.rope is not None:
            key = self.rope(key)
        return key, value

    def attend(self, q: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """Queries ``q`` (..., Lq, D) over precomputed :meth:`keys_values`."""
        query = self.q(q).unflatten(-1, (self.n_heads, -1)).transpose(-3, -2)
        if self.rope is not None:
            query = self.rope(query)
        if self.ssmax is not None:
            query = self.ssmax(query, key.shape[-2])
        out = _sdpa(query, key, value)  # (..., h, Lq, dh)
        return self.out(out.transpose(-3, -2).flatten(-2))


def _sdpa(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """``scaled_dot_product_attention`` with the leading dimensions folded into one: the
    fused CPU kernel takes 4-D inputs only and falls back to the unfused softmax path
    (about 3x slower) for the row stage's (B, T, h, L, dh)."""
    lead = query.shape[:-3]
    if len(lead) == 1 or key.shape[:-3] != lead or value.shape[:-3] != lead:
        return F.scaled_dot_product_attention(query, key, value)
    out = F.scaled_dot_product_attention(
        query.reshape(-1, *query.shape[-3:]),
        key.reshape(-1, *key.shape[-3:]),
        value.reshape(-1, *value.shape[-3:]),
    )
    return out.reshape(*lead, *out.shape[-3:])


class Block(nn.Module):
    """Pre-LN transformer block: ``x + attn(LN(x), LN(kv))`` then ``x + ff(LN(x))``.

    With ``kv=None`` it is self-attention; a ``kv_rows`` count restricts keys and values
    to the first ``kv_rows`` positions (the training rows).
    """

    def __init__(
        self,
        dim: int,
        n_heads: int,
        ff_factor: int = 2,
        rope: RotaryEmbedding | None = None,
        ssmax: str = "none",
    ):
        super().__init__()
        self.norm_q = nn.LayerNorm(dim)
        self.norm_kv = nn.LayerNorm(dim)
        self.attn = Attention(dim, n_heads, rope, ssmax)
        self.norm_ff = nn.LayerNorm(dim)
        self.ff = nn.Sequential(
            nn.Linear(dim, ff_factor * dim), nn.GELU(), nn.Linear(ff_factor * dim, dim)
        )

    def forward(
        self, x: torch.Tensor, kv: torch.Tensor | None = None, kv_rows: int | None = None
    ) -> torch.Tensor:
        source = x if kv is None else kv
        if kv_rows is not None:
            source = source[..., :kv_rows, :]
        return self.attend(x, *self.keys_values(source))

    def keys_values(self, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The attention's keys and values of ``source`` (the context), normalised."""
        return self.attn.keys_values(self.norm_kv(source))

    def attend(self, x: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """The block's output for ``x`` attending to precomputed :meth:`keys_values`."""
        x = x + self.attn.attend(self.norm_q(x), key, value)
        return x + self.ff(self.norm_ff(x))


class InducedSetBlock(nn.Module):
    """Induced set attention block (ISAB, Lee et al., 2019) whose inducing points read
    the training rows only.

    ``h = MAB(I, x[:n_train])`` summarises the training rows in ``n_inducing`` vectors;
    every row (training or test) then reads ``h``: ``out = MAB(x, h)``. Cost is linear in
    the number of rows, the output is invariant to the order of the training rows, and a
    test row affects only its own output.
    """

    def __init__(
        self, dim: int, n_heads: int, n_inducing: int, ff_factor: int = 2, ssmax: str = "none"
    ):
        super().__init__()
        self.inducing = nn.Parameter(torch.randn(n_inducing, dim) * dim**-0.5)
        self.read = Block(dim, n_heads, ff_factor, ssmax=ssmax)
        self.write = Block(dim, n_heads, ff_factor)

    def forward(self, x: torch.Tensor, n_train: int) -> torch.Tensor:
        """``x`` (S, T, D) with training rows first -> (S, T, D)."""
        return self.write(x, self.summarize(x[:, :n_train]))

    def summarize(self, train: torch.Tensor) -> torch.Tensor:
        """The inducing points after reading the training rows ``train`` (S, n, D):
        ``(S, n_inducing, D)``, all that the block keeps of the training rows."""
        return self.read(self.inducing.expand(train.shape[0], -1, -1), train)
