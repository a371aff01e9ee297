"""The quick claim test: seed 0, iris / wine / breast_cancer + 3 held-out prior tables."""

import pytest

from icml25_core import mean_metric
from tabicl_lite.experiments import BASELINES, METHOD, SMALL_TABLES


@pytest.mark.claim
def test_in_context_learning_is_competitive_with_gbdt_on_small_tables(tmp_path):
    rows = SMALL_TABLES.run(SMALL_TABLES.config("quick"), 0, tmp_path)
    acc = {m: mean_metric(rows, "accuracy", m) for m in (METHOD, *BASELINES)}
    ll = {m: mean_metric(rows, "log_loss", m) for m in (METHOD, *BASELINES)}
    # measured at release: 0.878 vs HGB 0.867, RF 0.872, LR 0.879; log-loss 0.29 vs >= 0.32
    assert acc[METHOD] >= acc["HistGradientBoosting"] - 0.02  # the claim's GBDT margin
    # tied with LR: -0.0003 on seed 0 (Xeon and AVX2 path alike), -0.0098 on seed 100;
    # mean -0.0035, sd 0.0055: the tolerance is mean - 2 sd (one point left 0.0002 on 100)
    assert acc[METHOD] >= acc["LogisticRegression"] - 0.015
    assert ll[METHOD] < min(ll[b] for b in BASELINES)  # best calibrated of the four
    verdict = SMALL_TABLES.judge(rows)
    assert "LogisticRegression" in verdict.summary
    (path,) = SMALL_TABLES.plot(rows, tmp_path)
    assert path.exists()
