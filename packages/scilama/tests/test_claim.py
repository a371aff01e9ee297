"""The quick claim test: what the quick profile measured on seed 0 (of its 3), with margins.

Measured on seed 0 (KMeans NMI against bulk_labels): PCA 0.612, beta-VAE 0.627, scVI
0.627, sciLaMA with text embeddings 0.635, with random embeddings 0.637, without
embeddings 0.624. Over the 3 quick seeds the claim did not hold either (README: text
0.613, random 0.614, none 0.616). On the simulated batch, iLISI: PCA 0.034, beta-VAE
0.011, scVI 0.706, sciLaMA (text) 0.000. About four minutes on one core (ten fits, scVI's
import among them).
"""

import pytest

from icml25_core import mean_metric, run_experiment
from scilama.experiments import (
    BATCH,
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
def test_batch_mixing(result):
    pca = _m(result, "iLISI", PCA + BATCH)
    scvi = _m(result, "iLISI", SCVI + BATCH)
    assert scvi >= pca + 0.3  # measured 0.706 vs 0.034
    # the batch covariate alone does not mix the batches in sciLaMA's latent (measured
    # 0.000; 0.007-0.081 on the other seeds): far below scVI
    assert _m(result, "iLISI", TEXT + BATCH) <= scvi - 0.3
    assert _m(result, "NMI", TEXT + BATCH) >= 0.5  # labels kept (measured 0.570)


@pytest.mark.claim
def test_the_verdict_and_figure(result):
    assert all(n in result.verdict.summary for n in (RANDOM, NONE, "iLISI"))
    assert result.figures
