"""Tiny random components of the SVD architecture (diffusers' own test sizes), built
locally: for tests, the CPU experiment and the benchmark. Nothing is downloaded."""

from __future__ import annotations

import torch
from diffusers import AutoencoderKLTemporalDecoder, EulerDiscreteScheduler
from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

try:  # transformers >= 5: the PIL backend by name (the default one needs torchvision)
    from transformers import CLIPImageProcessorPil as CLIPProcessor
except ImportError:  # transformers 4: PIL is the only backend
    from transformers import CLIPImageProcessor as CLIPProcessor

from .posenet import PoseNet
from .unet import MimicMotionUNet

TINY_UNET = {
    "block_out_channels": (32, 64),
    "down_block_types": ("CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"),
    "up_block_types": ("UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"),
    "cross_attention_dim": 32,
    "num_attention_heads": 8,
    "out_channels": 4,
    "in_channels": 8,
    "layers_per_block": 2,
    "sample_size": 32,
    "projection_class_embeddings_input_dim": 96,
    "addition_time_embed_dim": 32,
}


def svd_scheduler() -> EulerDiscreteScheduler:
    """The Euler scheduler configuration Stable Video Diffusion ships with."""
    return EulerDiscreteScheduler(
        beta_schedule="scaled_linear",
        beta_start=0.00085,
        beta_end=0.012,
        interpolation_type="linear",
        num_train_timesteps=1000,
        prediction_type="v_prediction",
        sigma_max=700.0,
        sigma_min=0.002,
        steps_offset=1,
        timestep_spacing="leading",
        timestep_type="continuous",
        use_karras_sigmas=True,
    )


def tiny_components(seed: int = 0) -> dict:
    """``MimicMotionPipeline(**tiny_components())``: a random-weight pipeline for CPUs."""
    torch.manual_seed(seed)
    return {
        "vae": AutoencoderKLTemporalDecoder(
            block_out_channels=[32, 32, 32, 32],
            down_block_types=["DownEncoderBlock2D"] * 4,
            latent_channels=4,
            layers_per_block=1,
        ),
        "image_encoder": CLIPVisionModelWithProjection(
            CLIPVisionConfig(
                hidden_size=32,
                projection_dim=32,
                num_hidden_layers=1,
                num_attention_heads=4,
                image_size=224,
                intermediate_size=37,
                patch_size=14,
            )
        ),
        "unet": MimicMotionUNet(**TINY_UNET),
        "scheduler": svd_scheduler(),
        "feature_extractor": CLIPProcessor(crop_size=224, size=224),
        "pose_net": PoseNet(out_channels=TINY_UNET["block_out_channels"][0]),
    }
