"""Samples, grading, and the data of the toy world and the fact world."""

import numpy as np
import pytest

from juice_lm import (
    ConflictSample,
    FactWorld,
    ToyWorld,
    answer_token_id,
    is_correct,
    normalize_answer,
)


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
    ids, mask, targets = world.batch(rng, 64, shares=(1, 0, 0))
    assert bool(mask.all()) and mask.shape == ids.shape
    for row, t in zip(ids.tolist(), targets.tolist(), strict=True):
        assert inverse[row[0]] == "<s>" and inverse[row[-1]] == "is"
        assert world.facts[inverse[row[-2]]] == inverse[t]  # factual recall
    ids, _, targets = world.batch(rng, 64, shares=(0, 1, 0))
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


def _parse(world, sentence):
    """``(person, relation, template, answer or None)`` of a statement or a question; None
    for a supporting sentence."""
    from juice_lm.facts import RELATIONS

    words = sentence.split()
    person = next(w for w in words if w in world.subjects or w in world.strangers)
    for relation, spec in RELATIONS.items():
        for t, template in enumerate(spec["questions"]):
            q = template.format(s=person).split()
            if words[: len(q)] == q and len(words) in (len(q), len(q) + 2):
                return person, relation, t, (words[len(q)] if len(words) > len(q) else None)
    return None


def _sentences(text):
    return [x.strip() for x in text.removesuffix(" .").split(" . ")]


def test_fact_world_data_follow_its_rules():
    world = FactWorld(num_subjects=10, num_strangers=8, seed=2)
    assert FactWorld(num_subjects=10, num_strangers=8, seed=2).facts == world.facts
    assert not set(world.subjects) & set(world.strangers)
    rng = np.random.default_rng(0)
    for task in (0, 1, 2):
        for _ in range(40):
            text, answer = world.example(rng, task)
            *context, question = _sentences(text)
            person, relation, _, none = _parse(world, question)
            stated = [_parse(world, s + " .") for s in context]
            assert none is None and answer in world.tokenizer.get_vocab()
            about = [a for p, r, _, a in stated if (p, r) == (person, relation)]
            if task == 0:  # recall: the context is about others, the answer is the fact
                assert person in world.subjects and answer == world.facts[(person, relation)]
                assert not about
            elif task == 1:  # copying: a stranger's answer stated once, in any template
                assert person in world.strangers and about == [answer]
            else:  # conflict: another answer stated, either one the label
                assert about[0] != world.facts[(person, relation)]
                assert answer in (about[0], world.facts[(person, relation)])
    ids, mask, targets = world.batch(rng, 32)
    assert ids.shape == mask.shape and ids.shape[0] == targets.shape[0] == 32
    assert bool((mask[:, -1] == 1).all())  # left padding: every row ends at the question
    assert bool((ids[mask == 0] == world.tokenizer.pad_token_id).all())


def test_fact_world_samples_paraphrase_and_fit_the_model():
    world = FactWorld(num_subjects=10, num_strangers=8, seed=2)
    tok = world.tokenizer
    samples = world.samples(30, seed=1)
    assert len({(s.question, s.memory_answer) for s in samples}) == 30
    for s in samples:
        person, relation, q, _ = _parse(world, s.question)
        assert s.memory_answer == world.facts[(person, relation)] != s.context_answer
        for kind, times in (("substitution", 1), ("coherent", 2)):
            said = [_parse(world, x + " .") for x in _sentences(s.context(kind))]
            assert said.count(None) == (kind == "coherent")  # one supporting sentence
            said = [x for x in said if x is not None and x[:2] == (person, relation)]
            assert [x[3] for x in said] == [s.context_answer] * times
            assert q not in {x[2] for x in said}  # the question paraphrases the context
            ids = tok(s.prompt(kind)).input_ids
            assert tok.unk_token_id not in ids and len(ids) <= world.max_tokens
    with pytest.raises(ValueError, match="n must be <= 30"):
        world.samples(31, seed=0)
    with pytest.raises(ValueError, match="num_strangers"):
        FactWorld(num_strangers=1)
