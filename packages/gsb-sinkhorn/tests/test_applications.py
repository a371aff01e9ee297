"""Random bipartite graphs, typical tables and the Gale-Ryser test."""

import numpy as np
import pytest

from gsb_sinkhorn import (
    gale_ryser_feasible,
    random_bipartite_graph,
    random_contingency_table,
    sinkhorn,
    typical_table,
)


def test_logistic_zero_cost_degrees_and_range():
    rng = np.random.default_rng(0)
    G = rng.random((30, 20)) < 0.35
    r, c = G.sum(1).astype(float), G.sum(0).astype(float)
    keep = (r > 0) & (r < 20)
    G = G[keep]
    r, c = G.sum(1).astype(float), G.sum(0).astype(float)
    P = sinkhorn(r, c, np.zeros(G.shape), 1.0, "logistic", stopThr=1e-12)
    np.testing.assert_allclose(P.sum(1), r, rtol=1e-10)
    np.testing.assert_allclose(P.sum(0), c, rtol=1e-10)
    assert np.all((P > 0) & (P < 1))


def test_regular_degrees_give_constant_probabilities():
    """By symmetry, d-regular rows and columns give p_ij = d / m exactly."""
    _, log = random_bipartite_graph(np.full(8, 3.0), np.full(8, 3.0), seed=0, log=True)
    np.testing.assert_allclose(log["probabilities"], 3 / 8, rtol=1e-10)


def test_forced_rows_and_columns():
    # row 0 isolated, row 1 complete (degree = 4 columns); the rest is free
    r = np.array([0, 4, 2, 1, 1], dtype=float)
    c = np.array([3, 2, 2, 1], dtype=float)
    A, log = random_bipartite_graph(r, c, seed=1, log=True)
    P = log["probabilities"]
    assert np.all(P[0] == 0) and np.all(P[1] == 1)
    np.testing.assert_allclose(P.sum(1), r, atol=1e-9)
    np.testing.assert_allclose(P.sum(0), c, atol=1e-9)
    assert np.all(A[0] == 0) and np.all(A[1] == 1)
    assert A.dtype == np.uint8


def test_sampled_degrees_match_in_expectation():
    rng = np.random.default_rng(2)
    G = rng.random((25, 15)) < 0.4
    r, c = G.sum(1).astype(float), G.sum(0).astype(float)
    samples = random_bipartite_graph(r, c, seed=0, size=400).sum(2)
    assert samples.shape == (400, 25)
    # each degree is a sum of <= 15 Bernoullis: std <= 1.94, so the mean of 400 has std <= 0.1
    assert np.abs(samples.mean(0) - r).max() < 0.5


@pytest.mark.parametrize(
    ("r", "c", "feasible"),
    [
        ([2, 1, 1], [1, 1, 1, 1], True),
        ([3, 3], [2, 2, 2], True),
        ([3, 3], [4, 1, 1], False),
        ([2, 2, 0], [2, 2], True),
        ([2, 2, 2], [3, 3], True),
        ([3, 1], [2, 2], False),  # 3 > number of columns
    ],
)
def test_gale_ryser(r, c, feasible):
    assert gale_ryser_feasible(r, c) is feasible


def test_gale_ryser_agrees_with_brute_force():
    """All 0/1 matrices of size 3x3: a degree pair is feasible iff some matrix has it."""
    import itertools

    seen = set()
    for bits in itertools.product([0, 1], repeat=9):
        M = np.array(bits).reshape(3, 3)
        seen.add((tuple(M.sum(1)), tuple(M.sum(0))))
    for r in itertools.product(range(4), repeat=3):
        for c in itertools.product(range(4), repeat=3):
            if sum(r) != sum(c) or sum(r) == 0:
                continue
            assert gale_ryser_feasible(r, c) == ((r, c) in seen), (r, c)


def test_typical_table_uniform_margins_closed_form():
    """Constant margins: the typical table is constant, z = s / m."""
    Z = typical_table(np.full(4, 10.0), np.full(5, 8.0))
    np.testing.assert_allclose(Z, 2.0, rtol=1e-10)


def test_typical_table_margins_and_sampling():
    rm = np.array([10.0, 20.0, 5.0])
    cm = np.array([12.0, 8.0, 15.0])
    Z = typical_table(rm, cm, tol=1e-12)
    np.testing.assert_allclose(Z.sum(1), rm, rtol=1e-10)
    np.testing.assert_allclose(Z.sum(0), cm, rtol=1e-10)
    assert np.all(Z > 0)
    T = random_contingency_table(rm, cm, seed=0, size=2000)
    assert T.shape == (2000, 3, 3)
    assert T.dtype.kind == "i" and T.min() >= 0
    # entries are geometric with mean z: the sample mean of 2000 is within 5 standard errors
    se = np.sqrt(Z * (1 + Z) / 2000)
    assert np.all(np.abs(T.mean(0) - Z) < 5 * se)


def test_size_argument():
    r, c = [2.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]
    assert random_bipartite_graph(r, c, seed=5).shape == (3, 4)
    with pytest.raises(ValueError, match="size must be >= 1"):
        random_bipartite_graph(r, c, size=0)
