"""The quick claim test: what the quick profile measured (seeds 0-2), with stated margins.

Measured (quick, 3 seeds, 0.1.3, two threads): new task (digit mod 3, 10 % labels) DISC
0.886 vs A alone 0.911, hierarchical collaboration only 0.907, concat 0.900, fixed fusion
0.896, B alone 0.877; the selective fusion gives the parity expert 17 % of the weight.
Existing tasks after continued training, DISC vs alone: identity 0.983 vs 0.983, parity
0.986 vs 0.986.
With one thread per process (as the test suite runs under xdist) the same seeds give
DISC 0.899 vs A alone 0.920, hierarchical only 0.904, identity 0.985 vs 0.981, parity
0.989 vs 0.989: the quick numbers move by about a point with the floating-point order.
The new-task claim did not hold at this scale; the existing-task claim held. Margins: 3
points for new-task differences (about three standard errors of a 3-seed mean on 270
test images), 1 point for keeping an existing task.
"""

from pathlib import Path

import pytest

from disc_coevo.experiments import ABLATION, DISC, TWO_TASK_COEVOLUTION
from icml25_core import mean_metric, run_experiment


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    out = Path(tmp_path_factory.mktemp("two-task-coevolution"))
    return run_experiment(TWO_TASK_COEVOLUTION, profile="quick", seeds=3, out_dir=out).rows


@pytest.mark.claim
def test_collaboration_keeps_both_existing_tasks(rows):
    for task in ("identity", "parity"):
        disc = mean_metric(rows, "accuracy", f"{task}: DISC")
        assert disc >= mean_metric(rows, "accuracy", f"{task}: alone") - 0.01, task


@pytest.mark.claim
def test_new_task_gains_nothing_over_the_main_expert_at_this_scale(rows):
    alone = mean_metric(rows, "accuracy", "A alone")
    # did not hold: DISC gains less than 3 points over A alone (measured 2.5 and 2.1
    # below; issue 77's runs: |DISC - A alone| 0.020 / 0.021 / 0.002 on seeds 0-2 (Xeon,
    # AVX2 path) and 100-102). Only the side the claim is about is asserted: how far
    # below A DISC lands is inside the spread (a two-sided 0.03 bound had mean + 2 sd
    # 0.035). The hierarchical part alone is within 3 points too (0.4 and 1.6 below)
    assert mean_metric(rows, "accuracy", DISC) <= alone + 0.03
    assert mean_metric(rows, "accuracy", ABLATION) >= alone - 0.03
    # the selective fusion leans on the more confident main expert
    assert mean_metric(rows, "aux_weight", DISC) < 0.3
