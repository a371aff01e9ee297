"""The quick batch-correction claim test: what the quick profile measured on seed 0 (of
its 3), with margins of about half the measured gaps.

Measured on seed 0 (3 simulated batches): overall scIB score scVI 0.593, sciLaMA (text)
0.443, random 0.448, none 0.485, beta-VAE 0.480, PCA 0.471; iLISI scVI 0.412, sciLaMA
(text) 0.012, PCA 0.047; gene modules against the marker genes (ARI): PCA 0.529, sciLaMA
without embeddings 0.497, random 0.259, text 0.132. Over the 3 quick seeds the claim did
not hold (README). Six fits, scVI's import among them.
"""

import pytest

from icml25_core import mean_metric, run_experiment
from scilama.experiments import (
    BETA_VAE,
    NONE,
    PBMC_BATCH,
    PCA,
    RANDOM,
    RANDOM_INPUT,
    SCVI,
    TEXT,
    TEXT_INPUT,
)


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    out = tmp_path_factory.mktemp("claim-batch")
    return run_experiment(PBMC_BATCH, profile="quick", seeds=[0], out_dir=out)


def _m(result, metric, name):
    return mean_metric(result.rows, metric, name)


@pytest.mark.claim
def test_scvi_integrates_better_than_scilama_here(result):
    # the paper's claim, as measured at this scale: it does not hold
    assert not result.held
    assert _m(result, "overall", SCVI) >= _m(result, "overall", TEXT) + 0.08  # +0.150
    assert _m(result, "iLISI", SCVI) >= _m(result, "iLISI", PCA) + 0.25  # 0.412 vs 0.047
    # the batch covariate alone does not mix the batches in sciLaMA's latent
    assert _m(result, "iLISI", TEXT) <= _m(result, "iLISI", SCVI) - 0.25  # 0.012
    for name in (TEXT, RANDOM, NONE, BETA_VAE, SCVI):
        assert _m(result, "NMI", name) >= 0.4, name  # labels kept: measured 0.50-0.61


@pytest.mark.claim
def test_text_gene_modules_recover_fewer_markers(result):
    # Leiden modules of the gene embeddings against bulk_labels' marker genes (ARI)
    text = _m(result, "marker ARI", TEXT)
    assert _m(result, "marker ARI", PCA) >= text + 0.2  # 0.529 vs 0.132
    assert _m(result, "marker ARI", NONE) >= text + 0.2  # 0.497
    assert _m(result, "marker ARI", RANDOM) >= text + 0.05  # 0.259


@pytest.mark.claim
def test_the_scores_are_scib_scores(result):
    cells = [r for r in result.rows if r.method not in (TEXT_INPUT, RANDOM_INPUT)]
    assert len(cells) == 6  # PCA, scVI, beta-VAE, sciLaMA x 3
    for row in cells:
        m = row.metrics
        assert all(0.0 <= m[k] <= 1.0 for k in ("cASW", "bASW", "iLISI", "GC", "overall"))
        assert m["overall"] == pytest.approx(0.6 * m["bio"] + 0.4 * m["batch"])
    # the gene encoders' raw inputs are scored on the modules only
    for name in (TEXT_INPUT, RANDOM_INPUT):
        assert {"marker ARI", "marker NMI", "modules"} <= set(
            next(r for r in result.rows if r.method == name).metrics
        )
    assert all(n in result.verdict.summary for n in (SCVI, BETA_VAE, PCA, "iLISI", "ARI"))
    assert result.figures
