"""Tiny models shared by the tests of this package (float64 where an oracle compares
to tight tolerances)."""

import pytest
import torch

from les_lso import SequenceVAE


@pytest.fixture
def tiny_vae():
    """``tiny_vae(decoder="gru", dtype=torch.float64, **config)``: a random SequenceVAE
    (vocabulary 5, length 8, latent 3, width 8, two layers) in eval mode."""

    def make(decoder="gru", dtype=torch.float64, seed=0, **config):
        torch.manual_seed(seed)
        settings = dict(vocab_size=5, max_length=8, latent_dim=3, hidden_size=8, num_layers=2)
        settings.update(num_heads=2, dim_feedforward=16, n_memory=2, decoder=decoder)
        settings.update(config)
        return SequenceVAE(**settings).to(dtype).eval()

    return make


@pytest.fixture
def linear_decoder():
    """``linear_decoder(W, b, L, V)``: ``z -> (z W^T + b)`` reshaped to ``(B, L, V)``."""

    def make(w, b, length, vocab):
        def decoder(z):
            return (z @ w.T + b).reshape(z.shape[0], length, vocab)

        return decoder

    return make
