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
    # the paper's claim, as measured at this scale: it does not hold
    assert _m(result, "NMI", TEXT) < _m(result, "NMI", NONE) + MARGIN  # measured +0.011
    assert _m(result, "NMI", TEXT) < _m(result, "NMI", RANDOM) + MARGIN  # measured -0.002
    assert not result.held


@pytest.mark.claim
def test_every_model_learns_the_cell_types(result):
    # a real representation: within 0.08 NMI of PCA (measured 0.62-0.64 vs 0.61)
    for name in (TEXT, RANDOM, NONE, SCVI):
        assert _m(result, "NMI", name) >= _m(result, "NMI", PCA) - 0.08, name
        assert _m(result, "Leiden NMI", name) >= 0.5, name


@pytest.mark.claim
def test_the_verdict_and_figure(result):
    assert all(n in result.verdict.summary for n in (RANDOM, NONE, PCA, SCVI))
    assert result.figures
