"""Evaluation helpers: perplexity, size on disk."""

from __future__ import annotations

import math

import torch
from torch import nn

from .modules import dense_weights
from .token_ids import check_token_ids


@torch.no_grad()
def perplexity(
    model: nn.Module, token_ids: torch.Tensor, seq_len: int = 256, batch_size: int = 8
) -> float:
    """``exp`` of the mean next-token negative log-likelihood over non-overlapping windows
    of ``seq_len`` tokens of the 1-D ``token_ids`` (the last partial window is dropped).
    A quantized model's dequantized matrices are kept for the evaluation
    (:func:`~moequant.modules.dense_weights`)."""
    token_ids = check_token_ids(token_ids, model, "token_ids").reshape(-1)
    n = token_ids.numel() // seq_len
    if n == 0:
        raise ValueError(f"token_ids has {token_ids.numel()} tokens, fewer than seq_len={seq_len}")
    windows = token_ids[: n * seq_len].view(n, seq_len)
    device = next(model.parameters()).device
    total, count = 0.0, 0
    with dense_weights(model):
        for i in range(0, n, batch_size):
            ids = windows[i : i + batch_size].to(device)
            logits = model(ids, use_cache=False).logits[:, :-1].float()
            nll = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="sum"
            )
            total += float(nll)
            count += ids[:, 1:].numel()
    return math.exp(total / count)
