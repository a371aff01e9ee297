"""Representation metrics against closed forms and scikit-learn."""

import numpy as np
import pytest
from sklearn.metrics import silhouette_samples

from scilama.metrics import (
    _entropy_matched_weights,
    batch_asw,
    graph_connectivity,
    ilisi,
    label_scores,
    lisi,
)


def _blobs(n=60, k=3, spread=0.05, seed=0):
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(k), n // k)
    centres = np.eye(k, 5) * 10
    return centres[labels] + spread * rng.normal(size=(len(labels), 5)), labels


@pytest.mark.parametrize("method", ["kmeans", "leiden"])
def test_separated_clusters_score_one(method):
    X, y = _blobs()
    scores = label_scores(
        X, y, method=method, **({"resolution": 0.3} if method == "leiden" else {})
    )
    assert scores == {"ARI": pytest.approx(1.0), "NMI": pytest.approx(1.0)}


def test_lisi_is_one_for_separated_batches_and_two_for_paired_copies():
    X, y = _blobs(spread=0.5)
    separated = lisi(X, y, perplexity=5)  # each label its own batch, far apart
    np.testing.assert_allclose(separated, 1.0, atol=1e-6)
    assert ilisi(X, y, perplexity=5) == pytest.approx(0.0, abs=1e-6)
    # every cell has a near-copy in the other batch: half the neighbourhood is each batch
    rng = np.random.default_rng(1)
    base = rng.normal(size=(100, 3))
    both = np.vstack([base, base + 1e-3 * rng.normal(size=base.shape)])
    batches = np.repeat(["a", "b"], 100)
    # (the copy itself, in the other batch, carries the largest weight: a little under 2)
    assert 1.75 <= np.median(lisi(both, batches, perplexity=10)) <= 2.0  # measured 1.83


def test_lisi_kernel_matches_the_perplexity():
    d2 = np.random.default_rng(2).random((5, 30)) * 4
    P = _entropy_matched_weights(d2, perplexity=8)
    np.testing.assert_allclose(P.sum(1), 1.0)
    entropy = -(P * np.log(P)).sum(1)
    np.testing.assert_allclose(entropy, np.log(8), atol=1e-4)


def test_batch_asw_is_scib_aggregation_of_sklearn_silhouettes():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(90, 4))
    labels = np.repeat([0, 1, 2], 30)
    batches = rng.integers(0, 2, 90)
    X[batches == 1] += np.array([1.5, 0, 0, 0])
    want = np.mean(
        [
            np.mean(1 - np.abs(silhouette_samples(X[labels == k], batches[labels == k])))
            for k in range(3)
        ]
    )
    assert batch_asw(X, batches, labels) == pytest.approx(want)
    far = X.copy()
    far[batches == 1] += 100.0  # batches separated: silhouette ~1, score ~0
    assert batch_asw(far, batches, labels) < 0.05


def test_metric_inputs_are_checked():
    X, y = _blobs()
    with pytest.raises(ValueError, match="one entry per cell"):
        label_scores(X, y[:-1])
    with pytest.raises(ValueError, match="at least 2 distinct"):
        lisi(X, np.zeros(len(X)))
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="embedding must be finite"):
        label_scores(bad, y)


def test_graph_connectivity_is_the_largest_component_fraction_per_label():
    """Oracle: label 0 in one blob, label 1 split into two far-apart blobs of 40 cells
    (more than n_neighbors, so the kNN graph never bridges them): (1 + 0.5) / 2."""
    rng = np.random.default_rng(0)
    blob = lambda centre, n: rng.normal(size=(n, 3)) * 0.1 + centre  # noqa: E731
    X = np.vstack([blob(0.0, 80), blob(50.0, 40), blob(-50.0, 40)])
    labels = np.repeat([0, 1, 1], [80, 40, 40])
    assert graph_connectivity(X, labels, n_neighbors=10) == pytest.approx(0.75)
    joined = np.vstack([blob(0.0, 80), blob(50.0, 80)])  # label 1 in one blob
    assert graph_connectivity(joined, labels, n_neighbors=10) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="one entry per cell"):
        graph_connectivity(X, labels[:-1])
    with pytest.raises(ValueError, match="n_neighbors"):
        graph_connectivity(X, labels, n_neighbors=0)
