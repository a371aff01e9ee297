"""The quick claim test: what the quick profile measured on seed 0 (of its 3), with margins.

Measured on seed 0 (KMeans NMI against bulk_labels): PCA 0.612, beta-VAE 0.627, scVI
0.627, sciLaMA with text embeddings 0.635, with random embeddings 0.637, without
embeddings 0.624. Over the 3 quick seeds the claim did not hold either (README: text
0.613, random 0.614, none 0.616). Six fits, scVI's import among them (the batch block
moved to ``pbmc-batch`` in 0.2, test_claim_batch.py).
"""

import pytest

from icml25_core import mean_metric, run_experiment
from scilama.experiments import (
    MARGIN,
    NONE,
    PBMC_REPRESENTATION,
    PCA,
    RANDOM,
    SCVI,
    TEXT,
)


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    out = tmp_path_factory.mktemp("claim")
    return run_experiment(PBMC_REPRESENTATION, profile="quick", seeds=[0], out_dir=out)


def _m(result, metric, name):
    return mean_metric(result.rows, metric, name)


@pytest.mark.claim
def test_text_embeddings_do_not_beat_the_controls_here(result):
    # the paper's claim, as measured at this scale: it does not hold. Text - random:
    # -0.002 on seed 0 (Xeon and AVX2 path alike), +0.003 on seed 100: text does not beat
    # random embeddings by the claim's margin, so the verdict is "did not hold"
    assert _m(result, "NMI", TEXT) < _m(result, "NMI", RANDOM) + MARGIN
    assert not result.held
    # text - no embeddings: +0.012 on seed 0, -0.053 on seed 100. Whether text is ahead
    # by less than the margin on one seed is inside that spread (seed 0 left 0.008);
    # what holds is that the difference is small either way (mean |d| + 2 sd: 0.073)
    assert abs(_m(result, "NMI", TEXT) - _m(result, "NMI", NONE)) <= 0.075


@pytest.mark.claim
def test_every_model_learns_the_cell_types(result):
    # a real representation: close to PCA's NMI. The worst model - PCA: +0.011 on seed 0
    # (Xeon and AVX2 path), -0.068 on seed 100 (PCA 0.658, sciLaMA 0.591-0.647); mean
    # -0.015, sd 0.046: the tolerance is mean - 2 sd (0.08, set from seed 0, left 0.012)
    for name in (TEXT, RANDOM, NONE, SCVI):
        assert _m(result, "NMI", name) >= _m(result, "NMI", PCA) - 0.11, name
        assert _m(result, "Leiden NMI", name) >= 0.5, name


@pytest.mark.claim
def test_the_verdict_and_figure(result):
    assert all(n in result.verdict.summary for n in (RANDOM, NONE, PCA, SCVI))
    assert result.figures
