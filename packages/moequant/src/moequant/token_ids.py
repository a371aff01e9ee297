"""Token ids a model is fed: checked against its embedding table before any forward pass
(an id past the vocabulary otherwise fails deep inside ``nn.Embedding`` as an index
error, or on CUDA as a device-side assert)."""

from __future__ import annotations

import torch
from torch import nn


def check_token_ids(token_ids, model: nn.Module, name: str) -> torch.Tensor:
    """``token_ids`` as a LongTensor, after checking they are integers in
    ``[0, vocabulary size)`` of ``model``'s input embeddings; errors name ``name``."""
    ids = torch.as_tensor(token_ids)
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise ValueError(f"{name} must hold integer token ids, got {ids.dtype}")
    vocab = model.get_input_embeddings().num_embeddings
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab):
        raise ValueError(
            f"{name} must hold token ids in [0, {vocab}) (the model's vocabulary), got "
            f"{int(ids.min())}..{int(ids.max())}"
        )
    return ids.long()
