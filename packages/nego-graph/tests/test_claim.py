"""The quick claim test: what the quick profile measured under the severe shift, seed 0.

With 3 seeds the quick profile put NeGo first under the severe shift (0.686 vs GSAT 0.625,
sd 0.07-0.11 over seeds, see the README); on seed 0 alone NeGo measured 0.529 against the
best baseline's 0.538: one seed cannot separate them. Asserted: NeGo is within 0.05 of
the best baseline and clearly above chance (1/3) under the severe shift; the paper's
"beats every baseline" is not asserted because it did not hold at this scale. With the
declared floors (torch 2.5, PyG 2.6) seed 0 measures 0.458 against 0.538 and this test
fails: the single-seed number moves with the torch version (open in issue 17).
"""

import pytest

from icml25_core import mean_metric, run_experiment
from nego_graph.experiments import BASELINES, METHOD, SEVERE_SHIFT


@pytest.mark.claim
def test_severe_shift_quick(tmp_path):
    result = run_experiment(
        SEVERE_SHIFT,
        profile="quick",
        seeds=[0],
        out_dir=tmp_path,
        overrides={"settings": ((0.9, "severe"),)},
    )
    acc = {
        m: mean_metric(result.rows, "test_acc", m, bias=0.9, shift="severe")
        for m in (METHOD, *BASELINES)
    }
    best = max(acc[b] for b in BASELINES)
    assert acc[METHOD] >= best - 0.05, acc
    assert acc[METHOD] >= 1 / 3 + 0.1, acc
    assert "bias 0.9 severe" in result.verdict.summary
