"""Representation metrics of the scIB family: label conservation (ARI / NMI of KMeans and
Leiden clusters, silhouette) and batch mixing (batch ASW, iLISI, graph connectivity), and
their aggregate (:func:`integration_scores`).

Definitions follow scib-metrics (Luecken et al., 2022) where it has them; scikit-learn
computes ARI, NMI and the silhouette.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.sparse.csgraph import connected_components
from sklearn.cluster import KMeans
from sklearn.metrics import (
    adjusted_rand_score,
    normalized_mutual_info_score,
    silhouette_samples,
    silhouette_score,
)
from sklearn.neighbors import NearestNeighbors, kneighbors_graph

from icml25_core import as_float_array, check_choice, check_scalar


def _embedding(X: Any) -> np.ndarray:
    return as_float_array(X, "embedding", ndim=2)


def _labels(y: Any, n: int, name: str) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1 or len(y) != n:
        raise ValueError(f"{name} must be 1-D with one entry per cell ({n}), got shape {y.shape}")
    if len(np.unique(y)) < 2:
        raise ValueError(f"{name} must hold at least 2 distinct values")
    return y


def cluster(
    X: Any,
    *,
    method: str = "kmeans",
    n_clusters: int | None = None,
    resolution: float = 1.0,
    n_neighbors: int = 15,
    seed: int = 0,
) -> np.ndarray:
    """Cluster the rows of ``X`` (n, d): ``"kmeans"`` (``n_clusters``, 10 restarts) or
    ``"leiden"`` (scanpy's igraph Leiden on a ``n_neighbors`` graph at ``resolution``).
    Returns integer labels (n,)."""
    X = _embedding(X)
    check_choice(method, "method", ("kmeans", "leiden"))
    if method == "kmeans":
        if n_clusters is None:
            raise ValueError("method='kmeans' needs n_clusters")
        check_scalar(n_clusters, "n_clusters", low=2, high=len(X), integer=True)
        return KMeans(n_clusters, n_init=10, random_state=seed).fit_predict(X)
    import anndata
    import scanpy as sc

    check_scalar(resolution, "resolution", low=0, low_inclusive=False)
    check_scalar(n_neighbors, "n_neighbors", low=2, high=len(X) - 1, integer=True)
    tmp = anndata.AnnData(np.zeros((len(X), 1), np.float32), obsm={"rep": X})
    sc.pp.neighbors(tmp, n_neighbors=n_neighbors, use_rep="rep", random_state=seed)
    sc.tl.leiden(
        tmp,
        resolution=resolution,
        flavor="igraph",
        n_iterations=2,
        directed=False,
        random_state=seed,
    )
    return tmp.obs["leiden"].astype(int).to_numpy()


def label_scores(
    X: Any, labels: Any, *, method: str = "kmeans", seed: int = 0, **options: Any
) -> dict[str, float]:
    """ARI and NMI of :func:`cluster` against ``labels`` (KMeans uses as many clusters as
    labels)."""
    X = _embedding(X)
    y = _labels(labels, len(X), "labels")
    if method == "kmeans":
        options.setdefault("n_clusters", len(np.unique(y)))
    pred = cluster(X, method=method, seed=seed, **options)
    return {
        "ARI": float(adjusted_rand_score(y, pred)),
        "NMI": float(normalized_mutual_info_score(y, pred)),
    }


def silhouette(X: Any, labels: Any, *, rescale: bool = False) -> float:
    """Mean silhouette width of ``labels`` in ``X`` (euclidean), in [-1, 1]; with
    ``rescale=True`` scIB's cell-type ASW ``(s + 1) / 2``, in [0, 1] (scib-metrics'
    ``silhouette_label``)."""
    X = _embedding(X)
    s = float(silhouette_score(X, _labels(labels, len(X), "labels")))
    return (s + 1.0) / 2.0 if rescale else s


def batch_asw(X: Any, batches: Any, labels: Any) -> float:
    """scIB's batch ASW: within each label, the silhouette ``s`` of the batches, scored
    ``1 - |s|`` per cell, averaged per label, then over labels. 1 = batches mixed, 0 =
    separated. Labels present in one batch only are skipped (as scib-metrics)."""
    X = _embedding(X)
    b = _labels(batches, len(X), "batches")
    y = np.asarray(labels)
    if y.shape != b.shape:
        raise ValueError(f"labels must have one entry per cell ({len(X)}), got shape {y.shape}")
    scores = []
    for label in np.unique(y):
        rows = y == label
        if len(np.unique(b[rows])) < 2 or rows.sum() < 3:
            continue
        s = silhouette_samples(X[rows], b[rows])
        scores.append(float(np.mean(1.0 - np.abs(s))))
    if not scores:
        raise ValueError("no label holds cells of two batches: batch ASW is undefined")
    return float(np.mean(scores))


def _entropy_matched_weights(d: np.ndarray, perplexity: float, tol: float = 1e-5) -> np.ndarray:
    """Weights ``exp(-beta_i d_ij)`` per row of distances ``d`` (n, k), normalised, each
    row's ``beta_i`` found by bisection so the weights' entropy is ``log(perplexity)``."""
    target = np.log(perplexity)
    out = np.empty_like(d)
    for i, row in enumerate(d):
        row = row - row.min()
        lo, hi, beta = 0.0, np.inf, 1.0
        for _ in range(64):
            p = np.exp(-row * beta)
            total = p.sum()
            h = np.log(total) + beta * (row * p).sum() / total
            if abs(h - target) < tol:
                break
            if h > target:
                lo, beta = beta, beta * 2 if hi == np.inf else (beta + hi) / 2
            else:
                hi, beta = beta, (beta + lo) / 2
        out[i] = p / total
    return out


def lisi(X: Any, batches: Any, *, perplexity: float = 30.0) -> np.ndarray:
    """Local inverse Simpson's index of ``batches`` per cell (Korsunsky et al., 2019):
    the effective number of batches among a cell's ``3 * perplexity`` nearest neighbours
    (the cell itself excluded), weighted by ``exp(-beta d)`` of their euclidean distances
    ``d`` with ``beta`` matched to the perplexity (as Harmony's ``compute_lisi`` and
    scib-metrics' ``lisi_knn``). 1 = one batch around the cell; the number of batches =
    perfectly mixed. Returns (n,)."""
    X = _embedding(X)
    b = _labels(batches, len(X), "batches")
    check_scalar(perplexity, "perplexity", low=1)
    k = min(len(X) - 1, int(3 * perplexity))
    if k < 1:
        raise ValueError("lisi needs at least 2 cells")
    perplexity = min(perplexity, k / 3) if k < 3 * perplexity else perplexity
    dist, idx = NearestNeighbors(n_neighbors=k + 1).fit(X).kneighbors(X)
    dist, idx = dist[:, 1:], idx[:, 1:]  # drop the cell itself
    P = _entropy_matched_weights(dist, perplexity)
    codes = np.unique(b, return_inverse=True)[1]
    mass = np.zeros((len(X), codes.max() + 1))
    np.add.at(mass, (np.repeat(np.arange(len(X)), k), codes[idx].ravel()), P.ravel())
    return 1.0 / (mass**2).sum(1)


def ilisi(X: Any, batches: Any, *, perplexity: float = 30.0) -> float:
    """iLISI as scIB scales it: ``(median LISI - 1) / (n_batches - 1)``, in [0, 1]."""
    n_batches = len(np.unique(np.asarray(batches)))
    return float((np.median(lisi(X, batches, perplexity=perplexity)) - 1) / (n_batches - 1))


def graph_connectivity(
    X: Any, labels: Any, *, n_neighbors: int = 15, connection: str = "strong"
) -> float:
    """scIB's graph connectivity: on the ``n_neighbors`` nearest-neighbour graph of ``X``
    (n, d) (euclidean, the cell itself not counted), the fraction of each label's cells
    that lie in the largest connected component of the subgraph of that label's cells,
    averaged over labels. 1 = every cell type forms one connected piece after
    integration; a cell type split by batch into two separate pieces of equal size scores
    0.5.

    ``connection="strong"`` (default) takes strongly connected components of the directed
    kNN graph, as scib-metrics' ``graph_connectivity``; ``"weak"`` the components of the
    symmetrised graph, as the original scIB on scanpy's (symmetric) neighbour graph. Strong
    components are finer, so ``"strong"`` scores at most ``"weak"``.
    """
    X = _embedding(X)
    y = _labels(labels, len(X), "labels")
    check_scalar(n_neighbors, "n_neighbors", low=1, high=len(X) - 1, integer=True)
    check_choice(connection, "connection", ("strong", "weak"))
    graph = kneighbors_graph(X, n_neighbors, include_self=False).tocsr()
    scores = []
    for label in np.unique(y):
        rows = np.flatnonzero(y == label)
        _, component = connected_components(
            graph[rows][:, rows], directed=True, connection=connection
        )
        scores.append(np.bincount(component).max() / len(rows))
    return float(np.mean(scores))


def integration_scores(
    X: Any,
    labels: Any,
    batches: Any,
    *,
    n_neighbors: int = 15,
    perplexity: float = 30.0,
    seed: int = 0,
) -> dict[str, float]:
    """scIB's integration table for one embedding ``X`` (n, d), every score in [0, 1],
    higher better.

    Label conservation: ``ARI`` and ``NMI`` of KMeans clusters (as many as labels), the
    cell-type ASW ``cASW`` (:func:`silhouette`, rescaled). Batch correction: ``bASW``
    (:func:`batch_asw`), ``iLISI`` (:func:`ilisi`), ``GC`` (:func:`graph_connectivity`).
    Aggregates as Luecken et al. (2022): ``bio`` and ``batch`` the means of their three
    scores, ``overall = 0.6 bio + 0.4 batch``.
    """
    X = _embedding(X)
    km = label_scores(X, labels, method="kmeans", seed=seed)
    out = {
        "ARI": km["ARI"],
        "NMI": km["NMI"],
        "cASW": silhouette(X, labels, rescale=True),
        "bASW": batch_asw(X, batches, labels),
        "iLISI": ilisi(X, batches, perplexity=perplexity),
        "GC": graph_connectivity(X, labels, n_neighbors=n_neighbors),
    }
    out["bio"] = float(np.mean([out["ARI"], out["NMI"], out["cASW"]]))
    out["batch"] = float(np.mean([out["bASW"], out["iLISI"], out["GC"]]))
    out["overall"] = 0.6 * out["bio"] + 0.4 * out["batch"]
    return out
