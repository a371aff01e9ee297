"""Samples, grading, and the toy world's data."""

import numpy as np
import pytest

from juice_lm import ConflictSample, ToyWorld, answer_token_id, is_correct, normalize_answer


def test_grading_matches_whole_words_in_the_first_words():
    assert is_correct("Paris, of course", "paris")
    assert is_correct("  the city of Paris is", "Paris", words=5)
    assert not is_correct("the city of Paris", "Paris", words=3)
    assert not is_correct("Parisian food", "Paris")  # the official substring test says yes
    assert is_correct("São Paulo!", "Sao Paulo")
    assert normalize_answer("  Élan,  VITAL ") == "elan vital"


def test_samples_refuse_empty_fields_and_unknown_kinds():
    with pytest.raises(ValueError, match=r"ConflictSample\.memory_answer must be a non-empty"):
        ConflictSample("q", "", "b", "c", "d")
    s = ConflictSample("The capital of France is", "Paris", "Rome", "Rome is it.", "Rome, always.")
    assert s.prompt("clean") == "The capital of France is"
    assert s.prompt("coherent") == "Rome, always. The capital of France is"
    assert s.target("context") == "Rome"
    with pytest.raises(ValueError, match="kind must be one of"):
        s.context("paraphrase")


def test_toy_world_data_follow_its_rules():
    world = ToyWorld(num_subjects=12, num_answers=5, num_fillers=6, seed=3)
    assert ToyWorld(num_subjects=12, num_answers=5, num_fillers=6, seed=3).facts == world.facts
    rng = np.random.default_rng(0)
    vocab = world.tokenizer.get_vocab()
    inverse = {v: k for k, v in vocab.items()}
    ids, targets = world.batch(rng, 64, shares=(1, 0, 0))
    for row, t in zip(ids.tolist(), targets.tolist(), strict=True):
        assert inverse[row[0]] == "<s>" and inverse[row[-1]] == "is"
        assert world.facts[inverse[row[-2]]] == inverse[t]  # factual recall
    ids, targets = world.batch(rng, 64, shares=(0, 1, 0))
    for row, t in zip(ids.tolist(), targets.tolist(), strict=True):
        words = [inverse[i] for i in row[1:]]
        x = words[-2]
        stated = [i for i in range(len(words) - 3) if words[i : i + 2] == [x, "is"]]
        assert x in world.fillers and len(stated) == 1  # induction: "x is y" once, then "x is"
        assert words[stated[0] + 2] == inverse[t]
    samples = world.samples(12, seed=1)
    assert len({s.question for s in samples}) == 12
    for s in samples:
        assert s.memory_answer == world.facts[s.question.split()[0]] != s.context_answer
        assert s.coherent.count(f"{s.question} {s.context_answer}") == 2
        assert answer_token_id(world.tokenizer, s.memory_answer) == vocab[s.memory_answer]
    with pytest.raises(ValueError, match="shares must be three non-negative weights"):
        world.batch(rng, 4, shares=(1, -1, 0))
    with pytest.raises(ValueError, match="n must be <= 12"):
        world.samples(13, seed=0)
