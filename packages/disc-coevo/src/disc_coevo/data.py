"""The experiment's tasks on scikit-learn's handwritten digits (8x8 images, bundled with
scikit-learn: no download).

Upstream, two experts learn different tasks on the same images: digit identity (10
classes) and parity (2 classes). Downstream, a new task (the digit modulo 3) has labels for
a small fraction of its training images.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["TASKS", "DigitsSplit", "digits_split"]

TASKS = {
    "identity": (lambda d: d, 10),
    "parity": (lambda d: d % 2, 2),
    "mod3": (lambda d: d % 3, 3),
}
"""Task name -> (digit -> label, number of classes)."""


@dataclass(frozen=True)
class DigitsSplit:
    """Images ``(N, 1, 8, 8)`` in [0, 1] and their digits, split three ways:
    ``upstream`` (the experts' pretraining), ``labelled`` (the downstream labels),
    ``test`` (held out)."""

    upstream: tuple[torch.Tensor, torch.Tensor]
    labelled: tuple[torch.Tensor, torch.Tensor]
    test: tuple[torch.Tensor, torch.Tensor]


def digits_split(
    seed: int, label_fraction: float = 0.1, upstream_fraction: float = 0.5
) -> DigitsSplit:
    """Shuffle the 1797 digits with ``seed``; ``upstream_fraction`` of them pretrain the
    experts; of the rest, 70 % form the downstream training set, of which
    ``label_fraction`` is labelled, and 30 % the test set."""
    from sklearn.datasets import load_digits

    if not 0 < label_fraction <= 1:
        raise ValueError(f"label_fraction must be in (0, 1], got {label_fraction}")
    data = load_digits()
    x = torch.tensor(data.images / 16.0, dtype=torch.float32)[:, None]
    d = torch.tensor(data.target, dtype=torch.long)
    order = torch.from_numpy(np.random.default_rng(seed).permutation(len(x)))
    x, d = x[order], d[order]
    n_up = int(upstream_fraction * len(x))
    rest_x, rest_d = x[n_up:], d[n_up:]
    n_train = int(0.7 * len(rest_x))
    n_lab = max(2, int(label_fraction * n_train))
    return DigitsSplit(
        upstream=(x[:n_up], d[:n_up]),
        labelled=(rest_x[:n_lab], rest_d[:n_lab]),
        test=(rest_x[n_train:], rest_d[n_train:]),
    )
