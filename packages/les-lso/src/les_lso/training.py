"""Training a :class:`~les_lso.models.SequenceVAE` on token sequences (the reference
trains its VAEs with a reconstruction cross-entropy plus ``beta`` times the KL term)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from icml25_core import check_loss, check_module_finite, check_scalar

from .models import SequenceVAE

__all__ = ["train_vae"]


def train_vae(
    vae: SequenceVAE,
    tokens,
    *,
    epochs: int = 30,
    batch_size: int = 128,
    lr: float = 1e-3,
    beta: float = 0.1,
    seed: int = 0,
) -> list[float]:
    """Fit ``vae`` to token ids ``(N, L)`` with Adam on ``CE + beta * KL`` per sequence
    (cross-entropy summed over positions), on the model's device; returns the mean loss
    of each epoch and leaves the model in eval mode.

    Raises
    ------
    ValueError
        If ``tokens`` holds fewer than two sequences (BatchNorm needs two per batch).
    FloatingPointError
        If training diverges (a non-finite loss or weights); the message names ``lr``.
    """
    check_scalar(epochs, "epochs", integer=True, low=1)
    check_scalar(batch_size, "batch_size", integer=True, low=1)
    check_scalar(lr, "lr", low=0.0, low_inclusive=False)
    check_scalar(beta, "beta", low=0.0)
    torch.manual_seed(seed)
    data = vae.check_tokens(np.asarray(tokens))  # every row: shape, dtype and range
    if len(data) < 2:
        raise ValueError(
            f"tokens must hold at least 2 sequences (BatchNorm needs two per batch), got {len(data)}"
        )
    device = data.device
    opt = torch.optim.Adam(vae.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    history = []
    vae.train()
    for epoch in range(epochs):
        order = torch.randperm(len(data), generator=g).to(device)
        total = 0.0
        for i in range(0, len(data), batch_size):
            batch = data[order[i : i + batch_size]]
            if len(batch) < 2:  # BatchNorm needs two samples
                continue
            logits, mu, logvar = vae(batch)
            recon = F.cross_entropy(logits.flatten(0, 1), batch.flatten(), reduction="sum") / len(
                batch
            )
            loss = recon + beta * vae.kl(mu, logvar).mean()
            total += check_loss(loss, lr=lr, step=epoch) * len(batch)
            opt.zero_grad()
            loss.backward()
            opt.step()
        check_module_finite(vae, lr=lr, step=epoch)
        history.append(total / len(data))
    vae.eval()
    return history
