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

    les = auroc("LES")
    assert les > auroc("uncertainty") + 0.01  # smallest gap over the seeds 0.022
    assert les > auroc("kNN") + 0.2
    assert les > auroc("prior") + 0.2
    # smallest gap over the seeds: 0.061 on the AMD EPYC machine, 0.024 (seed 0) on an
    # Intel Xeon with AVX512-BF16; the trained VAE depends on the CPU's float kernels
    assert les > auroc("LES (polarity)") + 0.01
    assert les > auroc("likelihood") - 0.03  # seed 0: 0.014 below; seeds 1, 2: above


@pytest.mark.claim
def test_les_penalty_keeps_botorch_proposals_valid(result):
    rows = result.rows
    penalized = mean_metric(rows, "validity", "BoTorch qLogEI + LES")
    assert penalized > mean_metric(rows, "validity", "BoTorch qLogEI") + 0.1  # smallest 0.133
