"""Point operations in pure torch (no compiled extensions): farthest point sampling, k
nearest neighbours, patch grouping and the Chamfer distance.

Point-MAE and DAPT call ``pointnet2_ops`` (FPS), ``knn_cuda`` (KNN) and a CUDA Chamfer
extension, none of which builds without a GPU toolchain; these run on every device.
"""

from __future__ import annotations

import torch

__all__ = ["chamfer_distance", "check_points", "farthest_point_sample", "group_points", "knn"]


def check_points(points: torch.Tensor, name: str = "points", *, min_points: int = 1) -> None:
    """Refuse what is not a finite float ``(B, N, 3)`` cloud batch with ``N >= min_points``."""
    if not isinstance(points, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape (B, N, 3), got {type(points)}")
    if points.ndim != 3 or points.shape[-1] != 3:
        raise ValueError(
            f"{name} must have shape (B, N, 3) (xyz per point), got {tuple(points.shape)}"
        )
    if not points.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {points.dtype}")
    if points.shape[0] == 0:
        raise ValueError(f"{name} is an empty batch")
    if points.shape[1] < min_points:
        raise ValueError(
            f"{name} has {points.shape[1]} points per cloud; at least {min_points} are needed"
        )
    if not bool(torch.isfinite(points).all()):
        raise ValueError(f"{name} contains NaN or infinite coordinates")


def farthest_point_sample(
    points: torch.Tensor, k: int, *, start: torch.Tensor | None = None
) -> torch.Tensor:
    """Indices of ``k`` farthest-point samples of each cloud.

    Greedy: start at ``start`` (default index 0, as ``pointnet2_ops``), then repeatedly take
    the point farthest from everything chosen so far,
    :math:`i_{t+1} = \\arg\\max_j \\min_{s \\le t} \\lVert p_j - p_{i_s} \\rVert`.

    Parameters
    ----------
    points : Tensor, shape (B, N, 3)
    k : int
        Samples per cloud, ``1 <= k <= N``.
    start : Tensor of int, shape (B,), optional
        First index per cloud.

    Returns
    -------
    Tensor of int64, shape (B, k)
        Distinct indices (when the cloud has ``k`` distinct points).
    """
    check_points(points, min_points=k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return _farthest_point_sample(points, k, start)


def _farthest_point_sample(points, k, start=None):
    """:func:`farthest_point_sample` on a batch already checked."""
    b, n, _ = points.shape
    idx = torch.empty(b, k, dtype=torch.long, device=points.device)
    dist = torch.full((b, n), float("inf"), dtype=points.dtype, device=points.device)
    rows = torch.arange(b, device=points.device)
    cur = torch.zeros(b, dtype=torch.long, device=points.device) if start is None else start.long()
    for t in range(k):
        idx[:, t] = cur
        d = (points - points[rows, cur].unsqueeze(1)).square().sum(-1)
        dist = torch.minimum(dist, d)
        dist[rows, cur] = -1.0  # never chosen twice, even among duplicate points
        cur = dist.argmax(-1)
    return idx


def knn(points: torch.Tensor, queries: torch.Tensor, k: int) -> torch.Tensor:
    """Indices of the ``k`` points nearest to each query (nearest first).

    Parameters
    ----------
    points : Tensor, shape (B, N, 3)
    queries : Tensor, shape (B, G, 3)
    k : int
        ``1 <= k <= N``.

    Returns
    -------
    Tensor of int64, shape (B, G, k)
        ``torch.cdist(queries, points).topk(k, largest=False)`` indices.
    """
    if k > points.shape[1]:
        raise ValueError(f"k={k} neighbours asked of clouds with {points.shape[1]} points")
    d = torch.cdist(queries, points)
    return d.topk(k, dim=-1, largest=False, sorted=True).indices


def group_points(
    points: torch.Tensor, num_group: int, group_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Point-MAE's patches: FPS centres and their KNN neighbourhoods, centred.

    Parameters
    ----------
    points : Tensor, shape (B, N, 3)
    num_group, group_size : int
        G centres and M points per patch (``G <= N``, ``M <= N``).

    Returns
    -------
    neighborhood : Tensor, shape (B, G, M, 3)
        Patch points relative to their centre.
    center : Tensor, shape (B, G, 3)
    """
    check_points(points, min_points=max(num_group, group_size))
    centre_idx = _farthest_point_sample(points, num_group)
    center = torch.gather(points, 1, centre_idx.unsqueeze(-1).expand(-1, -1, 3))
    idx = knn(points, center, group_size)  # B G M
    b = points.shape[0]
    flat = idx.reshape(b, -1, 1).expand(-1, -1, 3)
    neighborhood = torch.gather(points, 1, flat).reshape(b, num_group, group_size, 3)
    return neighborhood - center.unsqueeze(2), center


def chamfer_distance(a: torch.Tensor, b: torch.Tensor, *, squared: bool = True) -> torch.Tensor:
    """Symmetric Chamfer distance between point sets, averaged over the batch.

    .. math:: \\frac{1}{|A|}\\sum_{a} \\min_b d(a, b) + \\frac{1}{|B|}\\sum_{b} \\min_a d(a, b)

    with :math:`d` the squared Euclidean distance (``squared=True``, Point-MAE's ``cdl2``)
    or the Euclidean distance (``cdl1``).

    Parameters
    ----------
    a : Tensor, shape (B, N, 3)
    b : Tensor, shape (B, M, 3)

    Returns
    -------
    Tensor, scalar
    """
    d = torch.cdist(a, b)
    if squared:
        d = d.square()
    return d.min(-1).values.mean() + d.min(-2).values.mean()
