"""Point ops against brute force."""

import numpy as np
import pytest
import torch

from vsp_point import chamfer_distance, farthest_point_sample, group_points, knn


def _fps_reference(p: np.ndarray, k: int) -> list[int]:
    chosen, dist = [0], np.full(len(p), np.inf)
    for _ in range(k - 1):
        dist = np.minimum(dist, ((p - p[chosen[-1]]) ** 2).sum(1))
        dist[chosen] = -1
        chosen.append(int(dist.argmax()))
    return chosen


def test_fps_returns_distinct_indices_equal_to_the_greedy_rule():
    x = torch.randn(3, 200, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    idx = farthest_point_sample(x, 32)
    assert idx.shape == (3, 32)
    for b in range(3):
        assert len(set(idx[b].tolist())) == 32
        assert idx[b].tolist() == _fps_reference(x[b].numpy(), 32)


def test_fps_stays_distinct_on_duplicate_points():
    x = torch.zeros(1, 10, 3)
    x[0, 5:] = 1.0  # two clusters of identical points
    assert sorted(set(farthest_point_sample(x, 10)[0].tolist())) == list(range(10))


def test_knn_equals_a_full_sort_of_distances():
    g = torch.Generator().manual_seed(1)
    pts, q = torch.randn(2, 50, 3, generator=g), torch.randn(2, 7, 3, generator=g)
    idx = knn(pts, q, 5)
    d = ((q[:, :, None] - pts[:, None]) ** 2).sum(-1).numpy()
    np.testing.assert_array_equal(idx.numpy(), np.argsort(d, axis=-1, kind="stable")[..., :5])


def test_groups_are_centred_neighbourhoods_of_the_fps_centres():
    x = torch.randn(2, 100, 3, generator=torch.Generator().manual_seed(2))
    nb, centre = group_points(x, 16, 8)
    assert nb.shape == (2, 16, 8, 3) and centre.shape == (2, 16, 3)
    # the nearest neighbour of a centre is itself
    torch.testing.assert_close(nb[:, :, 0], torch.zeros(2, 16, 3))


def test_chamfer_closed_forms():
    a = torch.tensor([[[0.0, 0, 0]]])
    b = torch.tensor([[[3.0, 4, 0]]])
    assert chamfer_distance(a, b).item() == pytest.approx(50.0)  # 25 + 25
    assert chamfer_distance(a, b, squared=False).item() == pytest.approx(10.0)
    x = torch.randn(2, 30, 3)
    assert chamfer_distance(x, x[:, torch.randperm(30)]).item() == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize(
    ("points", "match"),
    [
        (torch.randn(2, 6, 3), "at least 8"),
        (torch.randn(2, 64, 4), r"\(B, N, 3\)"),
        (torch.full((1, 64, 3), float("nan")), "NaN"),
        (torch.randint(0, 3, (1, 64, 3)), "floating-point"),
    ],
)
def test_bad_clouds_are_refused(points, match):
    with pytest.raises((ValueError, TypeError), match=match):
        group_points(points, 8, 8)
