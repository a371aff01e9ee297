"""Training the worlds' models: padding does not change what a row computes, and a short
run learns the facts."""

import numpy as np
import torch

from juice_lm import FactWorld, evaluate, plain, toy_model, train_toy
from juice_lm.steering import forward


def test_a_left_padded_row_computes_what_it_computes_alone():
    world = FactWorld(num_subjects=6, num_strangers=6, seed=0)
    model = toy_model(world, hidden=32, layers=2, heads=2, seed=0)
    assert model.config.max_position_embeddings == world.max_tokens
    ids, mask, _ = world.batch(np.random.default_rng(0), 16)
    assert bool((mask == 0).any())  # the batch is padded
    with torch.no_grad():
        batched = forward(model, ids, mask, use_cache=False)[0][:, -1]
        for i in range(16):
            row = ids[i, mask[i] == 1][None]
            alone = forward(model, row, torch.ones_like(row), use_cache=False)[0][0, -1]
            torch.testing.assert_close(batched[i], alone, rtol=1e-4, atol=1e-5)


def test_a_short_run_learns_the_facts_of_a_small_fact_world():
    world = FactWorld(num_subjects=6, num_strangers=6, max_distractors=1, seed=0)
    samples = world.samples(18, seed=1)  # every fact
    model = toy_model(world, hidden=32, layers=2, heads=2, seed=0)
    before = evaluate(plain(model), world.tokenizer, samples, "memory", kinds=["clean"], words=1)
    model = train_toy(world, steps=150, batch_size=32, model=model, shares=(1, 0, 0))
    after = evaluate(plain(model), world.tokenizer, samples, "memory", kinds=["clean"], words=1)
    assert before["accuracy"] <= 0.2 and after["accuracy"] >= 0.8
