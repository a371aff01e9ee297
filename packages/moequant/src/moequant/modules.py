"""Modules holding bit-packed integer weights, dequantized on the fly in ``forward``.

Each stores ``codes`` as a ``uint8`` bit stream (``bits`` bits per weight), ``scales`` and
``zeros`` per output row and column group, and ``g_idx`` (the group of every input column).
They compute exactly what the float module computes with the dequantized weights.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .quantizer import QuantizedWeight, decode, pack, unpack


class PackedWeight(nn.Module):
    """One or more (stacked) quantized matrices ``(*lead, rows, cols)`` as buffers."""

    def __init__(self, shape: tuple[int, ...], groups: int, bits: int):
        super().__init__()
        self.shape, self.bits = tuple(shape), bits
        *lead, rows, cols = self.shape
        nbytes = math.ceil(rows * cols * bits / 8)
        self.register_buffer("codes", torch.zeros(*lead, nbytes, dtype=torch.uint8))
        self.register_buffer("scales", torch.zeros(*lead, rows, groups))
        self.register_buffer("zeros", torch.zeros(*lead, rows, groups))
        self.register_buffer("g_idx", torch.zeros(*lead, cols, dtype=torch.int32))

    @classmethod
    def from_quantized(cls, qws: list[QuantizedWeight] | QuantizedWeight) -> PackedWeight:
        single = isinstance(qws, QuantizedWeight)
        qws = [qws] if single else qws
        rows, cols = qws[0].codes.shape
        lead = () if single else (len(qws),)
        out = cls((*lead, rows, cols), qws[0].scales.shape[1], qws[0].bits)
        for i, q in enumerate(qws):
            idx = () if single else (i,)
            out.codes[idx] = pack(q.codes, q.bits).to(out.codes.device)
            out.scales[idx] = q.scales
            out.zeros[idx] = q.zeros
            out.g_idx[idx] = q.g_idx.to(torch.int32)
        return out

    def dequantize(self, index: int | None = None, dtype=torch.float32) -> torch.Tensor:
        """The float matrix (of expert ``index`` when stacked)."""
        idx = () if index is None else (index,)
        rows, cols = self.shape[-2:]
        codes = unpack(self.codes[idx], self.bits, (rows, cols))
        g = self.g_idx[idx].long()
        return decode(codes, self.scales[idx][:, g], self.zeros[idx][:, g]).to(dtype)

    def extra_repr(self) -> str:
        return f"shape={self.shape}, bits={self.bits}"


class QuantLinear(nn.Module):
    """``nn.Linear`` with a packed integer weight."""

    def __init__(self, in_features: int, out_features: int, groups: int, bits: int, bias: bool):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight_q = PackedWeight((out_features, in_features), groups, bits)
        self.bias = nn.Parameter(torch.zeros(out_features), requires_grad=False) if bias else None

    @classmethod
    def from_linear(cls, linear: nn.Linear, qw: QuantizedWeight) -> QuantLinear:
        out = cls(
            linear.in_features,
            linear.out_features,
            qw.scales.shape[1],
            qw.bits,
            linear.bias is not None,
        )
        out.weight_q = PackedWeight.from_quantized(qw)
        if linear.bias is not None:
            out.bias.data.copy_(linear.bias.data)
        return out.to(linear.weight.device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight_q.dequantize(dtype=x.dtype), self.bias)


class QuantRouter(nn.Module):
    """A router with a packed weight ``(E, D)``; returns ``(logits, weights, indices)`` like
    the transformers routers, with the routing rule of the architecture's adapter."""

    def __init__(self, num_experts: int, hidden: int, groups: int, bits: int, route):
        super().__init__()
        self.hidden = hidden
        self.weight_q = PackedWeight((num_experts, hidden), groups, bits)
        self.route = route  # (logits) -> (weights, indices)

    def forward(self, hidden_states: torch.Tensor):
        x = hidden_states.reshape(-1, self.hidden)
        logits = F.linear(x, self.weight_q.dequantize(dtype=x.dtype))
        weights, indices = self.route(logits)
        return logits, weights, indices


class QuantExperts(nn.Module):
    """Fused experts (``gate_up_proj`` ``(E, 2I, D)``, ``down_proj`` ``(E, D, I)``) with packed
    per-expert weights; the same computation as transformers' ``*Experts.forward``."""

    def __init__(
        self, num_experts: int, hidden: int, inter: int, groups: tuple[int, int], bits: int, act_fn
    ):
        super().__init__()
        self.num_experts = num_experts
        self.gate_up_q = PackedWeight((num_experts, 2 * inter, hidden), groups[0], bits)
        self.down_q = PackedWeight((num_experts, hidden, inter), groups[1], bits)
        self.act_fn = act_fn

    def forward(self, hidden_states, top_k_index, top_k_weights):
        out = torch.zeros_like(hidden_states)
        for e in torch.unique(top_k_index).tolist():
            if e >= self.num_experts:
                continue
            token_idx, top_k_pos = torch.where(top_k_index == e)
            x = hidden_states[token_idx]
            gate, up = F.linear(x, self.gate_up_q.dequantize(e, x.dtype)).chunk(2, dim=-1)
            y = F.linear(self.act_fn(gate) * up, self.down_q.dequantize(e, x.dtype))
            y = y * top_k_weights[token_idx, top_k_pos, None]
            out.index_add_(0, token_idx, y.to(out.dtype))
        return out
