"""Run twice vs run once, KV-cached generation, the official tie-breaking of the tuning."""

import pytest
import torch

from juice_lm import JUNE, PH3, HeadSteering, JuICE, evaluate, plain
from juice_lm.samples import encode_batch


def _ids(seed=0, shape=(2, 8)):
    return torch.randint(2, 48, shape, generator=torch.Generator().manual_seed(seed))


def test_heads_in_one_layer_give_the_same_result_run_twice_or_once(tiny):
    model = tiny("llama", seed=1)
    heads = ([(1, 0), (1, 3)], [(1, 2)])
    ids = _ids()
    torch.testing.assert_close(
        JuICE(model, heads, 2.0, 1.5).logits(ids), JUNE(model, heads, 2.0, 1.5).logits(ids)
    )
    # across layers the second run sees clean head outputs of the later layer: they differ
    across = ([(0, 1), (1, 3)], [])
    diff = JuICE(model, across, 3.0, 0.0).logits(ids) - JUNE(model, across, 3.0, 0.0).logits(ids)
    assert diff.abs().max() > 1e-3


@pytest.mark.parametrize("arch", ["llama", "gemma2", "gpt2"])
@pytest.mark.parametrize("runs", [1, 2])
def test_kv_cached_generation_equals_recomputing_every_step(tiny, arch, runs):
    model = tiny(arch, seed=2)
    steer = JuICE(model, ([(0, 1), (1, 2)], [(1, 0)]), 2.0, 1.0, runs=runs)
    ids = _ids(2, (3, 6))
    mask = torch.ones_like(ids)
    mask[0, :2] = 0  # left padding
    mask[1, :1] = 0
    cached = steer.generate(ids, mask, max_new_tokens=6)
    uncached = steer.generate(ids, mask, max_new_tokens=6, use_cache=False)
    assert torch.equal(cached, uncached)
    # a left-padded row generates what it generates alone
    alone = steer.generate(ids[:1, 2:], max_new_tokens=6)
    assert torch.equal(cached[0, 2:], alone[0])


def test_a_head_in_both_sets_is_applied_once_with_both_weights(tiny):
    model = tiny("llama")
    both = JuICE(model, ([(0, 1), (1, 2)], [(0, 1)]), 3.0, 1.0)
    assert both.coefficients == {(0, 1): 2.0, (1, 2): 3.0}
    ids = _ids(4)
    explicit = HeadSteering(model, {(0, 1): 2.0, (1, 2): 3.0}, runs=2)
    torch.testing.assert_close(both.logits(ids), explicit.logits(ids))
    # the official code applies -alpha_minus to it twice instead
    official = HeadSteering(model, {(0, 1): -2.0, (1, 2): 3.0}, runs=2)
    assert (both.logits(ids) - official.logits(ids)).abs().max() > 1e-4


def test_bad_arguments_are_refused(tiny, world):
    model = tiny("llama")
    with pytest.raises(ValueError, match="alpha_plus must be >= 0"):
        JuICE(model, ([(0, 0)], []), -1.0)
    with pytest.raises(ValueError, match="enhance holds head"):
        JuICE(model, ([(5, 0)], []))
    with pytest.raises(ValueError, match="mode must be one of"):
        JuICE(model, ([], []), mode="both")
    with pytest.raises(ValueError, match="runs must be 1 or 2"):
        HeadSteering(model, {}, runs=3)
    with pytest.raises(ValueError, match="input_ids must be a non-empty"):
        plain(model).generate(torch.zeros(0, dtype=torch.long))
    with pytest.raises(ValueError, match="samples must hold at least one"):
        evaluate(plain(model), None, [])
    with pytest.raises(ValueError, match="ranking must name at least one head"):
        PH3.tune(model, world.tokenizer, [], world.samples(2, seed=0))


def test_token_ids_masks_and_evaluation_settings_are_checked(tiny, world, toy):
    model = tiny("llama")
    steer = plain(model)
    ids = torch.tensor([[3, 4, 5]])
    with pytest.raises(ValueError, match=r"input_ids must lie in \[0, 48\) .* got 3\.\.48"):
        steer.generate(torch.tensor([[3, 4, 48]]))
    with pytest.raises(ValueError, match=r"input_ids must lie in \[0, 48\) .* got -1\.\.4"):
        steer.generate(torch.tensor([[3, -1, 4]]))
    with pytest.raises(
        TypeError, match=r"input_ids must be integer token ids, got dtype torch\.float32"
    ):
        steer.generate(ids.float())
    with pytest.raises(ValueError, match=r"attention_mask rows \[0\] are all zeros"):
        steer.generate(ids, torch.zeros_like(ids))
    with pytest.raises(ValueError, match=r"attention_mask must hold 0 .* and 1 .* only"):
        steer.generate(ids, torch.full_like(ids, 2))
    samples = world.samples(2, seed=0)
    with pytest.raises(ValueError, match="words must be >= 1, got 0"):
        evaluate(plain(toy), world.tokenizer, samples, words=0)
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        evaluate(plain(toy), world.tokenizer, samples, batch_size=0)


def test_an_answer_outside_the_vocabulary_is_refused_not_scored_as_unk(world):
    from juice_lm import answer_token_id

    assert answer_token_id(world.tokenizer, world.samples(1, seed=0)[0].memory_answer) > 3
    with pytest.raises(ValueError, match="answer 'Zanzibar' is not in the tokenizer's vocabulary"):
        answer_token_id(world.tokenizer, "Zanzibar")


def test_juice_without_heads_warns_that_it_changes_nothing(tiny):
    with pytest.warns(UserWarning, match="no heads to steer"):
        JuICE(tiny("llama"), ([], []))


def test_tuning_keeps_the_lexicographic_best_and_the_first_on_ties(world, toy):
    steer = JuICE(toy, ([(0, 1)], [(1, 2)]), mode="memory")
    validation = world.samples(6, seed=1)
    info = steer.tune_alphas(
        world.tokenizer, validation, alphas_plus=(0, 1, 2), alphas_minus=(0, 1), words=1
    )
    grid = info["grid"]
    assert len(grid) == 6
    best = max(grid, key=lambda g: (g["accuracy"], g["target_prob"]))
    first = next(
        g
        for g in grid
        if (g["accuracy"], g["target_prob"]) == (best["accuracy"], best["target_prob"])
    )
    assert (info["alpha_plus"], info["alpha_minus"]) == (first["alpha_plus"], first["alpha_minus"])
    assert (steer.alpha_plus, steer.alpha_minus) == (first["alpha_plus"], first["alpha_minus"])
    # the kept weights reproduce the validation score
    again = evaluate(steer, world.tokenizer, validation, "memory", words=1)
    assert again["accuracy"] == info["accuracy"]


def test_evaluate_grades_the_first_words_of_the_greedy_answer(world, toy):
    samples = world.samples(5, seed=2)
    result = evaluate(plain(toy), world.tokenizer, samples, "context", words=1)
    assert set(result["per_kind"]) == {"substitution", "coherent"}
    # by hand: the greedy first token of each prompt against the context answer
    tok = world.tokenizer
    hits = []
    for kind in ("substitution", "coherent"):
        ids, mask = encode_batch(tok, [s.prompt(kind) for s in samples])
        out = plain(toy).generate(ids, mask, max_new_tokens=1)[:, -1]
        hits += [
            tok.decode([int(t)]).strip() == s.context_answer
            for t, s in zip(out, samples, strict=True)
        ]
    assert result["accuracy"] == pytest.approx(sum(hits) / len(hits))


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_right_padded_prompts_are_refused_not_continued_from_the_padding(tiny, arch):
    from juice_lm import CAD

    model = tiny(arch, seed=3)
    steer = JuICE(model, ([(0, 1)], [(1, 0)]), 2.0, 1.0)
    ids = _ids(5, (2, 6))
    right = torch.ones_like(ids)
    right[1, 4:] = 0  # a tokenizer with padding_side="right"
    with pytest.raises(ValueError, match=r"attention_mask rows \[1\] have padding after"):
        steer.generate(ids, right, max_new_tokens=2)
    with pytest.raises(ValueError, match=r"question_mask rows \[1\] have padding after"):
        CAD(model).generate(ids, ids, 2, question_mask=right)
    # the same row left-padded continues exactly as the prompt alone
    left = torch.cat([ids[1:, 4:], ids[1:, :4]], dim=1)
    mask = torch.ones_like(left)
    mask[0, :2] = 0
    padded = steer.generate(
        torch.cat([ids[:1], left]), torch.cat([right[:1], mask]), max_new_tokens=4
    )
    alone = steer.generate(ids[1:, :4], max_new_tokens=4)
    assert torch.equal(padded[1, 2:], alone[0])


@pytest.mark.parametrize("arch", ["llama", "gemma2", "gpt2"])
def test_last_position_logits_equal_the_full_forwards_last_row(tiny, arch):
    from juice_lm.steering import forward

    model = tiny(arch, seed=4)
    ids = _ids(6, (2, 7))
    mask = torch.ones_like(ids)
    mask[0, :2] = 0
    full, _ = forward(model, ids, mask, use_cache=False)
    last, _ = forward(model, ids, mask, use_cache=False, last=True)
    assert full.shape == (2, 7, 48) and last.shape == (2, 1, 48)  # only one position computed
    torch.testing.assert_close(last, full[:, -1:])


def test_juice_steers_toward_the_mode_its_heads_were_selected_for(tiny):
    from juice_lm import Selection

    model = tiny("llama")
    context = Selection([(0, 1)], [(1, 0)], "context")
    assert JuICE(model, context).mode == "context"
    assert JUNE(model, context).mode == "context"
    assert JuICE(model, ([(0, 1)], [(1, 0)])).mode == "memory"  # a plain pair: memory
    assert JuICE(model, context, mode="memory").mode == "memory"  # named explicitly


def test_evaluate_generates_the_official_budget_by_default(world, toy):
    from juice_lm import TOKENS_PER_WORD

    budgets = []

    class Spy:
        def complete(self, tokenizer, contexts, questions, max_new_tokens):
            budgets.append(max_new_tokens)
            return plain(toy).complete(tokenizer, contexts, questions, max_new_tokens)

    evaluate(Spy(), world.tokenizer, world.samples(2, seed=1), "memory")
    assert TOKENS_PER_WORD == 3 and set(budgets) == {15}  # five words: the official 15
    evaluate(Spy(), world.tokenizer, world.samples(2, seed=1), "memory", words=1)
    assert budgets[-1] == 3
    evaluate(Spy(), world.tokenizer, world.samples(2, seed=1), "memory", max_new_tokens=2)
    assert budgets[-1] == 2
