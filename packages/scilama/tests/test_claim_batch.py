"""The quick batch-correction claim test, on seed 0 of the quick profile, with margins from
the spread over seeds and machines (issue 77).

A single quick seed moves a lot with the seed and with the CPU's float kernels (the cell
VAE trains another path, and Leiden modules of 765 genes follow). Margins are set so that
the asserted gap's mean over the recorded runs minus twice its standard deviation stays
at or above the margin; the runs: seed 0 on an Intel Xeon (AVX-512 kernels, the recorded
release run and today's), seed 0 with torch/MKL/OpenBLAS on their AVX2 paths, seeds 3-8
on the Xeon, and seed 0 on an AMD EPYC (its figures from issue 77), one thread each.
``ci/claim_margins.md`` has the table. Six fits, scVI's import among them.
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
    # scVI - sciLaMA (text) overall, 9 runs: 0.089-0.157, mean 0.130, sd 0.025 (Xeon seed
    # 0: 0.150 at release, 0.122 today; AVX2 path 0.147; AMD EPYC passed)
    assert _m(result, "overall", SCVI) >= _m(result, "overall", TEXT) + 0.08
    assert _m(result, "iLISI", SCVI) >= _m(result, "iLISI", PCA) + 0.25  # 0.412 vs 0.047
    # the batch covariate alone does not mix the batches in sciLaMA's latent
    assert _m(result, "iLISI", TEXT) <= _m(result, "iLISI", SCVI) - 0.25  # 0.012
    for name in (TEXT, RANDOM, NONE, BETA_VAE, SCVI):
        assert _m(result, "NMI", name) >= 0.4, name  # labels kept: measured 0.50-0.61


@pytest.mark.claim
def test_text_gene_modules_recover_fewer_markers(result):
    # Leiden modules of the gene embeddings against bulk_labels' marker genes (ARI)
    # gaps to sciLaMA (text) over the runs (Xeon seed 0 at release / today / AVX2 path,
    # seeds 3-8 on the Xeon, AMD EPYC seed 0):
    text = _m(result, "marker ARI", TEXT)
    # PCA loadings: 0.397 / 0.430 / 0.432, 0.508 0.408 0.366 0.335 0.154 0.246; mean 0.364,
    # sd 0.107 (0.2 was set from seed 0 alone: seed 7 is below it)
    assert _m(result, "marker ARI", PCA) >= text + 0.15
    # no embeddings: 0.365 / 0.398 / 0.385, 0.418 0.440 0.264 0.462 0.237 0.308; mean 0.364,
    # sd 0.078
    assert _m(result, "marker ARI", NONE) >= text + 0.2
    # random embeddings: 0.127 / 0.126 / 0.155, 0.148 0.183 0.121 0.116 0.056 0.142, and
    # 0.038 on the AMD EPYC (random 0.203, text 0.166); mean 0.121, sd 0.044. The size of
    # this gap is inside the spread over machines (the 0.05 set from the Xeon failed on the
    # EPYC): only its direction is asserted, which held in all ten runs
    assert _m(result, "marker ARI", RANDOM) > text


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
