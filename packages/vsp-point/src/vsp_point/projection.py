"""Depth maps of a point cloud from three orthogonal views (the paper's projection).

Each view looks down one axis from its positive side. A cloud is centred on its bounding
box and scaled by its largest half-extent (so its aspect ratio is kept and it fills the
image); a point lands on the pixel its two other coordinates fall in, with value
``1 - depth``, where depth is its distance from the nearest point along the view axis
divided by the cloud's extent along it. Where points share a pixel the nearest wins (the
largest value), and empty pixels are 0.

The paper's Eq. 5 multiplies the depth by a distance factor whose definition is garbled
in the text; this is a plain point splat (no densification, no smoothing), and it is
differentiable in nothing, which the frozen 2-D model does not need.
"""

from __future__ import annotations

import torch

from icml25_core import check_scalar

from .ops import check_points

__all__ = ["VIEW_AXES", "depth_maps"]

VIEW_AXES = ((0, 1, 2), (0, 2, 1), (1, 2, 0))
"""Per view: the image's column axis, row axis and depth axis (x/y/z as 0/1/2)."""


def depth_maps(points: torch.Tensor, size: int = 224, *, padding: float = 0.05) -> torch.Tensor:
    """Three orthogonal depth maps per cloud.

    Parameters
    ----------
    points : Tensor, shape (B, N, 3)
    size : int
        Image side in pixels (the paper: 224).
    padding : float
        Share of the image left empty at each border, in ``[0, 1)``.

    Returns
    -------
    Tensor, shape (B, 3, size, size)
        View v in channel v (axes in :data:`VIEW_AXES`); values in ``[0, 1]``, 1 at the
        nearest point of each view, 0 where no point falls.
    """
    check_points(points)
    check_scalar(size, "size", low=1, integer=True)
    check_scalar(padding, "padding", low=0, high=1, high_inclusive=False)
    b = points.shape[0]
    lo, hi = points.amin(1, keepdim=True), points.amax(1, keepdim=True)  # B 1 3
    centre = (lo + hi) / 2
    extent = (hi - lo).clamp_min(torch.finfo(points.dtype).eps)  # per axis
    half = (extent.amax(-1, keepdim=True) / 2).clamp_min(torch.finfo(points.dtype).eps)
    unit = (points - centre) / half * (1 - padding)  # in [-1, 1]
    pix = ((unit + 1) / 2 * (size - 1)).round().long().clamp_(0, size - 1)
    depth = (hi - points) / extent  # 0 at the nearest point of the view, in [0, 1]
    maps = torch.zeros(b, 3, size * size, dtype=points.dtype, device=points.device)
    for v, (col, row, axis) in enumerate(VIEW_AXES):
        flat = pix[..., row] * size + pix[..., col]
        value = 1 - depth[..., axis]
        maps[:, v].scatter_reduce_(1, flat, value, reduce="amax", include_self=True)
    return maps.reshape(b, 3, size, size)
