"""Loading real weights: SVD + the official MimicMotion checkpoint."""

from __future__ import annotations

import pickle
from pathlib import Path

import torch
from diffusers import AutoencoderKLTemporalDecoder, EulerDiscreteScheduler
from safetensors import SafetensorError
from safetensors.torch import load_file
from transformers import CLIPVisionModelWithProjection

from .components import CLIPProcessor
from .pipeline import MimicMotionPipeline
from .posenet import PoseNet
from .unet import MimicMotionUNet


def convert_official_checkpoint(
    state_dict: dict[str, torch.Tensor],
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Split the official MimicMotion state dict into UNet and PoseNet state dicts.

    The official checkpoint (``MimicMotion_1-1.pth``) holds the whole wrapper model: keys
    ``unet.*`` and ``pose_net.*`` (plus, in some versions, ``vae.*`` / ``image_encoder.*``
    that equal SVD's and are ignored here). Parameter names under those prefixes match
    :class:`MimicMotionUNet` (diffusers' SVD UNet) and :class:`PoseNet`.
    """
    unet = {k.removeprefix("unet."): v for k, v in state_dict.items() if k.startswith("unet.")}
    pose = {
        k.removeprefix("pose_net."): v for k, v in state_dict.items() if k.startswith("pose_net.")
    }
    if not pose:
        raise ValueError(
            "state_dict has no 'pose_net.*' keys: not a MimicMotion checkpoint "
            f"(first keys: {list(state_dict)[:5]})"
        )
    return unet, pose


def read_checkpoint(path: str | Path) -> dict[str, torch.Tensor]:
    """A ``.safetensors`` file, or a ``.pth``/``.pt``/``.ckpt`` read with ``weights_only=True``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    if path.suffix == ".safetensors":
        try:
            return load_file(path)
        except (SafetensorError, OSError) as err:
            raise ValueError(f"{path} is not a readable safetensors file: {err}") from None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        if "global" in str(err).lower():
            raise ValueError(
                f"{path} holds objects beyond tensors; refusing to unpickle it (never done "
                "for checkpoints): convert it to safetensors in a trusted session"
            ) from None
        raise ValueError(f"{path} is not a readable torch checkpoint: {err}") from None
    except (RuntimeError, EOFError, OSError) as err:  # truncated, not a zip archive
        raise ValueError(f"{path} is not a readable torch checkpoint: {err}") from None
    state = state.get("state_dict", state) if isinstance(state, dict) else state
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
    ):
        raise ValueError(f"{path} does not hold a state dict (names -> tensors)")
    return state


def load_mimicmotion(
    svd_path: str | Path,
    mimicmotion_checkpoint: str | Path,
    torch_dtype: torch.dtype = torch.float32,
) -> MimicMotionPipeline:
    """Build the pipeline from a local Stable Video Diffusion folder (diffusers layout, e.g.
    ``stable-video-diffusion-img2vid-xt-1-1``) and the official MimicMotion checkpoint.

    The UNet and PoseNet weights of the checkpoint are loaded over SVD's (the UNet with
    ``strict=False``, as upstream: the checkpoint may omit unchanged tensors).
    """
    svd_path = Path(svd_path)
    if not (svd_path / "unet").is_dir():
        raise FileNotFoundError(
            f"svd_path {str(svd_path)!r} is not a local Stable Video Diffusion folder (no 'unet' "
            "subfolder); download one first, e.g. huggingface_hub.snapshot_download("
            "'stabilityai/stable-video-diffusion-img2vid-xt-1-1')"
        )
    if not Path(mimicmotion_checkpoint).is_file():
        raise FileNotFoundError(f"mimicmotion_checkpoint not found: {mimicmotion_checkpoint}")
    kw = {"torch_dtype": torch_dtype}
    unet = MimicMotionUNet.from_pretrained(svd_path, subfolder="unet", **kw)
    unet_sd, pose_sd = convert_official_checkpoint(read_checkpoint(mimicmotion_checkpoint))
    _missing, unexpected = unet.load_state_dict(unet_sd, strict=False)
    if unexpected:
        raise ValueError(f"checkpoint has UNet keys the SVD UNet lacks: {unexpected[:5]}")
    pose_net = PoseNet(out_channels=unet.config.block_out_channels[0])
    pose_net.load_state_dict(pose_sd)
    return MimicMotionPipeline(
        vae=AutoencoderKLTemporalDecoder.from_pretrained(svd_path, subfolder="vae", **kw),
        image_encoder=CLIPVisionModelWithProjection.from_pretrained(
            svd_path, subfolder="image_encoder", **kw
        ),
        unet=unet,
        scheduler=EulerDiscreteScheduler.from_pretrained(svd_path, subfolder="scheduler"),
        feature_extractor=CLIPProcessor.from_pretrained(svd_path, subfolder="feature_extractor"),
        pose_net=pose_net.to(torch_dtype),
    )
