"""MimicMotionPipeline on tiny random components."""

import numpy as np
import pytest
import torch
from diffusers import StableVideoDiffusionPipeline, UNetSpatioTemporalConditionModel

from mimicmotion.fusion import windows
from mimicmotion.pipeline import MimicMotionPipeline

from .conftest import TINY_UNET


@pytest.fixture
def inputs():
    rng = np.random.default_rng(0)
    image = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    poses = rng.integers(0, 255, (12, 64, 64, 3), dtype=np.uint8)
    return image, poses


def _run(pipe, image, poses, **kw):
    kw = {"num_inference_steps": 2, "output_type": "np", **kw}
    return pipe(image, poses, generator=torch.Generator().manual_seed(0), **kw).frames


def test_output_shape_and_determinism(components, inputs):
    pipe = MimicMotionPipeline(**components)
    pipe.set_progress_bar_config(disable=True)
    a = _run(pipe, *inputs, tile_size=8, tile_overlap=2)
    b = _run(pipe, *inputs, tile_size=8, tile_overlap=2)
    assert np.asarray(a).shape == (1, 12, 64, 64, 3)
    np.testing.assert_array_equal(a, b)


def test_at_init_one_window_without_guidance_equals_plain_svd(components, inputs):
    """PoseNet outputs zero at init, so with one window and no guidance the pipeline is
    Stable Video Diffusion with the same weights, noise and conditioning."""
    pipe = MimicMotionPipeline(**components)
    pipe.set_progress_bar_config(disable=True)
    plain_unet = UNetSpatioTemporalConditionModel(**TINY_UNET)
    plain_unet.load_state_dict(components["unet"].state_dict())
    svd = StableVideoDiffusionPipeline(
        components["vae"],
        components["image_encoder"],
        plain_unet,
        components["scheduler"],
        components["feature_extractor"],
    )
    svd.set_progress_bar_config(disable=True)
    image, poses = inputs
    ours = _run(pipe, image, poses, tile_size=12, tile_overlap=1, guidance_scale=1.0)
    pil = pipe.video_processor.numpy_to_pil(pipe.video_processor.pt_to_numpy(image))[0]
    theirs = svd(
        pil,
        height=64,
        width=64,
        num_frames=12,
        num_inference_steps=2,
        min_guidance_scale=1.0,
        max_guidance_scale=1.0,
        output_type="np",
        generator=torch.Generator().manual_seed(0),
        decode_chunk_size=8,
    ).frames
    np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_callback_sees_and_can_replace_latents(components, inputs):
    pipe = MimicMotionPipeline(**components)
    pipe.set_progress_bar_config(disable=True)
    seen = []

    def callback(p, step, t, tensors):
        seen.append(step)
        return {"latents": torch.zeros_like(tensors["latents"])}

    latents = _run(
        pipe,
        *inputs,
        tile_size=8,
        tile_overlap=2,
        output_type="latent",
        callback_on_step_end=callback,
    )
    assert seen == [0, 1]
    assert torch.count_nonzero(latents) == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_frames": 10}, "num_frames"),
        ({"tile_size": 8, "tile_overlap": 8}, "tile_overlap"),
        ({"output_type": "gif", "tile_size": 8}, "output_type"),
    ],
)
def test_bad_input(components, inputs, kwargs, message):
    pipe = MimicMotionPipeline(**components)
    with pytest.raises(ValueError, match=message):
        _run(pipe, *inputs, **kwargs)
    with pytest.raises(ValueError, match="divisible"):
        _run(pipe, inputs[0], inputs[1][:, :60], tile_size=8)


def test_unet_and_posenet_only_ever_see_one_window(components):
    """The long-video claim's mechanism: the per-call working set is O(tile), not O(F)."""
    pipe = MimicMotionPipeline(**components)
    pipe.set_progress_bar_config(disable=True)
    seen = {"unet": [], "pose_net": []}
    pipe.unet.register_forward_pre_hook(lambda m, a: seen["unet"].append(a[0].shape[:2]))
    pipe.pose_net.register_forward_pre_hook(lambda m, a: seen["pose_net"].append(a[0].shape[0]))
    rng = np.random.default_rng(0)
    poses = rng.integers(0, 255, (40, 32, 32, 3), dtype=np.uint8)
    image = torch.rand(1, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    latents = pipe(
        image,
        poses,
        tile_size=8,
        tile_overlap=2,
        num_inference_steps=2,
        output_type="latent",
        generator=torch.Generator().manual_seed(0),
    ).frames
    assert latents.shape == (1, 40, 4, 4, 4)
    n_windows = len(windows(40, 8, 2))  # 7
    assert set(seen["unet"]) == {(2, 8)}  # (uncond + cond) x one window of 8 frames
    assert len(seen["unet"]) == 2 * n_windows
    assert set(seen["pose_net"]) == {8} and len(seen["pose_net"]) == 2 * n_windows


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"num_inference_steps": 0}, ValueError, "num_inference_steps must be >= 1"),
        ({"decode_chunk_size": 0}, ValueError, "decode_chunk_size must be >= 1"),
        ({"tile_size": 8.0}, TypeError, "tile_size must be an integer"),
        ({"guidance_scale": float("nan")}, ValueError, "guidance_scale must be finite"),
        ({"noise_aug_strength": float("nan")}, ValueError, "noise_aug_strength must be finite"),
        ({"noise_aug_strength": -0.1}, ValueError, "noise_aug_strength must be >= 0.0"),
        ({"fps": 0}, ValueError, "fps must be >= 1"),
        ({"generator": 42}, TypeError, "generator must be a torch.Generator"),
    ],
)
def test_meaningless_settings_are_refused_naming_the_argument(
    components, inputs, kwargs, error, message
):
    pipe = MimicMotionPipeline(**components)
    image, poses = inputs
    kw = {"num_inference_steps": 2, "output_type": "np", "tile_size": 8, **kwargs}
    with pytest.raises(error, match=message):
        pipe(image, poses, **kw)


def test_nan_reference_image_and_nan_latents_from_a_callback_are_refused(components, inputs):
    pipe = MimicMotionPipeline(**components)
    pipe.set_progress_bar_config(disable=True)
    image, poses = inputs
    bad = image.clone()
    bad[0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="image must be finite"):
        _run(pipe, bad, poses, tile_size=8)

    def poison(pipe, step, t, state):
        return {"latents": state["latents"] * float("nan")}

    with pytest.raises(ValueError, match="returned at step 0 must be finite"):
        _run(pipe, image, poses, tile_size=8, callback_on_step_end=poison)


def test_a_resolution_that_cannot_fit_is_refused_with_the_estimate(components, inputs, monkeypatch):
    import icml25_core.validation

    pipe = MimicMotionPipeline(**components)
    pipe.set_progress_bar_config(disable=True)
    image, poses = inputs
    # 64x64, 8-frame windows with guidance: the estimate is a few hundred KiB
    monkeypatch.setattr(icml25_core.validation, "available_memory", lambda device="cpu": 2**14)
    with pytest.raises(ValueError, match=r"pose_frames: this request needs at least .* 64x64"):
        pipe(image, poses, num_inference_steps=2, output_type="np", tile_size=8)
    monkeypatch.setattr(icml25_core.validation, "available_memory", lambda device="cpu": 2**40)
    assert _run(pipe, image, poses, tile_size=8).shape[:2] == (1, 12)


def test_references_and_poses_the_pipeline_cannot_use_are_refused(components, inputs):
    from PIL import Image

    pipe = MimicMotionPipeline(**components)
    image, poses = inputs
    floats = torch.from_numpy(poses).permute(0, 3, 1, 2).float() / 127.5 - 1.0
    nan_poses = floats.clone()
    nan_poses[3, 0, 0, 0] = float("nan")
    cases = [
        (image * 255, ValueError, r"image must be in \[0, 1\].*divide by 255"),
        (image.repeat(2, 1, 1, 1), ValueError, r"one RGB image \(1, 3, H, W\)"),
        (image[:, :1], ValueError, r"one RGB image \(1, 3, H, W\)"),
        ("reference.png", TypeError, "image must be a PIL.Image or a"),
        (Image.new("L", (64, 64)), ValueError, "RGB image, got mode 'L'"),
    ]
    for bad, error, match in cases:
        with pytest.raises(error, match=match):
            _run(pipe, bad, poses, tile_size=8)
    for bad, error, match in [
        ((floats + 1) * 127.5, ValueError, r"float pose_frames must be in \[-1, 1\]"),
        (nan_poses, ValueError, "pose_frames must be finite"),
        (poses[:0], ValueError, "pose_frames has no frames"),
    ]:
        with pytest.raises(error, match=match):
            _run(pipe, image, bad, tile_size=8)


def test_spatial_attention_estimate_matches_torch_flop_counter(components):
    """The estimate is the scaled-dot-product attention that torch's FLOP counter sees in one
    UNet pass over one frame, less the cross- and temporal attention (one context token,
    one frame: under 2% here)."""
    from torch.utils.flop_counter import FlopCounterMode

    from mimicmotion.pipeline import spatial_attention_flops

    unet = components["unet"]
    size = 128
    latents = torch.randn(1, 1, 8, size // 8, size // 8)
    pose = torch.zeros(1, 32, size // 8, size // 8)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        unet(
            latents,
            10.0,
            encoder_hidden_states=torch.randn(1, 1, 32),
            added_time_ids=torch.zeros(1, 3),
            pose_latents=pose,
        )
    counted = sum(
        flops
        for op, flops in counter.get_flop_counts()["Global"].items()
        if "scaled_dot_product" in str(op)
    )
    estimate = spatial_attention_flops(unet.config, size, size)
    assert estimate == 5 * 4 * 256**2 * 32 + 4 * 64**2 * 64  # closed form of the tiny UNet
    assert 0.98 * counted <= estimate <= counted


def test_a_grid_far_above_the_training_resolution_warns_with_the_cost(
    components, inputs, monkeypatch
):
    import mimicmotion.pipeline as module

    pipe = MimicMotionPipeline(**components)
    pipe.set_progress_bar_config(disable=True)
    image, poses = inputs
    assert _run(pipe, image, poses, tile_size=8).shape[:2] == (1, 12)  # no warning at 64x64
    monkeypatch.setattr(module, "TRAINED_TOKENS", 8)
    with pytest.warns(
        UserWarning, match=r"64x64 .* TFLOP per window and step.*\(2 windows x 2 steps\)"
    ):
        _run(pipe, image, poses, tile_size=8)
