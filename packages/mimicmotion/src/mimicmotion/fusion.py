"""Progressive latent fusion: overlapping windows that all contain the reference frame.

A video of ``num_frames`` frames is denoised in windows of ``tile_size`` frames. Window
``i`` is ``[0, s+1, ..., s+tile_size-1]`` for ``s`` in ``range(0, num_frames - tile_size + 1,
tile_size - tile_overlap)``, plus a last window ending at the final frame: frame 0 (the
reference) is in every window, and consecutive windows share ``tile_overlap - 1`` other
frames (``tile_overlap = 1``: independent windows). Per step, each window's prediction is weighted by a
triangle over its positions, ``w_k = min((k + 0.5) 2 / T, 2 - (k + 0.5) 2 / T)``, and the
weighted predictions are divided by the summed weights.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from icml25_core import check_scalar

MAX_FRAMES = 1_000_000


def check_tiling(num_frames: int, tile_size: int, tile_overlap: int) -> None:
    """Raise a clear ``ValueError`` for an impossible tiling (``TypeError`` for non-integers)."""
    check_scalar(tile_size, "tile_size", integer=True)
    check_scalar(tile_overlap, "tile_overlap", integer=True)
    if tile_size < 2:
        raise ValueError(f"tile_size must be >= 2, got {tile_size}")
    if not 1 <= tile_overlap < tile_size:
        raise ValueError(
            f"tile_overlap must be in [1, tile_size) = [1, {tile_size}), got {tile_overlap} "
            "(a window holds frame 0 and tile_size - 1 new frames, so windows share "
            "tile_overlap - 1 frames besides frame 0)"
        )
    check_scalar(num_frames, "num_frames", integer=True)
    if num_frames < tile_size:
        raise ValueError(f"num_frames ({num_frames}) must be >= tile_size ({tile_size})")
    if num_frames > MAX_FRAMES:
        windows = (num_frames - tile_size) // (tile_size - tile_overlap) + 2
        raise ValueError(
            f"num_frames ({num_frames}) is above {MAX_FRAMES} (11 hours at 25 fps): "
            f"{windows} windows of {tile_size} frames, each denoised at every step; split "
            "the video"
        )


def windows(num_frames: int, tile_size: int, tile_overlap: int) -> list[list[int]]:
    """Frame indices of every window (each of length ``tile_size``, each starting at 0)."""
    check_tiling(num_frames, tile_size, tile_overlap)
    out = [
        [0, *range(s + 1, s + tile_size)]
        for s in range(0, num_frames - tile_size + 1, tile_size - tile_overlap)
    ]
    last = [0, *range(num_frames - tile_size + 1, num_frames)]
    if out[-1] != last:
        out.append(last)
    return out


def triangle_weights(tile_size: int) -> torch.Tensor:
    """``w_k = min((k + 0.5) 2 / T, 2 - (k + 0.5) 2 / T)`` for ``k = 0..T-1``, shape (T,)."""
    x = (torch.arange(tile_size, dtype=torch.float64) + 0.5) * 2 / tile_size
    return torch.minimum(x, 2 - x)


def fuse(
    predict: Callable[[list[int]], torch.Tensor],
    num_frames: int,
    tile_size: int,
    tile_overlap: int,
    frame_dim: int = 1,
) -> torch.Tensor:
    """Weighted average of per-window predictions over the whole video.

    Parameters
    ----------
    predict : callable
        ``predict(indices) -> Tensor`` with ``len(indices)`` frames along ``frame_dim``.
    num_frames, tile_size, tile_overlap : int
    frame_dim : int
        The frame axis of the predictions (1 for diffusers' ``(B, F, C, H, W)`` latents).

    Returns
    -------
    Tensor
        ``num_frames`` frames along ``frame_dim``.
    """
    total = weight_sum = None
    w = triangle_weights(tile_size)
    for idx in windows(num_frames, tile_size, tile_overlap):
        pred = predict(idx)
        if total is None:
            shape = list(pred.shape)
            shape[frame_dim] = num_frames
            total = pred.new_zeros(shape)
            weight_sum = pred.new_zeros(num_frames)
        view = [1] * pred.ndim
        view[frame_dim] = tile_size
        wk = w.to(pred.dtype).to(pred.device)
        index = torch.tensor(idx, device=pred.device)
        total.index_add_(frame_dim, index, pred * wk.view(view))
        weight_sum.index_add_(0, index, wk)
    view = [1] * total.ndim
    view[frame_dim] = num_frames
    return total / weight_sum.view(view)
