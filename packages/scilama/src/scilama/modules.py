"""Gene modules and marker scores from the shared latent space.

Genes are clustered on their sciLaMA embeddings (posterior means ``mu_f``); a gene's
marker score for a group of cells is the mean latent reconstruction over those cells,
``mean_{i in group} <mu_s_i, mu_f_g>`` (the ``z_s z_f^T`` term without its bias),
standardised across groups per gene, so a high score means the gene is higher in that
group than in the others, as the model sees it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from icml25_core import check_choice, check_scalar

from .metrics import cluster


def gene_modules(
    model: Any,
    *,
    method: str = "leiden",
    n_modules: int | None = None,
    resolution: float = 1.0,
    n_neighbors: int = 15,
    seed: int = 0,
    key: str | None = "scilama_module",
) -> pd.Series:
    """Cluster the model's genes into modules on their embeddings.

    Parameters
    ----------
    model : SciLaMA
        A trained model (its gene VAE trained).
    method : {"leiden", "kmeans"}
        Leiden on a ``n_neighbors`` graph at ``resolution``, or KMeans with
        ``n_modules`` clusters.
    key : str, optional
        Also write the modules to ``model.adata.var[key]`` (genes not modelled: NaN).

    Returns
    -------
    pandas.Series
        Module (a string) per modelled gene, indexed by gene.
    """
    check_choice(method, "method", ("leiden", "kmeans"))
    E = model.get_gene_embeddings(key=None)
    labels = cluster(
        E.to_numpy(),
        method=method,
        n_clusters=n_modules,
        resolution=resolution,
        n_neighbors=min(n_neighbors, len(E) - 1),
        seed=seed,
    )
    modules = pd.Series(labels.astype(str), index=E.index, name="module")
    if key is not None:
        model.adata.var[key] = modules.reindex(model.adata.var_names).astype("category")
    return modules


def marker_scores(model: Any, groupby: str, *, adata: Any | None = None) -> pd.DataFrame:
    """Marker scores (groups x modelled genes): per gene, the group means of
    ``<mu_s, mu_f_g>`` z-scored across groups (see the module docstring)."""
    adata = model.adata if adata is None else adata
    if groupby not in adata.obs:
        raise KeyError(f"{groupby!r} is not a column of adata.obs")
    groups = adata.obs[groupby].astype(str).to_numpy()
    if len(np.unique(groups)) < 2:
        raise ValueError(f"obs[{groupby!r}] must hold at least 2 groups")
    Z = model.get_latent_representation(adata, key=None)
    E = model.get_gene_embeddings(key=None)
    names = np.unique(groups)
    centroids = np.stack([Z[groups == g].mean(0) for g in names])
    raw = centroids @ E.to_numpy().T
    std = raw.std(0, keepdims=True)
    scores = (raw - raw.mean(0, keepdims=True)) / np.where(std > 0, std, 1.0)
    return pd.DataFrame(scores, index=pd.Index(names, name=groupby), columns=E.index)


def top_markers(model: Any, groupby: str, *, n: int = 10, adata: Any | None = None) -> pd.DataFrame:
    """The ``n`` highest-scoring genes per group (columns: groups; rows: rank)."""
    check_scalar(n, "n", low=1, integer=True)
    scores = marker_scores(model, groupby, adata=adata)
    n = min(n, scores.shape[1])
    return pd.DataFrame(
        {g: scores.loc[g].nlargest(n).index.to_numpy() for g in scores.index},
        index=pd.RangeIndex(1, n + 1, name="rank"),
    )
