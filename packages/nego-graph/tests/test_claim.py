"""The quick claim test: the quick profile's severe-shift setting, seeds 0, 1, 2.

The quick profile measured OOD accuracy under the severe shift (3 seeds) NeGo 0.634, GSAT
0.656, VREx 0.560, ERM 0.536, IRM 0.439 (see the README): the paper's "NeGo beats every
baseline" did not hold at this scale, and the seed spread (sd 0.09-0.12) is larger than
the NeGo-GSAT gap. Asserted on the 3-seed means: NeGo above IRM and clearly above chance
(1/3); until issue 77 also within 0.05 of the best baseline and 0.05 above ERM and VREx,
which failed on other seeds and CPU kernels (see the test). Three seeds, not
one: seed 0 alone moved from 0.529 to 0.458 between torch versions (ci/floors.sh), while
the mean over seeds is the figure the README reports. About 80 s on 2 cores.
"""

import pytest

from icml25_core import mean_metric, run_experiment
from nego_graph.experiments import BASELINES, METHOD, SEVERE_SHIFT


@pytest.mark.claim
def test_severe_shift_quick(tmp_path):
    result = run_experiment(
        SEVERE_SHIFT,
        profile="quick",
        seeds=[0, 1, 2],
        out_dir=tmp_path,
        overrides={"settings": ((0.9, "severe"),)},
    )
    acc = {
        m: mean_metric(result.rows, "test_acc", m, bias=0.9, shift="severe")
        for m in (METHOD, *BASELINES)
    }
    # 3-seed means, NeGo minus baseline, on seeds 0-2 (Xeon) / seeds 0-2 (AVX2 kernels) /
    # seeds 100-102 / 200-202: best baseline -0.033 / +0.040 / -0.095 / -0.036, ERM +0.083
    # / +0.096 / +0.027 / -0.036, VREx +0.083 / +0.040 / +0.012 / -0.004, IRM +0.176 /
    # +0.129 / +0.104 / +0.056. Only IRM's gap clears twice its spread (mean 0.116, sd
    # 0.050: margin mean - 2 sd; 0.06, set before seeds 200-202 ran, failed there); the
    # others are inside the spread over seeds and machines (README) and are not asserted
    assert acc[METHOD] >= acc["IRM"] + 0.01, acc
    # far above chance: 0.634 / 0.641 / 0.572 / 0.576
    assert acc[METHOD] >= 1 / 3 + 0.1, acc
    assert "bias 0.9 severe" in result.verdict.summary
