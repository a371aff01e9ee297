"""Adapters from a CLIP model and a teacher to "images -> embeddings" callables.

Supported CLIP models:

- transformers ``CLIPModel`` (any model with ``vision_model`` and ``visual_projection``):
  the trained image tower is ``vision_model`` + ``visual_projection``; its embedding is
  what ``get_image_features(pixel_values)`` gives, not L2-normalized, as the official code
  trains it;
- transformers ``CLIPVisionModelWithProjection`` (``image_embeds``), without a text tower;
- open_clip models (an attribute ``visual`` and ``encode_image(x, normalize=False)``), the
  layout the official code uses: the trained tower is ``visual``.

A teacher is any callable ``images -> (n, d_t)`` tensor; a transformers model (e.g.
``Dinov2Model``) gives its ``pooler_output`` (DINOv2: the final layer-normed CLS token,
what ``torch.hub``'s DINOv2 returns).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

__all__ = ["ImageTower", "as_images", "as_teacher", "image_tower", "parameters_digest"]


def _embedding(out) -> Tensor:
    """A tensor from a model output (a tensor, or an output with an embedding field)."""
    if isinstance(out, Tensor):
        return out
    for field in ("image_embeds", "text_embeds", "pooler_output"):
        value = getattr(out, field, None)
        if isinstance(value, Tensor):
            return value
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], Tensor):
        return out[0]
    raise TypeError(f"cannot read an embedding tensor from a {type(out).__name__}")


def as_images(images: Any, name: str = "images") -> Any:
    """A NumPy array of images as a tensor (a tensor or a dataset is returned as it is);
    the pixel values are checked by :meth:`ImageTower.check_images`."""
    if isinstance(images, np.ndarray):
        if images.dtype.kind not in "f":
            raise TypeError(
                f"{name} must be float pixel values (what the model's image processor "
                f"returns, normalized), got dtype {images.dtype}; run the processor first"
            )
        return torch.from_numpy(images)
    return images


def _transformers_forward(tower: nn.Module, x: Tensor) -> Tensor:
    # what CLIPModel.get_image_features computes, from the tower's own modules
    pooled = tower["vision_model"](pixel_values=x).pooler_output
    return tower["visual_projection"](pooled)


def _open_clip_forward(tower: nn.Module, x: Tensor) -> Tensor:
    return _embedding(tower(x))


@dataclass
class ImageTower:
    """The trained part of a CLIP model and how to embed images with it.

    Attributes
    ----------
    model : nn.Module
        The whole CLIP model.
    trainable : nn.Module
        The image tower (its parameters are the only ones ``align`` updates).
    image_size : int or None
        The square input size the tower expects (checked on every batch), where known.
    channels : int or None
        Input channels, where known.
    """

    model: nn.Module
    trainable: nn.Module
    image_size: int | None
    channels: int | None
    forward: Callable[[nn.Module, Tensor], Tensor]

    def check_images(self, x: Tensor, name: str = "images") -> None:
        """Raise a ``ValueError`` naming ``name`` unless ``x`` is a finite (n, C, H, W)
        batch of the size the tower expects."""
        if isinstance(x, Tensor) and not x.is_floating_point():
            raise TypeError(
                f"{name} must be float pixel values (what the model's image processor returns, "
                f"normalized), got dtype {x.dtype}; run the processor on raw images first"
            )
        if not isinstance(x, Tensor) or x.ndim != 4:
            shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"{name} must be a (n, channels, height, width) tensor, got {shape}")
        if x.shape[0] == 0:
            raise ValueError(f"{name} is empty: at least one image is needed")
        if self.channels is not None and x.shape[1] != self.channels:
            raise ValueError(
                f"{name} has {x.shape[1]} channels; the CLIP image tower expects {self.channels}"
            )
        if self.image_size is not None and tuple(x.shape[2:]) != (self.image_size,) * 2:
            raise ValueError(
                f"{name} are {x.shape[2]}x{x.shape[3]}; the CLIP image tower expects "
                f"{self.image_size}x{self.image_size} (resize them with the model's processor)"
            )
        if not bool(torch.isfinite(x).all()):
            raise ValueError(f"{name} contain NaN or infinite values")

    def encode(self, x: Tensor, tower: nn.Module | None = None) -> Tensor:
        """Embeddings (n, d) of pixel values ``x`` (n, C, H, W), not normalized, by the
        model's image tower (or by ``tower``, a copy of it), in the tower's dtype."""
        tower = self.trainable if tower is None else tower
        dtype = next((p.dtype for p in tower.parameters() if p.is_floating_point()), x.dtype)
        return self.forward(tower, x.to(dtype))

    def frozen_parameters(self) -> Iterator[tuple[str, nn.Parameter]]:
        """The model's parameters outside the image tower (the text tower, logit scale)."""
        mine = {id(p) for p in self.trainable.parameters()}
        for name, p in self.model.named_parameters():
            if id(p) not in mine:
                yield name, p


def image_tower(model: nn.Module) -> ImageTower:
    """The :class:`ImageTower` of a transformers or open_clip CLIP model."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"clip_model must be a torch.nn.Module, got {type(model).__name__}")
    config = getattr(model, "config", None)
    vision_config = getattr(config, "vision_config", config)
    size = getattr(vision_config, "image_size", None)
    channels = getattr(vision_config, "num_channels", None)
    if hasattr(model, "vision_model") and hasattr(model, "visual_projection"):
        trainable = nn.ModuleDict(
            {"vision_model": model.vision_model, "visual_projection": model.visual_projection}
        )
        return ImageTower(model, trainable, size, channels, _transformers_forward)
    if hasattr(model, "visual") and hasattr(model, "encode_image"):  # open_clip
        size = getattr(model.visual, "image_size", None)
        if isinstance(size, (tuple, list)):
            size = size[0] if len(set(size)) == 1 else None
        return ImageTower(model, model.visual, size, None, _open_clip_forward)
    raise TypeError(
        f"clip_model must be a transformers CLIPModel / CLIPVisionModelWithProjection or an "
        f"open_clip model (with .visual and .encode_image), got {type(model).__name__}"
    )


def as_teacher(teacher: Callable) -> Callable[[Tensor], Tensor]:
    """An "images -> (n, d_t) features" callable from a teacher model or function.

    A transformers model is called with ``pixel_values=`` and gives its ``pooler_output``;
    any other callable is called on the images and must return a tensor (or an output
    object with ``pooler_output``).
    """
    if not callable(teacher):
        raise TypeError(f"teacher must be callable, got {type(teacher).__name__}")
    takes_pixels = hasattr(teacher, "config") and hasattr(teacher, "main_input_name")

    def features(x: Tensor) -> Tensor:
        out = teacher(pixel_values=x) if takes_pixels else teacher(x)
        return _embedding(out)

    return features


def parameters_digest(named: Iterator[tuple[str, Tensor]]) -> str:
    """SHA-256 over the names and exact bytes of tensors (a bitwise fingerprint)."""
    h = hashlib.sha256()
    for name, p in named:
        t = p.detach().contiguous().cpu()
        h.update(name.encode())
        h.update(str(t.dtype).encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()
