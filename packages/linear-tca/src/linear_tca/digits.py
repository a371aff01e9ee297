"""The laptop-scale testbed: a small CNN trained on scikit-learn's handwritten digits
(1,797 8x8 images shipped inside the scikit-learn wheel, no download).
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

from icml25_core import as_float_tensor, check_choice, check_labels, check_loss, check_scalar


def digits_split(
    seed: int, *, test_size: float = 0.45
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Stratified train/test split of the digits as ``(N, 1, 8, 8)`` images in ``[0, 1]``.

    Returns
    -------
    x_train, y_train, x_test, y_test : torch.Tensor
        Images float32, labels int64.
    """
    check_scalar(
        test_size, "test_size", low=0.0, high=1.0, low_inclusive=False, high_inclusive=False
    )
    data = load_digits()
    x = (data.images / 16.0).astype(np.float32)[:, None]
    xtr, xte, ytr, yte = train_test_split(
        x, data.target, test_size=test_size, random_state=seed, stratify=data.target
    )
    return (
        torch.from_numpy(xtr),
        torch.from_numpy(ytr).long(),
        torch.from_numpy(xte),
        torch.from_numpy(yte).long(),
    )


class DigitsCNN(nn.Module):
    """Three conv-norm-ReLU blocks and global average pooling (``featurizer``, images
    ``(B, 1, 8, 8)`` to embeddings ``(B, width)``), then a linear ``head`` to 10 logits.

    Parameters
    ----------
    width : int, default=64
        Channels of the last block, the embedding dimension ``d`` (even).
    n_classes : int, default=10
    norm : {"batch", "group"}, default="batch"
        BatchNorm (as in ResNets) or GroupNorm with 8 groups (no batch statistics, so
        BN adaptation cannot act, as with a ViT's LayerNorm).
    """

    def __init__(self, width: int = 64, n_classes: int = 10, norm: str = "batch") -> None:
        super().__init__()
        check_scalar(width, "width", low=16, integer=True)
        if width % 16:
            raise ValueError(f"width must be a multiple of 16, got {width}")
        check_scalar(n_classes, "n_classes", low=2, integer=True)
        check_choice(norm, "norm", ("batch", "group"))
        half = width // 2

        def norm_layer(channels: int) -> nn.Module:
            return nn.BatchNorm2d(channels) if norm == "batch" else nn.GroupNorm(8, channels)

        self.featurizer = nn.Sequential(
            nn.Conv2d(1, half, 3, padding=1),
            norm_layer(half),
            nn.ReLU(),
            nn.Conv2d(half, width, 3, padding=1),
            norm_layer(width),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(width, width, 3, padding=1),
            norm_layer(width),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.head = nn.Linear(width, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, n_classes)``."""
        return self.head(self.featurizer(x))


def train_source_model(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    seed: int,
    width: int = 64,
    norm: str = "batch",
    epochs: int = 30,
    batch_size: int = 64,
    lr: float = 3e-3,
    device: str = "cpu",
) -> DigitsCNN:
    """A :class:`DigitsCNN` trained with Adam and cross-entropy on clean ``(x, y)``,
    returned in eval mode.

    ``x`` (N, 1, 8, 8) and ``y`` (N,) may be tensors or NumPy arrays (converted to float32
    images and int64 labels); NaN images, bad labels and a diverging loss (a
    ``FloatingPointError`` naming ``lr``) are refused."""
    check_scalar(epochs, "epochs", low=1, integer=True)
    check_scalar(batch_size, "batch_size", low=1, integer=True)
    check_scalar(lr, "lr", low=0.0, low_inclusive=False)
    x = as_float_tensor(x, "x", dtype=torch.float32, ndim=4)
    y = torch.as_tensor(
        check_labels(np.asarray(y.cpu() if torch.is_tensor(y) else y), "y", n_samples=x.shape[0])
    )
    if x.shape[0] < 2:
        raise ValueError(f"x must hold at least 2 images (BatchNorm), got {x.shape[0]}")
    torch.manual_seed(seed)
    model = DigitsCNN(width=width, n_classes=int(y.max()) + 1, norm=norm).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    x, y = x.to(device), y.to(device)
    model.train()
    start = None  # the first batch's loss: one RUNAWAY times above it diverged
    for epoch in range(epochs):
        order = torch.randperm(x.shape[0], generator=g).to(device)
        for i in range(0, x.shape[0], batch_size):
            idx = order[i : i + batch_size]
            if idx.numel() < 2:
                continue
            loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
            start = float(loss.detach()) if start is None else start
            check_loss(loss, lr=lr, step=epoch, reference=start)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model.eval()
