"""Representation metrics against closed forms and scikit-learn."""

import numpy as np
import pytest
from sklearn.metrics import silhouette_samples
from sklearn.neighbors import NearestNeighbors

from scilama.metrics import (
    _entropy_matched_weights,
    batch_asw,
    graph_connectivity,
    ilisi,
    integration_scores,
    label_scores,
    lisi,
    silhouette,
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
    # (the copy itself, in the other batch, carries the largest weight: under 2; measured
    # 1.68 with the kernel on distances, 1.83 on squared distances as in 0.1)
    assert 1.5 <= np.median(lisi(both, batches, perplexity=10)) < 2.0


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
    assert graph_connectivity(X, labels, n_neighbors=10, connection="weak") == pytest.approx(0.75)
    assert graph_connectivity(X, labels, n_neighbors=10) <= 0.75  # strong: finer pieces
    joined = np.vstack([blob(0.0, 80), blob(50.0, 80)])  # label 1 in one blob
    assert graph_connectivity(joined, labels, n_neighbors=10, connection="weak") == 1.0


def test_graph_connectivity_strong_components_of_the_directed_graph():
    """Oracle: points 0, 1, 3, 7, 15 (gaps doubling) with one neighbour each point
    points left (0 <-> 1, 2 -> 1, 3 -> 2, 4 -> 3): strongly connected pieces {0, 1}, {2},
    {3}, {4}, so 2 / 5; weakly one piece. A second label of two points far away scores 1."""
    X = np.array([0.0, 1.0, 3.0, 7.0, 15.0, 1000.0, 1001.0])[:, None]
    labels = np.array([0, 0, 0, 0, 0, 1, 1])
    assert graph_connectivity(X, labels, n_neighbors=1) == pytest.approx((0.4 + 1.0) / 2)
    assert graph_connectivity(X, labels, n_neighbors=1, connection="weak") == 1.0
    with pytest.raises(ValueError, match="connection"):
        graph_connectivity(X, labels, n_neighbors=1, connection="both")
    with pytest.raises(ValueError, match="one entry per cell"):
        graph_connectivity(X, labels[:-1])
    with pytest.raises(ValueError, match="n_neighbors"):
        graph_connectivity(X, labels, n_neighbors=0)


def _integration_case(seed=0):
    """300 cells of 3 cell types in 2 batches, the batch a partial shift along two axes
    (some mixing, not separated), one cell type in batch 0 only (skipped by batch ASW)."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.array(["t0", "t1", "t2"]), 100)
    batches = rng.integers(0, 2, 300)
    batches[labels == "t2"] = 0
    centres = {"t0": 0.0, "t1": 4.0, "t2": -4.0}
    X = rng.normal(size=(300, 6))
    X[:, 0] += np.array([centres[t] for t in labels])
    X[:, 1:3] += 1.2 * batches[:, None]
    return X.astype(np.float32), labels, np.asarray([f"b{b}" for b in batches])


def _scib_neighbors(X, k):
    """scib-metrics' NeighborsResults of the exact ``k`` nearest neighbours (the cell
    itself first, as its pynndescent helper returns them)."""
    from scib_metrics.nearest_neighbors import NeighborsResults

    dist, idx = NearestNeighbors(n_neighbors=k).fit(X).kneighbors(X)
    return NeighborsResults(indices=idx, distances=dist)


def test_metrics_equal_scib_metrics_on_a_fixed_case():
    """The in-package scIB metrics against scib-metrics (0.5, jax) on one fixed case:
    same neighbours, same perplexity. scib-metrics counts the cell itself among its
    ``k`` neighbours (and masks it in LISI); ours excludes it, hence ``k + 1`` there."""
    import scib_metrics as sm

    X, labels, batches = _integration_case()
    assert silhouette(X, labels, rescale=True) == pytest.approx(
        float(sm.silhouette_label(X, labels)), abs=1e-5
    )
    assert batch_asw(X, batches, labels) == pytest.approx(
        float(sm.silhouette_batch(X, labels, batches)), abs=1e-5
    )
    for perplexity in (10, 30):
        k = 3 * perplexity
        want = float(sm.ilisi_knn(_scib_neighbors(X, k + 1), batches, perplexity=perplexity))
        assert ilisi(X, batches, perplexity=perplexity) == pytest.approx(want, abs=1e-4)
    got = lisi(X, batches, perplexity=10)
    assert 1.2 < np.median(got) < 1.9  # partially mixed: the case is not degenerate
    for k in (5, 15):
        want = float(sm.graph_connectivity(_scib_neighbors(X, k + 1), labels))
        assert graph_connectivity(X, labels, n_neighbors=k) == pytest.approx(want, abs=1e-12)
        assert graph_connectivity(X, labels, n_neighbors=k, connection="weak") >= want
    scores = integration_scores(X, labels, batches)
    assert scores["overall"] == pytest.approx(0.6 * scores["bio"] + 0.4 * scores["batch"])
    assert all(0.0 <= v <= 1.0 for v in scores.values())
