"""GPTQ (Frantar et al., 2023) on one weight matrix, given the Hessian of its inputs.

Minimises ``||W X - Q X||^2`` column by column: each column is rounded, and its rounding
error, scaled by the inverse Hessian's Cholesky factor, is pushed onto the columns not yet
quantized. ``H = (2 / N) sum_t x_t x_t^T`` is accumulated by :class:`Hessian`; with token
weights ``c_t`` (AGQ) it is ``(2 / N) sum_t c_t x_t x_t^T``.
"""

from __future__ import annotations

import torch

from icml25_core import check_array, check_scalar

from .quantizer import QuantizedWeight, check_bits, check_clip, check_group_size, encode, grid


class Hessian:
    """Running ``H = (2 / N) sum_t c_t x_t x_t^T`` over input rows ``x`` ``(..., cols)``.

    ``N`` counts tokens (not weights), so scaling every ``c_t`` by a constant scales ``H``,
    which GPTQ's relative damping makes irrelevant.
    """

    def __init__(self, columns: int, device: torch.device | str = "cpu"):
        self.H = torch.zeros(columns, columns, dtype=torch.float64, device=device)
        self.n = 0

    def add(self, x: torch.Tensor, weights: torch.Tensor | None = None) -> None:
        x = x.reshape(-1, x.shape[-1]).to(self.H)
        if x.shape[0] == 0:
            return
        if weights is not None:
            x = x * weights.reshape(-1, 1).to(self.H).sqrt()
        self.H *= self.n / (self.n + x.shape[0])
        self.n += x.shape[0]
        self.H += (2 / self.n) * x.T @ x


def gptq(
    w: torch.Tensor,
    H: torch.Tensor,
    bits: int = 4,
    group_size: int = 128,
    sym: bool = False,
    act_order: bool = False,
    blocksize: int = 128,
    damp: float = 0.01,
    clip: str = "minmax",
) -> QuantizedWeight:
    """Quantize ``w`` ``(rows, cols)`` with GPTQ for the input Hessian ``H`` ``(cols, cols)``.

    Parameters
    ----------
    bits : int in [2, 8]
    group_size : int
        Columns sharing one grid; ``-1`` for one grid per row.
    sym : bool
        Symmetric grid.
    act_order : bool
        Quantize columns by decreasing ``diag(H)``; groups then follow that order.
    blocksize : int
        Columns updated lazily together (rounded up to a multiple of ``group_size`` so a
        group never straddles two blocks).
    damp : float
        ``H + damp * mean(diag(H)) I`` before inversion. Columns with ``H_jj = 0`` (inputs
        never seen) get ``H_jj = 1`` and their weights are quantized as zero, as in GPTQ.
    clip : {"minmax", "mse"}
        Each grid from the min-max range or the MSE clipping search
        (:func:`moequant.quantizer.grid`), on the weights as GPTQ has updated them when
        the group starts (the whole matrix up front with ``group_size=-1``).
    """
    check_bits(bits)
    check_clip(clip)
    rows, cols = w.shape
    check_group_size(group_size, cols)
    if H.shape != (cols, cols):
        raise ValueError(
            f"H must be ({cols}, {cols}) for w of shape {tuple(w.shape)}, got {tuple(H.shape)}"
        )
    check_scalar(damp, "damp", low=0.0, low_inclusive=False)
    check_array(w, "w", ndim=2)
    check_array(H, "H", ndim=2)
    g = cols if group_size == -1 else group_size
    blocksize = max(blocksize // g, 1) * g if group_size != -1 else blocksize
    W = w.detach().to(torch.float64).clone()
    H = H.detach().to(torch.float64).clone()
    dead = torch.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    perm = torch.argsort(torch.diag(H), descending=True) if act_order else torch.arange(cols)
    W, H = W[:, perm], H[perm][:, perm]
    H += damp * torch.mean(torch.diag(H)) * torch.eye(cols, dtype=H.dtype, device=H.device)
    L = torch.linalg.cholesky(H)
    Hinv = torch.linalg.cholesky(torch.cholesky_inverse(L), upper=True)

    codes = torch.zeros(rows, cols, dtype=torch.int64, device=W.device)
    scales, zeros = [], []
    if group_size == -1:
        scale, zero = grid(W, bits, sym, clip)
        scales, zeros = [scale], [zero]
    for i1 in range(0, cols, blocksize):
        i2 = min(i1 + blocksize, cols)
        W1 = W[:, i1:i2].clone()
        Err = torch.zeros_like(W1)
        Hinv1 = Hinv[i1:i2, i1:i2]
        for i in range(i2 - i1):
            if group_size != -1 and (i1 + i) % g == 0:
                scale, zero = grid(W1[:, i : i + g], bits, sym, clip)
                scales.append(scale)
                zeros.append(zero)
            col = W1[:, i]
            q = encode(col[:, None], scale, zero, bits)[:, 0]
            codes[:, i1 + i] = q
            err = (col - scale[:, 0] * (q - zero[:, 0])) / Hinv1[i, i]
            W1[:, i:] -= err[:, None] @ Hinv1[i, i:][None, :]
            Err[:, i] = err
        W[:, i2:] -= Err @ Hinv[i1:i2, i2:]

    inv = torch.argsort(perm)
    g_idx = (torch.arange(cols, device=W.device) // g)[inv]
    return QuantizedWeight(
        codes[:, inv], torch.cat(scales, 1).float(), torch.cat(zeros, 1).float(), g_idx, bits
    )


def reconstruction_error(w: torch.Tensor, q: torch.Tensor, H: torch.Tensor) -> float:
    """``tr((W - Q) H (W - Q)^T)``: the output error ``||W X - Q X||^2 (2 / N)`` on the
    inputs ``H`` was accumulated from."""
    d = w.to(torch.float64) - q.to(torch.float64)
    return float(torch.einsum("ij,jk,ik->", d, H.to(torch.float64), d))
