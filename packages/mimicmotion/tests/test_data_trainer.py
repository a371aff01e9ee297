"""Stick-figure clips, clip encoding, scaling-factor calibration and the training loop."""

import numpy as np
import pytest
import torch

from mimicmotion.components import tiny_components
from mimicmotion.data import stick_figure_videos
from mimicmotion.pipeline import MimicMotionPipeline
from mimicmotion.trainer import calibrate_scaling_factor, encode_clips, fit, region_errors


def test_clips_are_deterministic_and_hands_are_drawn_at_their_keypoints():
    a, b = stick_figure_videos(2, 6, 64, seed=3), stick_figure_videos(2, 6, 64, seed=3)
    assert all(np.array_equal(x.frames, y.frames) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0].frames, stick_figure_videos(1, 6, 64, seed=4)[0].frames)
    clip = a[0]
    assert clip.frames.shape == (6, 64, 64, 3) and clip.frames.dtype == np.uint8
    assert len(clip.poses) == 6
    background = clip.frames[0, 0, 0]
    tips = clip.poses.hands[:, :, 2::4]  # the second joint of each finger (inside the line)
    x = np.clip((tips[..., 0] * 64).astype(int), 0, 63)
    y = np.clip((tips[..., 1] * 64).astype(int), 0, 63)
    on_figure = [
        (clip.frames[f, y[f, h, k], x[f, h, k]] != background).any()
        for f in range(6)
        for h in range(2)
        for k in range(5)
    ]
    assert np.mean(on_figure) > 0.9
    motion = np.abs(np.diff(clip.poses.body, axis=0)).max()
    assert 0 < motion < 0.1  # smooth motion: keypoints move, by less than 10 % per frame
    with pytest.raises(ValueError, match="size must be a multiple of 8"):
        stick_figure_videos(1, 4, 60)


@pytest.fixture(scope="module")
def trained():
    pipe = MimicMotionPipeline(**tiny_components(0))
    clips = stick_figure_videos(4, 8, 32, seed=0)
    calibrate_scaling_factor(pipe, clips)
    data = encode_clips(pipe, clips)
    before = region_errors(pipe, data, window=4)
    losses = fit(pipe, data, steps=40, window=4, batch_size=2, lr=1e-3, seed=0)
    return pipe, data, before, losses


def test_calibration_gives_unit_variance_latents_and_masks_are_nested(trained):
    _, data, _, _ = trained
    assert data.latents.shape == (4, 8, 4, 4, 4)
    assert data.poses.shape == (4, 8, 3, 32, 32) and data.embeds.shape == (4, 1, 32)
    torch.testing.assert_close(data.latents.std(), torch.tensor(1.0), atol=1e-4, rtol=0)
    assert set(data.mask.unique().tolist()) <= {0.0, 1.0}
    assert bool((data.hand_mask <= data.mask).all())


def test_fit_lowers_the_denoising_error(trained):
    pipe, data, before, losses = trained
    after = region_errors(pipe, data, window=4)
    assert all(np.isfinite(losses)) and len(losses) == 40
    assert after["all"] < 0.8 * before["all"]  # 40 steps on 4 clips: at least 20 % lower
    assert not pipe.unet.training and not pipe.pose_net.training


def test_fit_rejects_bad_arguments(trained):
    pipe, data, _, _ = trained
    with pytest.raises(ValueError, match="window"):
        fit(pipe, data, steps=1, window=9)
    with pytest.raises(ValueError, match="steps"):
        fit(pipe, data, steps=0)
    with pytest.raises(ValueError, match="clips"):
        encode_clips(pipe, [])
