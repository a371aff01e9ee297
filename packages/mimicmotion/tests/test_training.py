"""Regional loss, region masks, a CPU training step, pose rendering and video writing."""

import numpy as np
import pytest
import torch

from mimicmotion.pose import PoseSequence, render, rescale_to_reference
from mimicmotion.posenet import PoseNet
from mimicmotion.training import region_mask, regional_loss, training_step, write_video
from mimicmotion.unet import MimicMotionUNet

from .conftest import TINY_UNET


def _poses(frames=2, seed=0, hand_score=1.0):
    rng = np.random.default_rng(seed)
    return PoseSequence(
        rng.uniform(0.2, 0.8, (frames, 18, 2)),
        np.ones((frames, 18)),
        rng.uniform(0.2, 0.8, (frames, 2, 21, 2)),
        np.full((frames, 2, 21), hand_score),
        rng.uniform(0.3, 0.7, (frames, 68, 2)),
        np.zeros((frames, 68)),
    )


def test_regional_loss_is_mse_with_an_empty_mask_and_scales_masked_pixels():
    g = torch.Generator().manual_seed(0)
    pred, target = torch.randn(2, 3, 4, 8, 8, generator=g), torch.randn(2, 3, 4, 8, 8, generator=g)
    mse = torch.nn.functional.mse_loss(pred, target)
    torch.testing.assert_close(regional_loss(pred, target, torch.zeros(2, 3, 1, 8, 8), 5.0), mse)
    full = regional_loss(pred, target, torch.ones(2, 3, 1, 8, 8), 5.0)
    torch.testing.assert_close(full, 5 * mse)
    mask = torch.zeros(2, 3, 1, 8, 8)
    mask[..., :4, :] = 1
    err = (pred - target) ** 2
    expected = (err.sum() + 2 * err[..., :4, :].sum()) / err.numel()
    torch.testing.assert_close(regional_loss(pred, target, mask, 3.0), expected)
    with pytest.raises(ValueError, match="factor"):
        regional_loss(pred, target, mask, 0.5)


def test_region_mask_follows_confidence():
    confident = region_mask(_poses(hand_score=1.0), 32, 32)
    unsure = region_mask(_poses(hand_score=0.1), 32, 32)
    assert confident.shape == (2, 1, 32, 32) and confident.sum() > 0
    assert unsure.sum() == 0  # low-confidence hands and a face with zero scores: no region


def test_rendering_drops_low_confidence_limbs_and_rescaling_is_exact_for_affine_maps():
    poses = _poses(frames=1)
    full = render(poses, 64, 64)
    poses.body_scores[0, :] = 0.1
    poses.hand_scores[0] = 0.1
    assert render(poses, 64, 64).sum() == 0  # everything below the 0.3 threshold
    assert full.shape == (1, 64, 64, 3) and full.dtype == np.uint8 and full.sum() > 0
    drive = _poses(frames=3, seed=1)
    ref = drive.body[0] * [0.5, 0.8] + [0.1, 0.05]
    out = rescale_to_reference(drive, ref, np.ones(18))
    np.testing.assert_allclose(out.body[0], ref, atol=1e-12)
    np.testing.assert_allclose(out.hands[2], drive.hands[2] * [0.5, 0.8] + [0.1, 0.05], atol=1e-12)
    with pytest.raises(ValueError, match="body must have shape"):
        PoseSequence(
            np.zeros((1, 17, 2)),
            *(np.zeros(s) for s in [(1, 18), (1, 2, 21, 2), (1, 2, 21), (1, 68, 2), (1, 68)]),
        )


def test_training_step_runs_on_cpu_and_trains_posenet_and_unet():
    torch.manual_seed(0)
    unet, pose_net = MimicMotionUNet(**TINY_UNET), PoseNet(out_channels=32)
    params = [*unet.parameters(), *pose_net.parameters()]
    opt = torch.optim.Adam(params, lr=1e-3)
    b, f = 1, 2
    latents, ref = torch.randn(b, f, 4, 8, 8), torch.randn(b, f, 4, 8, 8)
    embeds, ids = torch.randn(b, 1, 32), torch.tensor([[6.0, 127.0, 0.02]])
    poses = torch.rand(b * f, 3, 64, 64) * 2 - 1
    before = pose_net.final_proj.weight.detach().clone()
    losses = [
        training_step(
            unet,
            pose_net,
            latents,
            ref,
            embeds,
            ids,
            poses,
            opt,
            generator=torch.Generator().manual_seed(i),
        )
        for i in range(3)
    ]
    assert all(np.isfinite(losses))
    assert not torch.equal(before, pose_net.final_proj.weight)  # zero init is trainable
    with torch.no_grad():  # a diverged network: the step names the learning rate
        for p in unet.parameters():
            p.fill_(float("nan"))
    with pytest.raises(FloatingPointError, match=r"training loss became nan .* lower lr"):
        training_step(unet, pose_net, latents, ref, embeds, ids, poses, opt)


def test_write_video(tmp_path):
    frames = np.random.default_rng(0).random((4, 16, 16, 3))
    write_video(frames, tmp_path / "v.gif")
    assert (tmp_path / "v.gif").stat().st_size > 0
    with pytest.raises(ValueError, match=r"gif or \.mp4"):
        write_video(frames, tmp_path / "v.avi")


def test_mp4_without_its_extra_says_what_to_install(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "imageio_ffmpeg" else real(name, *a),
    )
    with pytest.raises(ImportError, match=r"pip install 'mimicmotion\[mp4\]'"):
        write_video(np.zeros((2, 8, 8, 3)), tmp_path / "v.mp4")
    assert not (tmp_path / "v.mp4").exists()


def test_videos_and_renders_that_cannot_be_written_are_refused(tmp_path):
    frames = np.random.default_rng(0).random((4, 16, 16, 3))
    nan = frames.copy()
    nan[1, 2, 3, 0] = np.nan
    cases = [
        (lambda: write_video(frames, tmp_path / "a.gif", fps=0), "fps must be > 0"),
        (lambda: write_video([], tmp_path / "b.gif"), "frames is empty"),
        (lambda: write_video(nan, tmp_path / "c.gif"), "finite"),
        (lambda: write_video(frames.transpose(0, 3, 1, 2), tmp_path / "d.gif"), r"permute"),
        (lambda: write_video([frames[0], frames[1, :8]], tmp_path / "e.gif"), "one shape"),
        (lambda: render(_poses(), 0, 16), "height must be >= 1"),
        (lambda: render(_poses(), -8, 16), "height must be >= 1"),
    ]
    for call, match in cases:
        with pytest.raises(ValueError, match=match):
            call()
    assert not any(tmp_path.iterdir())  # nothing half-written


def test_pose_sequences_need_frames_and_arrays():
    poses = _poses(frames=2)
    as_lists = PoseSequence(
        poses.body.tolist(),
        poses.body_scores,
        poses.hands,
        poses.hand_scores,
        poses.face,
        poses.face_scores,
    )
    np.testing.assert_array_equal(as_lists.body, poses.body)
    fields = ("body", "body_scores", "hands", "hand_scores", "face", "face_scores")
    empty = [np.zeros((0, *getattr(poses, f).shape[1:])) for f in fields]
    with pytest.raises(ValueError, match="at least one frame"):
        PoseSequence(*empty)


def test_regional_loss_refuses_a_nan_prediction():
    target = torch.zeros(1, 2, 4, 8, 8)
    with pytest.raises(ValueError, match="pred must be finite"):
        regional_loss(target * float("nan"), target)
