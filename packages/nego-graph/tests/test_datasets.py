"""Spurious-Motif: labels, bias, decorrelated test split, ground-truth masks, severe shift."""

import numpy as np
import pytest

from nego_graph import SpuriousMotif
from nego_graph.datasets import N_FEATURES, N_RAW


@pytest.fixture(scope="module")
def data():
    return SpuriousMotif(bias=0.9, shift="severe", num_graphs=600, seed=1)


def test_bias_holds_in_training_and_not_at_test(data):
    agree = np.mean([int(g.y) == int(g.env) for g in data.train])
    assert abs(agree - 0.9) < 0.05
    test_agree = np.mean([int(g.y) == int(g.env) for g in data.test])
    assert abs(test_agree - 1 / 3) < 0.1
    assert np.bincount([int(g.y) for g in data.train]).tolist() == [200, 200, 200]


def test_ground_truth_marks_the_motif_edges(data):
    motif_edges = {0: 5, 1: 6, 2: 12}  # cycle, house, 3x3 grid
    for g in data.train[:30]:
        assert int(g.edge_gt.sum()) == 2 * motif_edges[int(g.y)]  # both directions
        assert g.edge_index.shape[1] == g.edge_gt.shape[0]


def test_severe_shift_grows_the_base_and_the_noise(data):
    train_nodes = np.mean([g.num_nodes for g in data.train])
    test_nodes = np.mean([g.num_nodes for g in data.test])
    assert test_nodes > train_nodes + 8
    raw = lambda split: np.concatenate([g.x[:, :N_RAW].numpy().ravel() for g in split])  # noqa: E731
    assert abs(float(np.std(raw(data.train))) - 0.1) < 0.02
    assert abs(float(np.std(raw(data.test))) - 0.3) < 0.05
    standard = SpuriousMotif(bias=0.9, num_graphs=60, seed=1)
    assert abs(np.mean([g.num_nodes for g in standard.test]) - train_nodes) < 4


def test_same_seed_same_graphs():
    a, b = SpuriousMotif(num_graphs=9, seed=3), SpuriousMotif(num_graphs=9, seed=3)
    for g, h in zip(a.train, b.train, strict=True):
        assert (g.edge_index == h.edge_index).all()


def test_node_features_carry_random_walk_encodings(data):
    g = data.train[0]
    assert g.x.shape[1] == N_FEATURES
    pe = g.x[:, N_RAW:]
    assert float(pe.min()) >= 0.0 and float(pe.max()) <= 1.0
    # first return probability is 0 without self-loops; the second is 1/degree
    assert float(pe[:, 0].abs().max()) == 0.0
