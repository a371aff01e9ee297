"""Data with no download: scanpy's bundled ``pbmc68k_reduced`` (with its raw counts
recovered), a simulated batch effect, and synthetic cells of any size for benchmarks."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from icml25_core import check_scalar


def recover_counts(adata: Any) -> np.ndarray:
    """Integer counts of ``pbmc68k_reduced``: its ``raw`` holds ``log1p`` of counts
    normalised to 10,000 per cell (``obs["n_counts"]``), so
    ``round(expm1(raw) * n_counts / 1e4)`` gives the counts back (largest rounding
    distance in the bundled file: 0.08). Shape (cells, genes), float32."""
    if adata.raw is None or "n_counts" not in adata.obs:
        raise ValueError("recover_counts needs adata.raw and adata.obs['n_counts']")
    raw = adata.raw.X
    raw = raw.toarray() if sp.issparse(raw) else np.asarray(raw)
    counts = np.expm1(raw.astype(np.float64)) * adata.obs["n_counts"].to_numpy()[:, None] / 1e4
    rounded = np.rint(counts)
    if np.abs(counts - rounded).max() > 0.25:
        raise ValueError("adata.raw does not hold log1p of 1e4-normalised counts")
    return rounded.astype(np.float32)


def pbmc68k_reduced() -> Any:
    """scanpy's bundled 700 PBMCs x 765 genes (no download): ``X`` scaled as shipped,
    ``obs["bulk_labels"]`` the FACS-sorted cell types (10), ``layers["counts"]`` the
    recovered raw counts (:func:`recover_counts`)."""
    import scanpy as sc

    adata = sc.datasets.pbmc68k_reduced()
    adata.layers["counts"] = recover_counts(adata)
    return adata


def preprocess(adata: Any, *, counts_layer: str = "counts", max_value: float = 10.0) -> Any:
    """The standard scanpy recipe from counts: ``normalize_total(1e4)``, ``log1p``,
    ``scale(max_value)`` into ``X``, in place. Returns ``adata``."""
    import scanpy as sc

    adata.X = adata.layers[counts_layer].copy()
    sc.pp.normalize_total(adata, target_sum=1e4)
    sc.pp.log1p(adata)
    sc.pp.scale(adata, max_value=max_value)
    return adata


def simulate_batch(
    adata: Any,
    *,
    n_batches: int = 2,
    sigma: float = 0.5,
    counts_layer: str = "counts",
    batch_key: str = "batch",
    seed: int = 0,
) -> Any:
    """A copy of ``adata`` whose cells are split at random into ``n_batches`` batches, each
    with its own per-gene log-normal count factor ``exp(N(0, sigma^2))`` applied by
    Poisson resampling of the counts; ``X`` is recomputed by :func:`preprocess`.
    ``obs[batch_key]`` holds the batch, ``uns["batch_factors"]`` (batches, genes) the
    factors."""
    check_scalar(n_batches, "n_batches", low=2, integer=True)
    check_scalar(sigma, "sigma", low=0)
    check_scalar(seed, "seed", low=0, integer=True)
    if counts_layer not in adata.layers:
        raise KeyError(f"layer {counts_layer!r} not in adata.layers {list(adata.layers)}")
    rng = np.random.default_rng(seed)
    out = adata.copy()
    counts = out.layers[counts_layer]
    counts = counts.toarray() if sp.issparse(counts) else np.asarray(counts, np.float64)
    batch = rng.permutation(np.arange(out.n_obs) % n_batches)
    factors = np.exp(rng.normal(0.0, sigma, size=(n_batches, out.n_vars)))
    out.layers[counts_layer] = rng.poisson(counts * factors[batch]).astype(np.float32)
    out.obs[batch_key] = np.asarray([f"batch{b}" for b in batch])
    out.obs[batch_key] = out.obs[batch_key].astype("category")
    out.uns["batch_factors"] = factors
    return preprocess(out, counts_layer=counts_layer)


def synthetic_cells(
    n_cells: int, n_genes: int = 765, *, n_types: int = 8, depth: float = 1.0, seed: int = 0
) -> Any:
    """Negative-binomial counts of ``n_types`` cell types (log-normal per-type gene means
    times ``depth``, dispersion 0.5), preprocessed (:func:`preprocess`);
    ``obs["cell_type"]``. A larger ``depth`` means less sampling noise. For tests and
    benchmarks at any size."""
    import anndata

    check_scalar(n_cells, "n_cells", low=2, integer=True)
    check_scalar(n_genes, "n_genes", low=1, integer=True)
    check_scalar(depth, "depth", low=0, low_inclusive=False)
    rng = np.random.default_rng(seed)
    types = rng.integers(0, n_types, n_cells)
    means = depth * np.exp(rng.normal(-1.0, 1.5, size=(n_types, n_genes)))
    mu = means[types] * rng.lognormal(0, 0.3, size=(n_cells, 1))
    r = 2.0
    counts = rng.poisson(rng.gamma(r, mu / r)).astype(np.float32)
    adata = anndata.AnnData(counts.copy(), layers={"counts": counts})
    adata.obs_names = [f"cell{i}" for i in range(n_cells)]
    adata.var_names = [f"gene{j}" for j in range(n_genes)]
    adata.obs["cell_type"] = np.asarray([f"type{t}" for t in types])
    return preprocess(adata)
