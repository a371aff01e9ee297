"""Head scoring against the official one-forward-per-head procedure; selection rules; the
JSON artefact."""

import json

import numpy as np
import pytest
import torch

from juice_lm import (
    KINDS,
    MODES,
    HeadScores,
    ablation_ranking,
    answer_token_id,
    score_heads,
    select_heads,
)
from juice_lm.heads import AttentionHeads


def test_batched_scores_equal_the_official_loop(world, toy):
    samples = world.samples(2, seed=3)
    alphas_pos, alphas_neg = (1, 3), (-1,)
    scores = score_heads(
        toy, world.tokenizer, samples, alphas_pos=alphas_pos, alphas_neg=alphas_neg, batch_size=5
    )
    heads = AttentionHeads(toy)
    tok = world.tokenizer
    alphas = alphas_pos + alphas_neg
    want = {m: {k: np.zeros((2, 4, 3)) for k in KINDS} for m in MODES}
    with torch.no_grad():
        for s in samples:
            targets = [answer_token_id(tok, s.target(m)) for m in MODES]
            for kind in KINDS:
                ids = torch.tensor([tok(s.prompt(kind)).input_ids])
                with heads.capture() as clean:
                    p0 = toy(ids).logits[0, -1].softmax(-1)[targets]
                for layer in range(2):
                    out = heads.head_outputs(layer, clean[layer])  # (1, T, H, d_model)
                    for head in range(4):
                        for a, alpha in enumerate(alphas):
                            # the official edit: o_proj.output += alpha * head_output
                            hook = heads.projections[layer].register_forward_hook(
                                lambda m, args, o, a=alpha, h=out[:, :, head]: o + a * h
                            )
                            p = toy(ids).logits[0, -1].softmax(-1)[targets]
                            hook.remove()
                            for i, mode in enumerate(MODES):
                                want[mode][kind][layer, head, a] += float(p[i] - p0[i]) / len(
                                    samples
                                )
    for mode in MODES:
        for kind in KINDS:
            np.testing.assert_allclose(scores.changes[mode][kind], want[mode][kind], atol=1e-6)
    assert scores.positive("memory", "clean").shape == (2, 4)


def _scores(pos, neg):
    """Scores whose positive/negative means are ``pos[kind]`` / ``neg[kind]`` (2 x 2)."""
    changes = {
        m: {k: np.stack([np.asarray(pos[k], float), np.asarray(neg[k], float)], -1) for k in KINDS}
        for m in MODES
    }
    return HeadScores((1.0, -1.0), changes, 4)


def test_selection_keeps_heads_that_help_on_every_kind_ranked_by_the_sum():
    pos = {
        "clean": [[0.1, 0.2], [0.4, -0.1]],
        "substitution": [[0.1, 0.5], [0.1, 0.9]],
        "coherent": [[0.1, 0.1], [0.4, 0.9]],
    }
    neg = {k: [[0.2, -0.1], [0.0, 0.3]] for k in KINDS}
    scores = _scores(pos, neg)
    sel = select_heads(scores, k=5, mode="memory")
    assert sel.enhance == [(1, 0), (0, 1), (0, 0)]  # sums 0.9, 0.8, 0.3; (1, 1) hurts on clean
    assert sel.suppress == [(1, 1), (0, 0)]  # 0.0 is not > 0
    assert select_heads(scores, k=1, mode="memory").enhance == [(1, 0)]
    # context mode and explicit kinds ignore the clean prompt, where (1, 1) hurts
    assert select_heads(scores, k=1, mode="context").enhance == [(1, 1)]
    assert select_heads(scores, k=1, kinds=("substitution", "coherent")).enhance == [(1, 1)]
    assert ablation_ranking(scores, "memory") == [(1, 1), (0, 0)]


def test_selection_ties_go_to_the_lower_index():
    pos = {k: [[0.1, 0.1], [0.1, 0.1]] for k in KINDS}
    neg = {k: [[-1.0, -1.0], [-1.0, -1.0]] for k in KINDS}
    sel = select_heads(_scores(pos, neg), k=3)
    assert sel.enhance == [(0, 0), (0, 1), (1, 0)] and sel.suppress == []


def test_scores_round_trip_and_refuse_overwrites_and_corruption(tmp_path, world, toy):
    scores = score_heads(
        toy, world.tokenizer, world.samples(1, seed=0), alphas_pos=(1,), alphas_neg=(-1,)
    )
    path = scores.save(tmp_path / "scores.json")
    back = HeadScores.load(path)
    assert back.alphas == scores.alphas and back.num_samples == 1
    for m in MODES:
        for k in KINDS:
            np.testing.assert_array_equal(back.changes[m][k], scores.changes[m][k])
    with pytest.raises(FileExistsError, match="overwrite=True"):
        scores.save(path)
    scores.save(path, overwrite=True)
    data = json.loads(path.read_text())
    data["changes"]["memory"]["clean"][0][0][0] = float("nan")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=f"cannot read head scores from {bad}.*not finite"):
        HeadScores.load(bad)
    torn = tmp_path / "torn.json"
    torn.write_text(path.read_text()[:30])
    with pytest.raises(ValueError, match=str(torn)):
        HeadScores.load(torn)


def test_bad_scoring_arguments_are_refused(world, toy):
    with pytest.raises(ValueError, match="alphas_neg must be non-empty and all < 0"):
        score_heads(toy, world.tokenizer, world.samples(1, seed=0), alphas_neg=(1,))
    with pytest.raises(ValueError, match="samples must hold at least one"):
        score_heads(toy, world.tokenizer, [])
    with pytest.raises(ValueError, match="kinds must be one of"):
        select_heads(
            _scores({k: [[0, 0], [0, 0]] for k in KINDS}, {k: [[0, 0], [0, 0]] for k in KINDS}),
            kinds=("x",),
        )
