"""Modules holding bit-packed integer weights.

Each stores ``codes`` as a ``uint8`` bit stream (``bits`` bits per weight), ``scales`` and
``zeros`` per output row and column group, and ``g_idx`` (the group of every input column):
the saved format. They compute what the float module computes with the dequantized
weights, by one of three paths (:attr:`PackedWeight.kernel`, :func:`set_kernel`):

- ``"auto"`` (default): torch's integer matmul kernels for bfloat16 activations, where
  they apply: on CPU, 4-bit weights through ``aten._weight_int4pack_mm_for_cpu`` (groups
  of 32 to 256 columns, or per row when a row divides into such groups; act-order groups
  by a column permutation of the input) and 8-bit per-row weights of a multiple of 32
  columns through ``aten._weight_int8pack_mm`` (the zero point as an exact rank-one
  correction). Float32 and float16 activations take the dequantize path: torch's CPU
  integer kernels are 5-25x slower than a dense float32 matmul at those dtypes (measured
  on torch 2.15), so a float32 model keeps float32 results.
- ``"bf16"``: the integer kernels for every float input, cast to bfloat16 (relative
  error about 3e-3, as GPTQModel's CPU layer) and the output cast back: the fast path for
  a float32 model.
- ``"dequantize"`` (and the fallback for other widths, devices, and inputs that need a
  gradient): the float matrix rebuilt on every call, then ``F.linear``.

The kernel's weight layout is built on the first call and cached beside the codes
(rebuilt when they change or move). Within :func:`dense_weights`, the dequantize path
keeps each float matrix after its first call too (as much memory as the float model, for
the duration): repeated forwards, as an evaluation makes, skip the unpacking with the same
results.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

from icml25_core import check_choice

from .quantizer import QuantizedWeight, decode, pack, unpack, unpack_narrow

__all__ = [
    "KERNELS",
    "PackedWeight",
    "QuantExperts",
    "QuantLinear",
    "QuantRouter",
    "dense_weights",
    "set_kernel",
]

KERNELS = ("auto", "bf16", "dequantize")
_INT4_GROUPS = (256, 128, 64, 32)  # the group sizes aten's CPU int4 kernel takes
_CAST_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _has_op(name: str) -> bool:
    return hasattr(torch.ops.aten, name)


def set_kernel(model: nn.Module, kernel: str) -> nn.Module:
    """Set the compute path of every packed weight in ``model``: ``"auto"`` (integer
    kernels for bfloat16 activations), ``"bf16"`` (integer kernels, any float activations
    cast to bfloat16) or ``"dequantize"``; returns ``model``."""
    check_choice(kernel, "kernel", KERNELS)
    for module in model.modules():
        if isinstance(module, PackedWeight):
            module.kernel = kernel
            module._cache.clear()
    return model


@contextmanager
def dense_weights(model: nn.Module) -> Iterator[nn.Module]:
    """Within the block, every packed weight of ``model`` keeps the float matrix its
    dequantize path rebuilds, after the first call: the same results, without unpacking
    the codes again on every forward (an evaluation over many batches), for as much memory
    as the float model holds. The matrices are dropped at the end."""
    packed = [m for m in model.modules() if isinstance(m, PackedWeight)]
    before = [m.keep_dense for m in packed]  # nested blocks: the outer one keeps them
    for m in packed:
        m.keep_dense = True
    try:
        yield model
    finally:
        for m, kept in zip(packed, before, strict=True):
            m.keep_dense = kept
            if not kept:
                for key in [k for k in m._cache if isinstance(k, tuple)]:
                    del m._cache[key]


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
        self.kernel = "auto"
        self.keep_dense = False  # set by dense_weights
        # index -> ((versions, data_ptr), kernel operands); ("dense", index, dtype) -> (
        # (versions, data_ptr), float matrix) within dense_weights
        self._cache: dict = {}

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
        codes = unpack_narrow(self.codes[idx], self.bits, (rows, cols))
        scales, zeros, g = self.scales[idx], self.zeros[idx], self.g_idx[idx].long()
        groups = scales.shape[-1]
        if cols % groups == 0 and torch.equal(
            g, torch.arange(cols, device=g.device) // (cols // groups)
        ):
            # contiguous groups: broadcast the grids instead of gathering them per column
            w = decode(codes.view(rows, groups, -1), scales[..., None], zeros[..., None])
            return w.view(rows, cols).to(dtype)
        return decode(codes, scales[:, g], zeros[:, g]).to(dtype)

    def linear(self, x: torch.Tensor, index: int | None = None) -> torch.Tensor:
        """``x @ W.T`` for the matrix ``W`` (of expert ``index`` when stacked), ``x`` of
        shape ``(..., cols)``: an integer kernel where one applies, else the dequantized
        matrix (see the module's docstring)."""
        plan = self._plan(x, index)
        if plan is None:
            return F.linear(x, self._dense(index, x.dtype))
        rows, cols = self.shape[-2:]
        x2 = x.reshape(-1, cols).to(torch.bfloat16)
        kind, weight, scales, extra = plan
        if kind == "int4":
            if extra is not None:  # act-order: the columns in group order
                x2 = x2[:, extra]
            out = torch.ops.aten._weight_int4pack_mm_for_cpu(
                x2.contiguous(), weight, scales[0], scales[1]
            )[:, :rows]
        else:
            out = torch.ops.aten._weight_int8pack_mm(x2.contiguous(), weight, scales)
            if extra is not None:  # the zero point: out -= s (z - 128) sum_k x_k
                out = out + (x2.float().sum(-1, keepdim=True) * extra).to(out.dtype)
        return out.reshape(*x.shape[:-1], rows).to(x.dtype)

    def _plan(self, x: torch.Tensor, index: int | None):
        """The cached kernel operands (for bfloat16 activations), or ``None``
        (dequantize)."""
        if (
            self.kernel == "dequantize"
            or (self.kernel == "auto" and x.dtype != torch.bfloat16)
            or x.device.type != "cpu"
            or x.dtype not in _CAST_DTYPES
            or self.codes.device.type != "cpu"
            or (x.requires_grad and torch.is_grad_enabled())
        ):
            return None
        state = self._state()
        hit = self._cache.get(index)
        if hit is not None and hit[0] == state:
            return hit[1]
        plan = self._build(index)
        self._cache[index] = (state, plan)
        return plan

    def _state(self) -> tuple:
        """What a cached layout depends on: the buffers' versions and storage."""
        versions = tuple(t._version for t in (self.codes, self.scales, self.zeros, self.g_idx))
        return versions, self.codes.data_ptr()

    def _dense(self, index: int | None, dtype: torch.dtype) -> torch.Tensor:
        """:meth:`dequantize`, kept while :func:`dense_weights` is active."""
        if not self.keep_dense:
            return self.dequantize(index, dtype)
        key, state = ("dense", index, dtype), self._state()
        hit = self._cache.get(key)
        if hit is None or hit[0] != state:
            hit = (state, self.dequantize(index, dtype))
            self._cache[key] = hit
        return hit[1]

    def _build(self, index: int | None):
        """The kernel operands of matrix ``index``, scales in bfloat16 (the activations'
        dtype on every kernel call), or ``None`` where no kernel applies."""
        idx = () if index is None else (index,)
        rows, cols = self.shape[-2:]
        scales, zeros = self.scales[idx].float(), self.zeros[idx].float()
        groups = scales.shape[-1]
        # aten's CPU int8 kernel crashes (segfault) in bfloat16 when cols % 8 != 0
        # (torch 2.15): rows of 32 columns only, whatever the dtype
        if self.bits == 8 and groups == 1 and cols % 32 == 0 and _has_op("_weight_int8pack_mm"):
            codes = unpack(self.codes[idx], 8, (rows, cols))
            weight = (codes - 128).to(torch.int8)
            s = scales[:, 0]
            offset = s * (zeros[:, 0] - 128)
            extra = None if bool((zeros == 128).all()) else -offset
            return "int8", weight, s.to(torch.bfloat16), extra
        if self.bits != 4 or not _has_op("_weight_int4pack_mm_for_cpu") or cols % groups:
            return None
        size = cols // groups
        kernel_group = next((k for k in _INT4_GROUPS if size % k == 0), None)
        if kernel_group is None:
            return None
        g = self.g_idx[idx].long()
        perm = None
        if not torch.equal(g, torch.arange(cols) // size):
            if not bool((torch.bincount(g, minlength=groups) == size).all()):
                return None
            perm = torch.argsort(g, stable=True)
        codes = unpack(self.codes[idx], 4, (rows, cols))
        if perm is not None:
            codes = codes[:, perm]
        pad = (-rows) % 16  # the kernel packs rows by 16: zero rows, sliced off
        codes = F.pad(codes, (0, 0, 0, pad), value=8).to(torch.int32)
        repeat = size // kernel_group
        s = F.pad(scales, (0, 0, 0, pad)).repeat_interleave(repeat, 1)
        offset = F.pad(scales * (8 - zeros), (0, 0, 0, pad)).repeat_interleave(repeat, 1)
        weight = torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes, 1)
        scale_zero = torch.stack([s.t(), offset.t()], -1).to(torch.bfloat16).contiguous()
        return "int4", weight, (kernel_group, scale_zero), perm

    def _apply(self, fn, recurse=True):
        self._cache.clear()  # .to(), .float(), ...: the kernel layout is rebuilt lazily
        return super()._apply(fn, recurse)

    def extra_repr(self) -> str:
        return f"shape={self.shape}, bits={self.bits}, kernel={self.kernel!r}"


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
        out = self.weight_q.linear(x)
        return out if self.bias is None else out + self.bias.to(out.dtype)


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
        logits = self.weight_q.linear(x)
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
            gate, up = self.gate_up_q.linear(x, e).chunk(2, dim=-1)
            y = self.down_q.linear(self.act_fn(gate) * up, e)
            y = y * top_k_weights[token_idx, top_k_pos, None]
            out.index_add_(0, token_idx, y.to(out.dtype))
        return out
