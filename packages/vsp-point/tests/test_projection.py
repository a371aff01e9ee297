"""Depth maps: where a point lands and what value it gets."""

import pytest
import torch

from vsp_point import depth_maps


def test_a_single_point_gives_one_pixel_of_value_one_per_view():
    maps = depth_maps(torch.tensor([[[0.3, -0.2, 0.7]]]), size=9)
    assert maps.shape == (1, 3, 9, 9)
    for v in range(3):
        assert (maps[0, v] > 0).sum() == 1 and maps[0, v].max() == 1.0


def test_the_nearest_point_wins_its_pixel():
    # same (x, y), different z: in view 0 (depth along z) they share a pixel
    pts = torch.tensor([[[0.0, 0.0, 1.0], [0.0, 0.0, 0.0], [1.0, 1.0, 0.5]]])
    maps = depth_maps(pts, size=5, padding=0.0)
    view = maps[0, 0]
    assert view[0, 0] == 1.0  # the point at z = 1 is nearest (the camera looks down -z)
    assert view[4, 4] == pytest.approx(0.5)  # z = 0.5 of a z-range of 1


def test_depths_lie_in_the_unit_interval():
    maps = depth_maps(torch.randn(4, 500, 3) * 7 + 3, size=32)
    assert maps.min() >= 0 and maps.max() == 1.0
    assert maps.amax(dim=(2, 3)).eq(1.0).all()  # every view sees its nearest point


def test_scale_and_translation_do_not_change_the_maps():
    x = torch.randn(2, 300, 3, dtype=torch.float64)
    torch.testing.assert_close(depth_maps(x, size=16), depth_maps(3.0 * x + 2.0, size=16))


def test_bad_size_is_refused():
    with pytest.raises(ValueError, match="size"):
        depth_maps(torch.randn(1, 10, 3), size=0)
