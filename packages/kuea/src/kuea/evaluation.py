"""Evaluation of a (re-aligned) CLIP model: zero-shot classification with its frozen text
tower, a linear probe on its image embeddings, and image-text retrieval R@1."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor, nn

from icml25_core import check_labels, check_scalar

from .towers import _embedding, as_images, image_tower

__all__ = [
    "image_embeddings",
    "linear_probe",
    "retrieval_recall_at_1",
    "text_embeddings",
    "zero_shot_accuracy",
]


@torch.no_grad()
def image_embeddings(
    clip_model: nn.Module, images: Tensor, *, batch_size: int = 256, normalize: bool = False
) -> Tensor:
    """Image embeddings (n, d) of ``images`` (n, C, H, W) by the model's image tower, on the
    model's device (returned on the CPU)."""
    check_scalar(batch_size, "batch_size", low=1, integer=True)
    tower = image_tower(clip_model)
    images = as_images(images)
    tower.check_images(images)
    device = next(clip_model.parameters()).device
    was = tower.trainable.training
    tower.trainable.eval()
    try:
        out = torch.cat(
            [
                tower.encode(images[i : i + batch_size].to(device)).float().cpu()
                for i in range(0, len(images), batch_size)
            ]
        )
    finally:
        tower.trainable.train(was)
    return torch.nn.functional.normalize(out, dim=-1) if normalize else out


@torch.no_grad()
def text_embeddings(
    clip_model: nn.Module, tokens: Mapping[str, Tensor] | Tensor, *, normalize: bool = True
) -> Tensor:
    """Text embeddings (m, d) by the model's text tower.

    ``tokens`` is a transformers tokenizer's output (``input_ids``, ``attention_mask``)
    for a ``CLIPModel``, or a token tensor for an open_clip model.
    """
    device = next(clip_model.parameters()).device
    if hasattr(clip_model, "get_text_features"):
        if isinstance(tokens, Tensor):
            tokens = {"input_ids": tokens}
        out = clip_model.get_text_features(**{k: v.to(device) for k, v in tokens.items()})
    elif hasattr(clip_model, "encode_text"):
        out = clip_model.encode_text(tokens.to(device), normalize=False)
    else:
        raise TypeError(f"{type(clip_model).__name__} has no text tower")
    out = _embedding(out).float().cpu()
    return torch.nn.functional.normalize(out, dim=-1) if normalize else out


def _labels(labels, n: int, name: str = "labels") -> np.ndarray:
    return check_labels(
        labels.cpu().numpy() if isinstance(labels, Tensor) else labels, name, n_samples=n
    )


def zero_shot_accuracy(
    clip_model: nn.Module,
    images: Tensor,
    labels,
    class_tokens: Mapping[str, Tensor] | Tensor,
    *,
    batch_size: int = 256,
) -> float:
    """Zero-shot accuracy: each image gets the class whose prompt embedding (row ``c`` of
    ``class_tokens``) has the largest cosine similarity with the image's embedding."""
    y = _labels(labels, len(images))
    img = image_embeddings(clip_model, images, batch_size=batch_size, normalize=True)
    txt = text_embeddings(clip_model, class_tokens)
    if y.max(initial=0) >= len(txt) or y.min(initial=0) < 0:
        raise ValueError(f"labels must lie in [0, {len(txt) - 1}] (one prompt per class)")
    pred = (img @ txt.T).argmax(dim=1).numpy()
    return float((pred == y).mean())


def linear_probe(
    train_features,
    train_labels,
    test_features,
    test_labels,
    *,
    C: float = 1.0,
    max_iter: int = 2000,
) -> float:
    """Test accuracy of a logistic-regression probe (standardized features, L2 penalty
    ``C``) trained on frozen features, the linear-probe protocol of CLIP_benchmark."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    def arr(x):
        return np.asarray(x.cpu() if isinstance(x, Tensor) else x, dtype=np.float64)

    xa, xb = arr(train_features), arr(test_features)
    ya, yb = (
        _labels(train_labels, len(xa), "train_labels"),
        _labels(test_labels, len(xb), "test_labels"),
    )
    probe = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=max_iter))
    probe.fit(xa, ya)
    return float(probe.score(xb, yb))


def retrieval_recall_at_1(image_features: Tensor, text_features: Tensor) -> dict[str, float]:
    """Image-to-text and text-to-image recall@1 for paired rows (image i <-> text i)."""
    if image_features.shape != text_features.shape or image_features.ndim != 2:
        raise ValueError(
            "image_features and text_features must be paired (n, d) matrices, got "
            f"{tuple(image_features.shape)} and {tuple(text_features.shape)}"
        )
    a = torch.nn.functional.normalize(image_features.float(), dim=-1)
    b = torch.nn.functional.normalize(text_features.float(), dim=-1)
    sim = a @ b.T
    target = torch.arange(len(a))
    return {
        "image_to_text": float((sim.argmax(dim=1) == target).float().mean()),
        "text_to_image": float((sim.argmax(dim=0) == target).float().mean()),
    }
