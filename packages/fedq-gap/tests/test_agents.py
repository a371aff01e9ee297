"""The learners: identities between the server's two cases, the single-agent limit,
optimism, and bounds."""

import numpy as np
import pytest

from fedq_gap import FedQBernstein, FedQHoeffding, TabularMDP, UCBHoeffding, random_mdp


def _deterministic_mdp(H=3, S=3, A=2, seed=0):
    rng = np.random.default_rng(seed)
    nxt = rng.integers(0, S, size=(H, S, A))
    P = np.zeros((H, S, A, S))
    np.put_along_axis(P, nxt[..., None], 1.0, axis=-1)
    return TabularMDP(P, rng.random((H, S, A)), H)


def test_aggregated_update_equals_sequential_with_deterministic_transitions():
    mdp = _deterministic_mdp()
    aggregated = FedQHoeffding(mdp, M=3, seed=0, i0=0)
    sequential = FedQHoeffding(mdp, M=3, seed=0, i0=10**12)
    a, s = aggregated.run(400), sequential.run(400)
    np.testing.assert_allclose(aggregated.Q_, sequential.Q_, rtol=0, atol=1e-10)
    assert np.array_equal(a.episodes, s.episodes)
    # with random transitions the two cases differ (the order of the visits matters)
    mdp = random_mdp(3, 3, 2, seed=0)
    q0 = FedQHoeffding(mdp, M=3, seed=0, i0=0)
    q1 = FedQHoeffding(mdp, M=3, seed=0, i0=10**12)
    q0.run(400), q1.run(400)
    assert np.abs(q0.Q_ - q1.Q_).max() > 1e-6


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_agent_syncing_every_episode_is_ucb_hoeffding_step_for_step(seed):
    mdp = random_mdp(3, 3, 2, seed=seed)
    fed = FedQHoeffding(mdp, M=1, sync="episode", iota=4.0, seed=seed)
    ucb = UCBHoeffding(mdp, iota=4.0, seed=seed)
    rf, ru = fed.run(500), ucb.run(500)
    assert np.array_equal(fed.N_, ucb.N_)
    np.testing.assert_allclose(fed.Q_, ucb.Q_, rtol=0, atol=1e-10)
    np.testing.assert_array_equal(rf.round_regret, ru.round_regret)
    assert rf.rounds == 500


@pytest.mark.parametrize("cls", [FedQHoeffding, FedQBernstein])
def test_values_never_exceed_h_though_q_may(cls):
    mdp = random_mdp(3, 2, 2, seed=0)
    learner = cls(mdp, M=4, seed=0)
    learner.run(2000)
    assert (learner.V_ <= mdp.H).all()
    assert (learner.Q_ > mdp.H).any()  # the bonus pushes Q above H: not a bug


@pytest.mark.parametrize("cls", [FedQHoeffding, FedQBernstein])
def test_optimism_with_the_default_constant(cls):
    mdp = random_mdp(3, 2, 2, seed=4)
    learner = cls(mdp, M=4, seed=1)
    learner.run(3000)
    assert (mdp.q_star() - 1e-12 <= learner.Q_).all()


def test_regret_accounting_is_exact_and_consistent():
    mdp = random_mdp(2, 2, 2, seed=0)
    result = FedQHoeffding(mdp, M=5, seed=0).run(3000)
    assert result.T == 3000 and result.episodes[-1] == 3000
    lengths = np.diff(result.episodes, prepend=0)
    assert (lengths >= 1).all()
    total = float((lengths * result.round_regret).sum())
    assert result.regret([3000])[0] == pytest.approx(total)
    assert result.regret()[-1] == pytest.approx(total)
    # piecewise linear inside a round
    k = int(np.argmax(lengths > 2))
    start = result.episodes[k - 1] if k else 0
    mid = result.regret([start + 1])[0] - (result.regret([start])[0] if start else 0.0)
    assert mid == pytest.approx(result.round_regret[k])
    assert (np.diff(result.uploads) > 0).all()
    assert result.rounds_at([3000])[0] == result.rounds


def test_rounds_end_by_the_rule():
    mdp = random_mdp(2, 2, 2, seed=0)
    M, H = 4, mdp.H
    result = FedQHoeffding(mdp, M=M, seed=0).run(5000)
    # the first round ends after one episode (every threshold is max(1, 0) = 1)
    assert result.episodes[0] == 1
    # every episode visits (h=0, s0); before round k its count is at most M times the
    # episodes done, so round k lasts at most max(1, M * done // (M H (H+1))) episodes
    done = np.concatenate([[0], result.episodes[:-1]])
    lengths = np.diff(result.episodes, prepend=0)
    assert (lengths <= np.maximum(1, M * done // (M * H * (H + 1)))).all()
    assert lengths.max() > 1  # rounds do grow
    assert result.rounds < 5000


def test_more_agents_lower_the_per_agent_regret():
    mdp = random_mdp(2, 2, 2, seed=3)
    one = FedQHoeffding(mdp, M=1, c=0.1, seed=0).run(5000).regret([5000])[0]
    ten = FedQHoeffding(mdp, M=10, c=0.1, seed=0).run(5000).regret([5000])[0]
    assert ten < one


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"M": 0}, "M must be >= 1"),
        ({"c": -1.0}, "c must be >= 0"),
        ({"p": 1.5}, "p must be < 1"),
        ({"sync": "never"}, "sync must be one of"),
        ({"i0": -1}, "i0 must be >= 0"),
        ({"seed": "x"}, "seed must be an integer, got str 'x'"),
        ({"seed": -1}, "seed must be >= 0"),
    ],
)
def test_bad_settings_are_refused(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        FedQHoeffding(random_mdp(2, 2, 2), **kwargs)


def test_bad_runs_are_refused():
    with pytest.raises(ValueError, match="T must be >= 1"):
        FedQHoeffding(random_mdp(2, 2, 2)).run(0)
    with pytest.raises(TypeError, match="mdp must be a TabularMDP"):
        UCBHoeffding(np.zeros(3))
    with pytest.raises(TypeError, match="seed must be an integer"):
        UCBHoeffding(random_mdp(2, 2, 2), seed="x")
    result = FedQHoeffding(random_mdp(2, 2, 2)).run(10)
    with pytest.raises(ValueError, match="t must be within"):
        result.regret([11])
