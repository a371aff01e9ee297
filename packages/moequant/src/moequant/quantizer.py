"""Uniform integer quantization of weight matrices: grids, round-to-nearest and bit packing.

A weight row ``w`` (one output channel; one group of ``group_size`` input columns when
grouped) is mapped to codes ``q = clamp(round(w / s) + z, 0, 2^b - 1)`` and back to
``s (q - z)``. Asymmetric grids take ``s = (max - min) / (2^b - 1)`` and ``z = round(-min /
s)`` over the range widened to include 0; symmetric grids take ``s = 2 max|w| / (2^b - 1)``
and ``z = 2^(b-1)``.

``clip="mse"`` shrinks that range by the factor ``p = 1 - i / 100``, ``i = 0 .. 79``, and
keeps per row the ``p`` with the least ``sum |Q(w) - w|^2.4`` (GPTQ's and the official
MoEQuant code's ``WeightQuantizer(mse=True)``, the ``--w_clip`` of the paper's results).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from icml25_core import check_array


def check_bits(bits: int) -> None:
    if not isinstance(bits, int) or isinstance(bits, bool) or not 2 <= bits <= 8:
        raise ValueError(f"bits must be an integer in [2, 8], got {bits!r}")


def check_group_size(group_size: int, columns: int) -> None:
    if group_size == -1:
        return
    if not isinstance(group_size, int) or group_size < 1 or columns % group_size:
        raise ValueError(
            f"group_size must be -1 (one group per row) or a positive divisor of the input "
            f"width {columns}, got {group_size!r}"
        )


CLIPS = ("minmax", "mse")
#: the clipping search of ``clip="mse"``: shrink steps, the least factor, the error's norm
MSE_GRID, MSE_MAXSHRINK, MSE_NORM = 100, 0.8, 2.4


def check_clip(clip: str) -> None:
    if clip not in CLIPS:
        raise ValueError(f"clip must be one of {CLIPS}, got {clip!r}")


def _range_grid(lo, hi, bits: int, sym: bool) -> tuple[torch.Tensor, torch.Tensor]:
    maxq = 2**bits - 1
    if sym:
        return 2 * hi / maxq, torch.full_like(hi, (maxq + 1) / 2)
    scale = (hi - lo) / maxq
    return scale, torch.round(-lo / scale)


def grid(
    w: torch.Tensor, bits: int, sym: bool, clip: str = "minmax"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scale and zero point per row of ``w`` ``(rows, cols)``: two ``(rows, 1)`` tensors;
    ``clip="mse"`` searches the clipping ratio (module doc)."""
    w = w.float()
    if sym:
        hi = w.abs().amax(1, keepdim=True)
        hi = torch.where(hi == 0, torch.ones_like(hi), hi)
        lo = -hi
    else:
        lo = w.amin(1, keepdim=True).clamp(max=0)
        hi = w.amax(1, keepdim=True).clamp(min=0)
        empty = (lo == 0) & (hi == 0)
        lo, hi = torch.where(empty, -1.0, lo), torch.where(empty, 1.0, hi)
    scale, zero = _range_grid(lo, hi, bits, sym)
    if clip == "minmax":
        return scale, zero
    check_clip(clip)
    best = torch.full_like(scale, math.inf)
    for i in range(int(MSE_MAXSHRINK * MSE_GRID)):
        p = 1 - i / MSE_GRID
        s1, z1 = _range_grid(p * lo, p * hi, bits, sym)
        err = (decode(encode(w, s1, z1, bits), s1, z1) - w).abs().pow(MSE_NORM).sum(1, True)
        better = err < best  # ties keep the wider range, as the official search
        best = torch.where(better, err, best)
        scale, zero = torch.where(better, s1, scale), torch.where(better, z1, zero)
    return scale, zero


def encode(w: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, bits: int) -> torch.Tensor:
    """Integer codes of ``w`` on the grid ``(scale, zero)`` (broadcast), as ``int64``;
    computed in float64 so every caller rounds ties alike."""
    codes = torch.round(w.double() / scale.double()) + zero.double()
    return torch.clamp(codes, 0, 2**bits - 1).long()


def decode(q: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor) -> torch.Tensor:
    return scale * (q.float() - zero)


@dataclass
class QuantizedWeight:
    """A quantized matrix ``(rows, cols)``: codes, per-group grids and the column groups.

    Attributes
    ----------
    codes : Tensor (rows, cols) int64 in [0, 2^bits)
    scales, zeros : Tensor (rows, groups)
    g_idx : Tensor (cols,) int64
        The group of every input column (groups follow the quantization order, so with
        act-order a group's columns need not be contiguous).
    bits : int
    """

    codes: torch.Tensor
    scales: torch.Tensor
    zeros: torch.Tensor
    g_idx: torch.Tensor
    bits: int

    def dequantize(self) -> torch.Tensor:
        return decode(self.codes, self.scales[:, self.g_idx], self.zeros[:, self.g_idx])


def rtn(
    w: torch.Tensor, bits: int = 4, group_size: int = 128, sym: bool = False, clip: str = "minmax"
) -> QuantizedWeight:
    """Round-to-nearest quantization of ``w`` ``(rows, cols)``, per row or per column group;
    ``clip`` as in :func:`grid`."""
    check_bits(bits)
    check_clip(clip)
    check_array(w, "w", ndim=2)  # NaN weights gave int64-min codes
    cols = w.shape[1]
    check_group_size(group_size, cols)
    g = cols if group_size == -1 else group_size
    scales, zeros = zip(
        *(grid(w[:, i : i + g], bits, sym, clip) for i in range(0, cols, g)), strict=True
    )
    scales, zeros = torch.cat(scales, 1), torch.cat(zeros, 1)
    g_idx = torch.arange(cols) // g
    codes = encode(w.float(), scales[:, g_idx], zeros[:, g_idx], bits)
    return QuantizedWeight(codes, scales, zeros, g_idx, bits)


def pack(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Bit-pack integer codes in ``[0, 2^bits)`` into a ``uint8`` stream of
    ``ceil(codes.numel() * bits / 8)`` bytes (little-endian bit order: code ``i`` holds bits
    ``i * bits .. (i + 1) * bits - 1`` of the stream).

    Vectorised by blocks of 8 codes, which fill exactly ``bits`` bytes: one ``int64`` per
    block (at most 56 bits), no per-bit temporaries."""
    check_bits(bits)
    if codes.is_floating_point() or codes.is_complex() or codes.dtype == torch.bool:
        raise TypeError(f"codes must be an integer tensor, got {codes.dtype}")
    if codes.numel():
        lo, hi = int(codes.min()), int(codes.max())
        if lo < 0 or hi >= 2**bits:
            raise ValueError(
                f"codes must lie in [0, {2**bits}) for bits={bits}, got range [{lo}, {hi}] "
                "(they would wrap around)"
            )
    n = codes.numel()
    flat = codes.reshape(-1).to(torch.int64)
    flat = torch.cat([flat, flat.new_zeros((-n) % 8)]).reshape(-1, 8)
    shifts = torch.arange(0, 8 * bits, bits, device=flat.device)
    blocks = (flat << shifts).sum(1)  # disjoint bit ranges: the sum is an OR
    out = (blocks[:, None] >> torch.arange(0, 8 * bits, 8, device=flat.device)) & 0xFF
    return out.to(torch.uint8).reshape(-1)[: math.ceil(n * bits / 8)]


def unpack(packed: torch.Tensor, bits: int, shape: tuple[int, ...]) -> torch.Tensor:
    """Inverse of :func:`pack`: codes of ``shape`` as ``int64``."""
    return unpack_narrow(packed, bits, shape).to(torch.int64)


def unpack_narrow(packed: torch.Tensor, bits: int, shape: tuple[int, ...]) -> torch.Tensor:
    """:func:`unpack` in the narrowest dtype: ``uint8`` codes for 1, 2, 4 and 8 bits (a
    code never straddles a byte: shifts of the bytes themselves), else ``int64`` (blocks
    of 8 codes in one ``int64``)."""
    n = math.prod(shape)
    stream = packed.reshape(-1)
    if 8 % bits == 0:
        shifts = torch.arange(0, 8, bits, dtype=torch.uint8, device=stream.device)
        codes = (stream[:, None] >> shifts) & (2**bits - 1)
        return codes.reshape(-1)[:n].reshape(shape)
    stream = stream.to(torch.int64)
    stream = torch.cat([stream, stream.new_zeros((-stream.numel()) % bits)]).reshape(-1, bits)
    blocks = (stream << torch.arange(0, 8 * bits, 8, device=stream.device)).sum(1)
    codes = (blocks[:, None] >> torch.arange(0, 8 * bits, bits, device=stream.device)) & (
        2**bits - 1
    )
    return codes.reshape(-1)[:n].reshape(shape)
