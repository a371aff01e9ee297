"""EBSS, self-generation, random tokens and routing statistics."""

import itertools
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
    # raw counts (8, 0, 0, 0): mean 2, variance (36 + 3 * 4) / 4 = 12
    torch.testing.assert_close(imbalance(one_hot, "count"), torch.tensor([math.sqrt(12)]).double())
    assert torch.equal(imbalance(uniform, "count"), torch.zeros(2, dtype=torch.float64))
    with pytest.raises(ValueError, match="balance"):
        imbalance(uniform, "counts")


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


def _reference_ebss(model, start, steps, width, tau, sigma_on, balance, no_repeat=0):
    """EBSS from its definition, one sample at a time: every sequence re-run in full (no
    cache), sigma from :func:`routing_counts` of the candidate (or parent) sequence."""

    def sigma(seq):
        counts = routing_counts(model, seq[None]).double()
        if balance == "count":
            return float(counts.std(-1, unbiased=False).mean())
        return float(imbalance(counts))

    out = []
    for prefix in start:
        beams = [(prefix, 0.0)]
        for step in range(steps):
            cands = []
            for seq, cum in beams:
                with torch.no_grad():
                    logp = torch.log_softmax(model(seq[None]).logits[0, -1].double(), -1)
                logp[1] = -math.inf  # EOS
                if no_repeat:
                    for i in range(len(seq) - no_repeat + 1):
                        if torch.equal(seq[i : i + no_repeat - 1], seq[len(seq) - no_repeat + 1 :]):
                            logp[seq[i + no_repeat - 1]] = -math.inf
                lp, tok = logp.topk(width)
                for lp_j, tok_j in zip(lp.tolist(), tok.tolist(), strict=True):
                    child = torch.cat([seq, torch.tensor([tok_j])])
                    judged = child if sigma_on == "candidate" else seq
                    score = -(cum + lp_j) / (step + 1) + sigma(judged) / tau
                    cands.append((score, child, cum + lp_j))
            cands.sort(key=lambda c: c[0])
            beams = [(c[1], c[2]) for c in cands[:width]]
        final = [-cum / steps + sigma(seq) / tau for seq, cum in beams]
        out.append(beams[min(range(len(final)), key=final.__getitem__)][0])
    return torch.stack(out)


@pytest.mark.parametrize(
    ("sigma_on", "balance", "no_repeat"),
    [("candidate", "frequency", 0), ("parent", "frequency", 0), ("candidate", "count", 2)],
)
def test_ebss_equals_its_definition_run_without_a_cache(sigma_on, balance, no_repeat):
    """The cached beam search (candidates scored in one batch) against the algorithm run
    sequence by sequence from its definition: the same tokens."""
    model, tok = mixtral(), ToyTokenizer()
    kw = {"beam_width": 3, "tau": 0.05, "sigma_on": sigma_on, "balance": balance, "seed": 2}
    ours = ebss(model, tok, 3, 9, no_repeat_ngram_size=no_repeat, batch_size=2, **kw)
    start = ours[:, :2]
    ref = _reference_ebss(model, start, 7, 3, 0.05, sigma_on, balance, no_repeat)
    assert torch.equal(ours, ref)


def test_candidate_sigma_differs_from_parent_sigma_and_options_behave():
    model, tok = mixtral(), ToyTokenizer()
    cand = ebss(model, tok, 6, 16, tau=0.05, seed=1)
    parent = ebss(model, tok, 6, 16, tau=0.05, seed=1, sigma_on="parent")
    assert not torch.equal(cand, parent)
    # samples are generated independently: the batch size does not change them
    assert torch.equal(ebss(model, tok, 6, 16, tau=0.05, seed=1, batch_size=4), cand)
    norep = ebss(model, tok, 4, 20, tau=math.inf, seed=0, no_repeat_ngram_size=2)
    for row in norep.tolist():
        pairs = list(itertools.pairwise(row))
        assert len(pairs) == len(set(pairs))  # no bigram twice
    drawn = ebss(model, tok, 4, 12, tau=0.05, seed=0, sample=True)
    assert torch.equal(drawn, ebss(model, tok, 4, 12, tau=0.05, seed=0, sample=True))
    assert not torch.equal(drawn, ebss(model, tok, 4, 12, tau=0.05, seed=0))
    assert not (drawn == 1).any()  # EOS barred when sampling too
    for kw, name in [
        ({"sigma_on": "child"}, "sigma_on"),
        ({"balance": "counts"}, "balance"),
        ({"no_repeat_ngram_size": -1}, "no_repeat_ngram_size"),
        ({"batch_size": 0}, "batch_size"),
        ({"beam_width": 0}, "beam_width"),
    ]:
        with pytest.raises(ValueError, match=name):
            ebss(model, tok, 2, 8, **kw)


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
