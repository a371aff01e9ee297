"""The quick claim test (3 seeds, 5e4 episodes per agent): the directions the quick
profile measured, with stated margins. The single-agent (5, 3, 2) run has not levelled
off by 5e4 episodes (regret / log T still rises 60-70 % over the last decade), and the
rounds' slope grows with S and A at this scale: neither is asserted to hold."""

import numpy as np
import pytest

from fedq_gap.experiments import LOG_REGRET
from icml25_core import run_experiment


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    return run_experiment(
        LOG_REGRET, profile="quick", seeds=[0, 1, 2], out_dir=tmp_path_factory.mktemp("q")
    )


def _median(result, metric, **setting):
    vals = [
        r.metrics[metric]
        for r in result.rows
        if r.method == "FedQ-Hoeffding" and all(r.setting.get(k) == v for k, v in setting.items())
    ]
    assert vals, setting
    return float(np.median(vals))


@pytest.mark.claim
@pytest.mark.parametrize("mdp", ["2,2,2", "5,3,2"])
@pytest.mark.parametrize("M", [1, 10])
def test_regret_grows_slower_than_sqrt_t(result, mdp, M):
    exponent = _median(result, "exponent", mdp=mdp, M=M)
    assert exponent < 0.45  # margin 0.05 below sqrt T (measured 0.03-0.31)
    if (mdp, M) != ("2,2,2", 10):
        # falling over the last decade (by 0.11-0.26 here); with ten agents on (2,2,2) the
        # exponent is near 0 already (0.074 after 0.105 on seeds 0-2, 0.056 after 0.186 on
        # 100-102): whether it still falls is inside the spread (issue 77)
        assert exponent < _median(result, "exponent_prev", mdp=mdp, M=M)
    assert _median(result, "sqrt_ratio", mdp=mdp, M=M) < 0.9


@pytest.mark.claim
@pytest.mark.parametrize(("mdp", "M"), [("2,2,2", 1), ("2,2,2", 10)])
def test_regret_over_log_t_levels_off(result, mdp, M):
    # median ratio on seeds 0-2 / 100-102: (2,2,2) M=1 0.999 / 1.097, M=10 0.889 / 0.911.
    # (5,3,2) with M=10 was asserted too until issue 77: 1.168 on seeds 0-2 but 1.500 on
    # seeds 100-102, so whether it has levelled off by 5e4 episodes depends on the seeds
    # (README) and is not asserted
    assert _median(result, "log_ratio", mdp=mdp, M=M) <= 1.25


@pytest.mark.claim
@pytest.mark.parametrize("mdp", ["2,2,2", "5,3,2"])
def test_more_agents_cut_the_per_agent_regret(result, mdp):
    one, ten = _median(result, "regret", mdp=mdp, M=1), _median(result, "regret", mdp=mdp, M=10)
    assert ten < one / 3  # measured about 7x lower


@pytest.mark.claim
def test_rounds_slope_is_nearly_free_of_m(result):
    slopes = [r.metrics["rounds_slope"] for r in result.rows if r.setting.get("sweep") == "M"]
    assert len(slopes) == 4
    assert (max(slopes) - min(slopes)) / np.mean(slopes) <= 0.5
    assert result.figures
