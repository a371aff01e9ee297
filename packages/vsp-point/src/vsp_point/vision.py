"""Vision semantic prompts: a frozen 2-D ViT reads the cloud's three depth maps.

Any transformers vision encoder whose hidden states carry a class token first works
(``CLIPVisionModel``, ``Dinov2Model``, ``ViTModel``, or a local checkpoint of one). Each
view is its own image (views attend only within themselves); per 2-D layer the class
tokens are max-pooled over the three views, and one MLP shared by all layers maps them to
the semantic prompts :math:`i_{pro}` of the 3-D layers.
"""

from __future__ import annotations

import torch
from torch import nn

from icml25_core import check_scalar

from .projection import depth_maps

__all__ = ["SemanticPrompter", "layer_map"]


def layer_map(depth3d: int, depth2d: int) -> list[int]:
    """Which 2-D layer feeds each 3-D layer: ``j(i) = ceil((i + 1) * L2 / L3) - 1``.

    Equal depths map layer to layer (the paper's ViT-B with a 12-block Point-MAE); otherwise
    the 3-D layers are spread evenly over the 2-D ones, the last onto the last.
    """
    return [max(0, -(-(i + 1) * depth2d // depth3d) - 1) for i in range(depth3d)]


class SemanticPrompter(nn.Module):
    """The 2-D side of VSP: depth maps -> frozen ViT -> per-layer semantic prompts.

    Parameters
    ----------
    vision_model : transformers.PreTrainedModel
        A vision encoder returning ``hidden_states`` of shape (B, 1 + patches, D) with the
        class token first. Frozen here (``requires_grad_(False)``, kept in eval mode).
    depth3d : int
        L3, the 3-D backbone's depth.
    prompt_dim : int
        P, the prompts' width (the paper: the 3-D width C).
    hidden : int
        Hidden width of the shared MLP ``Linear(D, hidden) -> GELU -> Linear(hidden, P)``.
    image_mean, image_std : float
        Normalisation of the depth images (one value for every channel; CLIP's
        processor uses about 0.48 / 0.27, DINOv2's 0.45 / 0.23).
    tune_position_embedding : bool
        Train the 2-D model's position embedding (the paper does; backpropagating through
        the 2-D model costs a backward pass through it). Default False: the 2-D pass runs
        once without gradients.
    """

    def __init__(
        self,
        vision_model: nn.Module,
        depth3d: int,
        prompt_dim: int,
        *,
        hidden: int = 128,
        image_mean: float = 0.5,
        image_std: float = 0.5,
        tune_position_embedding: bool = False,
    ) -> None:
        super().__init__()
        cfg = getattr(vision_model, "config", None)
        for attr in ("hidden_size", "num_hidden_layers", "image_size"):
            if not hasattr(cfg, attr):
                raise TypeError(
                    f"model2d (vision_model) must be a transformers vision encoder with "
                    f"config.{attr} (CLIPVisionModel, Dinov2Model, ViTModel), got "
                    f"{type(vision_model).__name__}"
                )
        check_scalar(hidden, "prompt_hidden", low=1, integer=True)
        check_scalar(image_std, "image_std", low=0, low_inclusive=False)
        self.vision_model = vision_model.eval().requires_grad_(False)
        self.tune_position_embedding = tune_position_embedding
        if tune_position_embedding:
            found = [p for n, p in vision_model.named_parameters() if "position_embedding" in n]
            if not found:
                raise ValueError(f"{type(vision_model).__name__} has no position embedding")
            for p in found:
                p.requires_grad_(True)
        self.image_size = int(cfg.image_size)
        self.channels = int(getattr(cfg, "num_channels", 3))
        self.image_mean, self.image_std = float(image_mean), float(image_std)
        self.layers = layer_map(depth3d, int(cfg.num_hidden_layers))
        self.mlp = nn.Sequential(
            nn.Linear(int(cfg.hidden_size), hidden), nn.GELU(), nn.Linear(hidden, prompt_dim)
        )

    def train(self, mode: bool = True) -> SemanticPrompter:
        super().train(mode)
        self.vision_model.eval()  # frozen: no dropout, fixed statistics
        return self

    def class_tokens(self, maps: torch.Tensor) -> torch.Tensor:
        """Max over views of the 2-D class tokens at each mapped layer.

        Parameters
        ----------
        maps : Tensor, shape (B, V, H, W)
            V depth maps per cloud (:func:`~vsp_point.depth_maps`: V = 3, H = W =
            ``image_size``).

        Returns
        -------
        Tensor, shape (B, L3, D)
        """
        b, v, hgt, wid = maps.shape
        images = maps.reshape(b * v, 1, hgt, wid)
        images = (images.expand(-1, self.channels, -1, -1) - self.image_mean) / self.image_std
        dtype = next(self.vision_model.parameters()).dtype
        with torch.set_grad_enabled(torch.is_grad_enabled() and self.tune_position_embedding):
            out = self.vision_model(pixel_values=images.to(dtype), output_hidden_states=True)
            cls = torch.stack([out.hidden_states[j + 1][:, 0] for j in self.layers], dim=1)
        return cls.reshape(b, v, len(self.layers), -1).amax(dim=1).to(maps.dtype)

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        """Semantic prompts ``(B, L3, P)`` of a batch of clouds ``(B, N, 3)``."""
        return self.mlp(self.class_tokens(depth_maps(points, self.image_size)))
