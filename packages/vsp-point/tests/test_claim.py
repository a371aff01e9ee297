"""The quick claim test: what the quick profile measured on seed 0 (of its 3), with margins.

Measured on seed 0 (test accuracy, 7 unseen shapes, 24 test clouds each): head only 0.458,
DAPT 0.542, DAPT with its rank widened to the same trainable count as VSP + HAA 0.554,
DAPT + concatenated 2-D features 0.583, VSP + HAA 0.679. Over the 3 quick seeds the claim
held (README: VSP + HAA 0.675, concat 0.619), though concat won seed 2 by 0.006. About
90 s on two cores (two pretrainings and five fine-tunings).
"""

import pytest

from icml25_core import mean_metric, run_experiment
from vsp_point.experiments import (
    CONCAT,
    DAPT,
    DAPT_MATCHED,
    HAA,
    HEAD,
    PEFT_SEMANTIC_PROMPT,
)


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    out = tmp_path_factory.mktemp("claim")
    return run_experiment(PEFT_SEMANTIC_PROMPT, profile="quick", seeds=[0], out_dir=out)


def _acc(result, name):
    return mean_metric(result.rows, "accuracy", name)


def _trainable(result, name):
    return mean_metric(result.rows, "trainable", name)


@pytest.mark.claim
def test_vsp_haa_beats_dapt_at_its_own_and_at_an_equal_budget(result):
    assert _acc(result, HAA) >= _acc(result, DAPT) + 0.05  # measured +0.137
    assert _acc(result, HAA) >= _acc(result, DAPT_MATCHED) + 0.05  # measured +0.125
    budget = _trainable(result, HAA)
    assert abs(_trainable(result, DAPT_MATCHED) - budget) <= 0.01 * budget


@pytest.mark.claim
def test_vsp_haa_beats_concatenated_2d_features(result):
    # HAA - concatenation: +0.066 on seed 0, +0.048 on its AVX2 path, +0.024 on seed 100;
    # mean 0.046, sd 0.021: mean - 2 sd is 0.004, so only the direction is asserted (the
    # 0.03 failed on seed 100)
    assert _acc(result, HAA) >= _acc(result, CONCAT)


@pytest.mark.claim
def test_adapters_beat_a_head_on_frozen_features(result):
    assert _acc(result, DAPT) >= _acc(result, HEAD) + 0.04  # measured +0.084
    assert _trainable(result, HEAD) < _trainable(result, DAPT) < _trainable(result, HAA)


@pytest.mark.claim
def test_the_verdict_and_figure(result):
    assert result.held and all(n in result.verdict.summary for n in (DAPT, DAPT_MATCHED, CONCAT))
    assert result.figures
