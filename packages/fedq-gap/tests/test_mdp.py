"""Tabular MDPs: validation, exact dynamic programming against Monte Carlo, gaps."""

import numpy as np
import pytest

from fedq_gap import TabularMDP, random_mdp


def _chain():
    """Two states, two actions, H = 2: action 1 moves to state 1 (reward 1 there)."""
    P = np.zeros((2, 2, 2))
    P[:, 0, 0] = 1.0
    P[:, 1, 1] = 1.0
    R = np.array([[0.0, 0.2], [0.5, 1.0]])
    return TabularMDP(P, R, H=2, s0=0)


def test_value_iteration_by_hand():
    mdp = _chain()
    Q = mdp.q_star()
    # last step: Q_1(s, a) = R(s, a); first: R + V_1(next)
    np.testing.assert_allclose(Q[1], [[0.0, 0.2], [0.5, 1.0]])
    np.testing.assert_allclose(Q[0], [[0.0 + 0.2, 0.2 + 1.0], [0.5 + 0.2, 1.0 + 1.0]])
    np.testing.assert_allclose(mdp.v_star()[0], [1.2, 2.0])
    np.testing.assert_allclose(mdp.gaps()[0, 0], [1.0, 0.0])
    assert mdp.min_gap() == pytest.approx(0.2)
    assert mdp.regret(np.array([[1, 1], [1, 1]])) == 0.0
    assert mdp.regret(np.zeros((2, 2), dtype=int)) == pytest.approx(1.2)  # stays in 0, reward 0


def test_policy_value_equals_monte_carlo_within_error_bars():
    mdp = random_mdp(4, 3, 2, seed=5)
    rng = np.random.default_rng(0)
    pi = rng.integers(0, 2, size=(4, 3))
    n = 20_000
    s = np.full(n, mdp.s0)
    ret = np.zeros(n)
    for h in range(mdp.H):
        a = pi[h, s]
        ret += mdp.R[h, s, a]
        cdf = np.cumsum(mdp.P[h, s, a], axis=1)
        s = np.minimum((rng.random((n, 1)) > cdf).sum(1), mdp.S - 1)
    se = ret.std() / np.sqrt(n)
    assert abs(ret.mean() - mdp.policy_value(pi)[0, mdp.s0]) < 4 * se


def test_values_are_bounded_by_the_horizon():
    mdp = random_mdp(5, 3, 2, seed=1)
    V = mdp.v_star()
    assert (V <= mdp.H).all() and (V >= 0).all() and (V[-1] == 0).all()
    assert (mdp.gaps() >= -1e-12).all()


@pytest.mark.parametrize("gap", [0.05, 0.2])
def test_random_mdp_with_a_controlled_minimum_gap(gap):
    mdp = random_mdp(3, 4, 3, seed=2, min_gap=gap)
    assert mdp.min_gap() >= gap - 1e-9
    assert (mdp.R >= 0).all() and (mdp.R <= 1).all()


def test_homogeneous_inputs_broadcast():
    P = np.full((2, 2, 2), 0.5)
    mdp = TabularMDP(P, np.full((2, 2), 0.3), H=4)
    assert mdp.P.shape == (4, 2, 2, 2) and mdp.R.shape == (4, 2, 2)


@pytest.mark.parametrize(
    ("P", "R", "H", "match"),
    [
        (np.full((2, 2, 2), 0.4), np.zeros((2, 2)), 2, "sums to"),
        (np.full((2, 2, 2), 0.5), np.full((2, 2), 1.5), 2, r"rewards in \[0, 1\]"),
        (np.full((2, 2, 2), 0.5), -np.ones((2, 2)), 2, "R must be non-negative"),
        (np.full((2, 2, 2), 0.5), np.zeros((2, 2)), 0, "H must be >= 1"),
        (np.full((2, 2, 2), 0.5), np.zeros((2, 2)), None, "H must be given"),
        (np.full((2, 2, 2), np.nan), np.zeros((2, 2)), 2, "P must be finite"),
        (np.full((3, 2, 2), 0.5), np.zeros((2, 2)), 2, "shape"),
    ],
)
def test_bad_mdps_are_refused(P, R, H, match):
    with pytest.raises((ValueError, TypeError), match=match):
        TabularMDP(P, R, H)


def test_bad_policies_and_gaps_are_refused():
    mdp = _chain()
    with pytest.raises(ValueError, match="policy must be"):
        mdp.policy_value(np.zeros((3, 2), dtype=int))
    with pytest.raises(
        TypeError, match="policy must hold integer action indices, got dtype float64"
    ):
        mdp.policy_value(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="policy actions"):
        mdp.policy_value(np.full((2, 2), 5))
    with pytest.raises(ValueError, match="cannot be reached"):
        random_mdp(4, 4, 3, seed=0, min_gap=1.0)
