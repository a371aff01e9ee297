"""PoseNet, MimicMotionUNet and progressive latent fusion: oracles on tiny configs."""

import pytest
import torch
from diffusers import UNetSpatioTemporalConditionModel

from mimicmotion.fusion import fuse, triangle_weights, windows
from mimicmotion.posenet import PoseNet
from mimicmotion.unet import MimicMotionUNet

from .conftest import TINY_UNET


def test_posenet_is_exactly_zero_at_init_and_downsamples_by_8():
    out = PoseNet(out_channels=32)(torch.rand(3, 3, 64, 40))
    assert out.shape == (3, 32, 8, 5)
    assert torch.count_nonzero(out) == 0
    with pytest.raises(ValueError, match="multiples of 8"):
        PoseNet()(torch.rand(1, 3, 60, 64))


@torch.no_grad()
def test_unet_with_zero_pose_equals_the_svd_unet_and_pose_changes_it():
    torch.manual_seed(0)
    ours = MimicMotionUNet(**TINY_UNET).eval()
    plain = UNetSpatioTemporalConditionModel(**TINY_UNET).eval()
    plain.load_state_dict(ours.state_dict())
    x = torch.randn(1, 2, 8, 16, 16)
    ehs, ids = torch.randn(1, 1, 32), torch.tensor([[7.0, 127.0, 0.02]])
    pose = PoseNet(out_channels=32)(torch.rand(2, 3, 128, 128))
    base = plain(x, 10, ehs, ids).sample
    assert torch.equal(ours(x, 10, ehs, ids, pose_latents=pose).sample, base)
    assert torch.equal(ours(x, 10, ehs, ids).sample, base)
    moved = ours(x, 10, ehs, ids, pose_latents=torch.ones_like(pose)).sample
    assert not torch.allclose(moved, base)
    with pytest.raises(ValueError, match="pose_latents must have shape"):
        ours(x, 10, ehs, ids, pose_latents=torch.ones(2, 32, 4, 4))


@pytest.mark.parametrize(
    ("n", "tile", "overlap"), [(16, 16, 4), (40, 16, 4), (72, 16, 6), (17, 8, 7)]
)
def test_windows_cover_every_frame_and_all_contain_frame_zero(n, tile, overlap):
    ws = windows(n, tile, overlap)
    assert all(w[0] == 0 and len(w) == tile for w in ws)
    assert set().union(*ws) == set(range(n))
    assert ws[-1][-1] == n - 1


def test_triangle_weights_are_symmetric_and_positive():
    w = triangle_weights(16)
    torch.testing.assert_close(w, w.flip(0))
    assert (w > 0).all() and w.max() <= 1


def test_one_window_fusion_equals_a_single_pass_and_constants_survive():
    pred = torch.randn(1, 16, 4, 8, 8)
    out = fuse(lambda idx: pred[:, idx], 16, 16, 4)
    torch.testing.assert_close(out, pred)
    const = fuse(lambda idx: torch.full((1, len(idx), 4, 2, 2), 0.7), 64, 16, 4)
    torch.testing.assert_close(const, torch.full((1, 64, 4, 2, 2), 0.7))
    # a prediction that is a function of the frame index is reproduced exactly
    frames = torch.arange(50.0).view(1, 50, 1)
    torch.testing.assert_close(fuse(lambda idx: frames[:, idx], 50, 16, 4), frames)


@pytest.mark.parametrize(
    ("n", "tile", "overlap", "message"),
    [
        (16, 16, 16, "tile_overlap"),
        (32, 16, 0, "tile_overlap"),
        (8, 16, 4, "num_frames"),
        (16, 1, 0, "tile_size"),
        (10**8, 16, 4, r"num_frames \(100000000\) is above 1000000"),  # hung before
    ],
)
def test_bad_tiling(n, tile, overlap, message):
    with pytest.raises(ValueError, match=message):
        windows(n, tile, overlap)
