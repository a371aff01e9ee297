"""EBSS, self-generation, random tokens and routing statistics."""

import math

import pytest
import torch

from moequant.calibration import (
    ebss,
    expert_balance,
    imbalance,
    random_tokens,
    routing_counts,
    self_generate,
)
from moequant.evaluation import perplexity

from .conftest import ToyTokenizer, mixtral


def test_imbalance_oracles():
    uniform = torch.full((2, 3, 4), 5)
    assert torch.equal(imbalance(uniform), torch.zeros(2))
    one_hot = torch.tensor([[[8, 0, 0, 0]]])  # frequencies (1, 0, 0, 0): std sqrt(3)/4
    torch.testing.assert_close(imbalance(one_hot), torch.tensor([math.sqrt(3) / 4]))


def test_ebss_with_infinite_tau_is_transformers_beam_search():
    model = mixtral()
    out = ebss(model, ToyTokenizer(), n_samples=3, seq_len=10, beam_width=3, tau=math.inf, seed=0)
    assert out.shape == (3, 10) and (out[:, 0] == 0).all()
    for row in out:
        beam = model.generate(
            row[None, :2],
            num_beams=3,
            do_sample=False,
            max_new_tokens=8,
            min_new_tokens=8,
            early_stopping=False,
            length_penalty=1.0,
            attention_mask=torch.ones(1, 2, dtype=torch.long),
        )
        assert torch.equal(beam[0], row)


def test_ebss_balances_expert_routing_better_than_beam_search():
    model, tok = mixtral(), ToyTokenizer()
    plain = ebss(model, tok, n_samples=6, seq_len=16, tau=math.inf, seed=1)
    balanced = ebss(model, tok, n_samples=6, seq_len=16, tau=0.05, seed=1)
    s_plain = imbalance(routing_counts(model, plain)).mean()
    s_bal = imbalance(routing_counts(model, balanced)).mean()
    assert s_bal < 0.9 * s_plain  # a strong balance term (small tau) must show
    assert not (balanced == 1).any()  # EOS is suppressed


def test_samplers_and_statistics():
    model, tok = mixtral(), ToyTokenizer()
    r = random_tokens(model, tok, 4, 12, seed=0)
    g = self_generate(model, tok, 4, 12, seed=0)
    for ids in (r, g):
        assert ids.shape == (4, 12) and (ids[:, 0] == 0).all() and not (ids[:, 1:] <= 1).any()
    assert torch.equal(self_generate(model, tok, 4, 12, seed=0), g)
    stats = expert_balance(model, r)
    assert stats["counts"].shape == (2, 4) and int(stats["counts"].sum()) == 2 * 4 * 12 * 2
    assert stats["mean_std"] >= 0 and 0 <= stats["coverage"] <= 1
    with pytest.raises(ValueError, match="seq_len"):
        ebss(model, tok, 2, 2)
    with pytest.raises(ValueError, match="tau"):
        ebss(model, tok, 2, 8, tau=0)


def test_perplexity_is_exp_of_the_language_model_loss():
    model = mixtral()
    ids = torch.randint(2, 96, (40,), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        loss = model(ids[None], labels=ids[None]).loss
    assert perplexity(model, ids, seq_len=40) == pytest.approx(math.exp(float(loss)), rel=1e-5)
