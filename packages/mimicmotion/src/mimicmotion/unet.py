"""MimicMotionUNet: SVD's spatio-temporal UNet with pose latents added after ``conv_in``."""

from __future__ import annotations

import torch
from diffusers import UNetSpatioTemporalConditionModel


class MimicMotionUNet(UNetSpatioTemporalConditionModel):
    """diffusers' ``UNetSpatioTemporalConditionModel`` that adds pose features to the output
    of ``conv_in``: ``h = conv_in(x) + pose_latents``.

    Same parameters as the parent, so ``MimicMotionUNet.from_pretrained(svd_path,
    subfolder="unet")`` loads any SVD UNet checkpoint. ``forward(..., pose_latents=None)``
    with ``pose_latents`` of shape ``(B * F, block_out_channels[0], h, w)`` (PoseNet's
    output for every frame); without it the model is exactly the parent.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._pose_latents: torch.Tensor | None = None
        self.conv_in.register_forward_hook(self._add_pose)

    def _add_pose(self, module, inputs, output):
        if self._pose_latents is None:
            return output
        if self._pose_latents.shape != output.shape:
            raise ValueError(
                f"pose_latents must have shape {tuple(output.shape)} (batch*frames, "
                f"block_out_channels[0], h, w), got {tuple(self._pose_latents.shape)}"
            )
        return output + self._pose_latents.to(output.dtype)

    def forward(
        self,
        sample: torch.Tensor,
        timestep,
        encoder_hidden_states: torch.Tensor,
        added_time_ids: torch.Tensor,
        pose_latents: torch.Tensor | None = None,
        return_dict: bool = True,
    ):
        self._pose_latents = pose_latents
        try:
            return super().forward(
                sample, timestep, encoder_hidden_states, added_time_ids, return_dict=return_dict
            )
        finally:
            self._pose_latents = None
