"""MimicMotionUNet: SVD's spatio-temporal UNet with pose latents added after ``conv_in``."""

from __future__ import annotations

import torch
from diffusers import UNetSpatioTemporalConditionModel

# DiffusionPipeline.from_pretrained resolves a component's loader by looking for base classes
# such as ModelMixin in the module recorded in model_index.json (this one)
from diffusers.models.modeling_utils import ModelMixin  # noqa: F401


class MimicMotionUNet(UNetSpatioTemporalConditionModel):
    """diffusers' ``UNetSpatioTemporalConditionModel`` that adds pose features to the output
    of ``conv_in``: ``h = conv_in(x) + pose_latents``.

    Same parameters as the parent, so ``MimicMotionUNet.from_pretrained(svd_path,
    subfolder="unet")`` loads any SVD UNet checkpoint. ``forward(..., pose_latents=None)``
    with ``pose_latents`` of shape ``(B * F, block_out_channels[0], h, w)`` (PoseNet's
    output for every frame); without it the model is exactly the parent.
    """

    def forward(
        self,
        sample: torch.Tensor,
        timestep,
        encoder_hidden_states: torch.Tensor,
        added_time_ids: torch.Tensor,
        pose_latents: torch.Tensor | None = None,
        return_dict: bool = True,
    ):
        if pose_latents is None:
            return super().forward(
                sample, timestep, encoder_hidden_states, added_time_ids, return_dict=return_dict
            )

        def add_pose(module, inputs, output):
            if pose_latents.shape != output.shape:
                raise ValueError(
                    f"pose_latents must have shape {tuple(output.shape)} (batch*frames, "
                    f"block_out_channels[0], h, w), got {tuple(pose_latents.shape)}"
                )
            return output + pose_latents.to(output.dtype)

        handle = self.conv_in.register_forward_hook(add_pose)
        try:
            return super().forward(
                sample, timestep, encoder_hidden_states, added_time_ids, return_dict=return_dict
            )
        finally:
            handle.remove()
