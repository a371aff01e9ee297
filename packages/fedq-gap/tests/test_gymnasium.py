"""The gymnasium toy-text adapter."""

import numpy as np
import pytest

from fedq_gap import FedQHoeffding, from_gymnasium

gym = pytest.importorskip("gymnasium")


def test_frozen_lake_is_read_exactly():
    env = gym.make("FrozenLake-v1", map_name="4x4", is_slippery=True)
    mdp = from_gymnasium(env, H=20)
    assert (mdp.S, mdp.A, mdp.H, mdp.s0) == (17, 4, 20, 0)
    table = env.unwrapped.P
    # state 14, action 2 (right): a third each to 13 (down-left), 15 (goal, reward 1), 10
    expected = np.zeros(17)
    for prob, nxt, _, terminated in table[14][2]:
        expected[16 if terminated else nxt] += prob
    np.testing.assert_allclose(mdp.P[0, 14, 2], expected)
    assert mdp.R[0, 14, 2] == pytest.approx(sum(p * r for p, _, r, _ in table[14][2]))
    assert mdp.v_star()[0, 0] > 0  # the goal is reachable within 20 steps
    FedQHoeffding(mdp, M=2, seed=0).run(50)


def test_rewards_outside_the_unit_interval_are_rescaled():
    env = gym.make("CliffWalking-v1")
    mdp = from_gymnasium(env, H=5)
    assert mdp.R.min() >= 0 and mdp.R.max() <= 1


def test_an_env_without_a_model_is_refused():
    with pytest.raises(ValueError, match="tabular model"):
        from_gymnasium(gym.make("CartPole-v1"), H=5)


def test_a_next_state_outside_the_table_is_named():
    class Broken:
        def __init__(self):
            self.P = {0: {0: [(1.0, 1, 0.0, False)]}, 1: {0: [(1.0, 7, 1.0, False)]}}

    with pytest.raises(ValueError, match=r"env\.P\[1\]\[0\] leads to next state 7, outside"):
        from_gymnasium(Broken(), H=2, s0=0)
