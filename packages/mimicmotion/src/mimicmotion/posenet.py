"""PoseNet: the pose-image encoder added to the UNet's first feature map."""

from __future__ import annotations

import torch
from diffusers.configuration_utils import ConfigMixin, register_to_config
from diffusers.models.modeling_utils import ModelMixin
from torch import nn


class PoseNet(ModelMixin, ConfigMixin):
    """Per-frame conv encoder of rendered pose images, downsampling x8 to the latent grid.

    Conv stack ``3 -> 3 (k3) -> 16 (k4 s2) -> 16 (k3) -> 32 (k4 s2) -> 32 (k3) -> 64 (k4 s2)
    -> 64 (k3) -> 128 (k3)``, SiLU after each, then a zero-initialised 1x1 projection to
    ``out_channels`` (the UNet's ``block_out_channels[0]``), times a learnable scale
    (initialised at 2). At initialisation the output is exactly zero, so a pose-guided UNet
    starts as the plain image-to-video model.

    Parameters
    ----------
    out_channels : int
        Channels of the UNet's first feature map (320 for SVD).
    in_channels : int
        Channels of the pose images (3).

    Shapes: ``(N, in_channels, H, W) -> (N, out_channels, H / 8, W / 8)``; H and W must be
    multiples of 8.
    """

    @register_to_config
    def __init__(self, out_channels: int = 320, in_channels: int = 3):
        super().__init__()
        spec = [
            (in_channels, 3, 3, 1),
            (3, 16, 4, 2),
            (16, 16, 3, 1),
            (16, 32, 4, 2),
            (32, 32, 3, 1),
            (32, 64, 4, 2),
            (64, 64, 3, 1),
            (64, 128, 3, 1),
        ]
        layers: list[nn.Module] = []
        for c_in, c_out, k, stride in spec:
            conv = nn.Conv2d(c_in, c_out, k, stride=stride, padding=1)
            nn.init.kaiming_normal_(conv.weight)
            nn.init.zeros_(conv.bias)
            layers += [conv, nn.SiLU()]
        self.conv_layers = nn.Sequential(*layers)
        self.final_proj = nn.Conv2d(128, out_channels, kernel_size=1)
        nn.init.zeros_(self.final_proj.weight)
        nn.init.zeros_(self.final_proj.bias)
        self.scale = nn.Parameter(torch.full((1,), 2.0))  # shape (1,) as in the official checkpoint

    def forward(self, pose: torch.Tensor) -> torch.Tensor:
        if pose.ndim != 4 or pose.shape[-1] % 8 or pose.shape[-2] % 8:
            raise ValueError(
                f"pose must be (N, C, H, W) with H and W multiples of 8, got {tuple(pose.shape)}"
            )
        return self.final_proj(self.conv_layers(pose)) * self.scale
