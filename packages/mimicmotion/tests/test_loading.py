"""Save / load round trip and loading SVD + an official-format MimicMotion checkpoint."""

import numpy as np
import pytest
import torch
from diffusers import StableVideoDiffusionPipeline, UNetSpatioTemporalConditionModel

from mimicmotion import MimicMotionPipeline, convert_official_checkpoint, load_mimicmotion

from .conftest import TINY_UNET


def _frames(pipe):
    pipe.set_progress_bar_config(disable=True)
    image = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    poses = np.random.default_rng(0).integers(0, 255, (8, 64, 64, 3), dtype=np.uint8)
    return pipe(
        image,
        poses,
        tile_size=8,
        num_inference_steps=2,
        output_type="np",
        generator=torch.Generator().manual_seed(0),
    ).frames


def test_save_load_round_trip(components, tmp_path):
    with torch.no_grad():
        components["pose_net"].final_proj.weight.normal_()  # make pose guidance matter
    pipe = MimicMotionPipeline(**components)
    pipe.save_pretrained(tmp_path / "pipe")
    loaded = MimicMotionPipeline.from_pretrained(tmp_path / "pipe")
    np.testing.assert_allclose(
        _frames(pipe), _frames(loaded), rtol=0, atol=1e-4
    )  # float32 round-off only


def test_load_svd_folder_and_official_checkpoint(components, tmp_path):
    plain = UNetSpatioTemporalConditionModel(**TINY_UNET)
    plain.load_state_dict(components["unet"].state_dict())
    svd = StableVideoDiffusionPipeline(
        components["vae"],
        components["image_encoder"],
        plain,
        components["scheduler"],
        components["feature_extractor"],
    )
    svd.save_pretrained(tmp_path / "svd")
    torch.manual_seed(5)
    trained_unet = UNetSpatioTemporalConditionModel(**TINY_UNET)
    pose_net = components["pose_net"]
    with torch.no_grad():
        pose_net.final_proj.weight.normal_()
    official = {f"unet.{k}": v for k, v in trained_unet.state_dict().items()}
    official |= {f"pose_net.{k}": v for k, v in pose_net.state_dict().items()}
    official["vae.encoder.conv_in.weight"] = torch.zeros(1)  # ignored extra keys
    torch.save(official, tmp_path / "MimicMotion.pth")
    pipe = load_mimicmotion(tmp_path / "svd", tmp_path / "MimicMotion.pth")
    for k, v in trained_unet.state_dict().items():
        assert torch.equal(pipe.unet.state_dict()[k], v)
    assert torch.equal(pipe.pose_net.final_proj.weight, pose_net.final_proj.weight)
    reference = MimicMotionPipeline(**{**components, "unet": pipe.unet, "pose_net": pose_net})
    np.testing.assert_allclose(
        _frames(pipe), _frames(reference), rtol=0, atol=1e-4
    )  # float32 round-off only
    with pytest.raises(ValueError, match="pose_net"):
        convert_official_checkpoint({"unet.conv_in.weight": torch.zeros(1)})
    with pytest.raises(FileNotFoundError, match="mimicmotion_checkpoint not found"):
        load_mimicmotion(tmp_path / "svd", tmp_path / "missing.pth")
    # a mistyped local folder is an error naming it, not a Hub lookup
    with pytest.raises(FileNotFoundError, match=r"svd_path .*svd-typo.* not a local"):
        load_mimicmotion(tmp_path / "svd-typo", tmp_path / "MimicMotion.pth")


def test_components_need_no_torchvision_and_say_nothing():
    # transformers >= 5 warns (once per process) when CLIPImageProcessor falls back to its
    # PIL backend because torchvision is missing; the package asks for that backend by name
    import subprocess
    import sys

    code = "from mimicmotion.components import tiny_components; tiny_components(0)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "requires torchvision" not in proc.stderr


class _Evil:
    pass


def test_corrupt_or_foreign_checkpoints_are_named(tmp_path):
    from mimicmotion.convert import read_checkpoint

    (tmp_path / "garbage.pth").write_bytes(b"not a checkpoint")
    (tmp_path / "garbage.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{bad")
    torch.save([torch.zeros(2)], tmp_path / "list.pth")
    torch.save(_Evil(), tmp_path / "evil.pth")
    cases = [
        ("garbage.pth", "garbage.pth is not a readable torch checkpoint"),
        ("garbage.safetensors", "garbage.safetensors is not a readable safetensors file"),
        ("list.pth", r"list.pth does not hold a state dict \(names -> tensors\)"),
        ("evil.pth", "evil.pth holds objects beyond tensors; refusing to unpickle"),
    ]
    for name, match in cases:
        with pytest.raises(ValueError, match=match):
            read_checkpoint(tmp_path / name)
