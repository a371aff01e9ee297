"""Context-aware decoding against a hand computation; prompting."""

import pytest
import torch

from juice_lm import CAD, INSTRUCTIONS, Prompting, plain


def test_cad_contrasts_the_full_prompt_with_the_question_alone(world, toy):
    tok = world.tokenizer
    samples = world.samples(3, seed=4)
    contexts, questions = [s.substitution for s in samples], [s.question for s in samples]
    alpha = 0.7
    done = CAD(toy, alpha).complete(tok, contexts, questions, max_new_tokens=3)
    with torch.no_grad():
        for i, s in enumerate(samples):
            full = tok(s.prompt("substitution")).input_ids
            alone = tok(s.question).input_ids
            assert alone.count(tok.bos_token_id) == 1  # the question keeps one BOS, no context
            generated = []
            for _ in range(3):
                lf = toy(torch.tensor([full + generated])).logits[0, -1]
                lq = toy(torch.tensor([alone + generated])).logits[0, -1]
                adjusted = (1 + alpha) * lf - alpha * lq
                if not generated:
                    torch.testing.assert_close(
                        done.first_probs[i], adjusted.softmax(-1), rtol=1e-4, atol=1e-6
                    )
                generated.append(int(adjusted.argmax()))
            assert done.texts[i] == tok.decode(generated, skip_special_tokens=True)


def test_cad_with_alpha_zero_is_plain_greedy_decoding(world, toy):
    tok = world.tokenizer
    samples = world.samples(4, seed=5)
    args = (tok, [s.coherent for s in samples], [s.question for s in samples], 3)
    assert CAD(toy, 0.0).complete(*args).texts == plain(toy).complete(*args).texts


def test_prompting_puts_the_instruction_first(world, toy):
    tok = world.tokenizer
    s = world.samples(1, seed=6)[0]
    got = Prompting(toy, "memory", instruction="f1 f2").complete(
        tok, [s.substitution], [s.question], 2
    )
    want = plain(toy).complete(tok, [f"f1 f2 {s.substitution}"], [s.question], 2)
    assert got.texts == want.texts
    assert Prompting(toy, "context").instruction == INSTRUCTIONS["context"]
    with pytest.raises(ValueError, match="instruction must not be empty"):
        Prompting(toy, instruction=" ")
    with pytest.raises(ValueError, match="alpha must be >= 0"):
        CAD(toy, -1.0)


def test_cad_generate_refuses_streams_of_different_batch_sizes(toy):
    with pytest.raises(ValueError, match="input_ids and question_ids must hold the same number"):
        CAD(toy).generate(torch.ones(2, 4, dtype=torch.long), torch.ones(1, 2, dtype=torch.long), 1)
