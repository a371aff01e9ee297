"""The quick claim test: what the quick profile measured (seed 0), with stated margins.

Measured on the quick profile (two-layer GRU VAE, 3 seeds): AUROC LES 0.864 / 0.927 /
0.927, likelihood 0.878 / 0.906 / 0.900, MC-dropout uncertainty 0.812 / 0.905 / 0.846,
polarity LES 0.732 / 0.837 / 0.866, kNN about 0.6, prior about 0.4; BoTorch validity
0.27 / 0.37 / 0.40 without and 0.40 / 0.57 / 0.80 with the LES penalty; gradient ascent
at the reference's step length stays in the data region, and its penalized runs are not
reliably more valid. The test asserts, on seed 0, the parts that held in every seed,
with margins below the smallest observed gap. LES beats the likelihood on the mean but
not on seed 0 (0.864 vs 0.878): that comparison is only bounded here (LES at most 0.03
below), not asserted as a win.
"""

from pathlib import Path

import pytest

from icml25_core import mean_metric, run_experiment
from les_lso.experiments import OVER_EXPLORATION


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    out = tmp_path_factory.mktemp("over-exploration")
    return run_experiment(OVER_EXPLORATION, profile="quick", seeds=1, out_dir=Path(out))


@pytest.mark.claim
def test_les_tells_valid_from_invalid_decodes_better_than_the_baselines(result):
    rows = result.rows

    def auroc(method):
        return mean_metric(rows, "auroc", method)

    # Gaps over nine runs (issue 77): the README's seeds 0-2 on an AMD EPYC, the same on an
    # Intel Xeon, and here seed 0 (Xeon), seed 0 with AVX2 kernels and seed 100. The
    # trained VAE depends on the CPU's float kernels. Margins: at most mean - 2 sd.
    les = auroc("LES")
    # uncertainty: EPYC 0.052 0.022 0.081, here 0.042 0.071 0.089 (mean 0.060, sd 0.025):
    # mean - 2 sd is 0.009, so the direction only (it was +0.01)
    assert les > auroc("uncertainty")
    assert les > auroc("kNN") + 0.2  # 0.33-0.36 here
    assert les > auroc("prior") + 0.2  # 0.55-0.56 here
    # polarity: EPYC 0.132 0.090 0.061, Xeon 0.024 0.118 0.082, here 0.024 0.084 0.068
    # (mean 0.076, sd 0.037): the direction only (it was +0.01)
    assert les > auroc("LES (polarity)")
    # likelihood: EPYC -0.014 0.021 0.027, here 0.027 0.033 0.014 (mean 0.018, sd 0.017):
    # LES is not worse by more than 0.03; that it is better is inside the spread
    assert les > auroc("likelihood") - 0.03


@pytest.mark.claim
def test_les_penalty_keeps_botorch_proposals_valid(result):
    rows = result.rows
    penalized = mean_metric(rows, "validity", "BoTorch qLogEI + LES")
    assert penalized > mean_metric(rows, "validity", "BoTorch qLogEI") + 0.1  # smallest 0.133
