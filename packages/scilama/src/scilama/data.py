"""From an AnnData to tensors: the expression matrix (dense or sparse), covariates, and
gene embeddings aligned to ``adata.var_names``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from icml25_core import check_array

GeneEmbeddings = Any  # DataFrame | array | path | a mapping or sequence of them

SCALED_MEAN_TOL = 0.1
SCALED_STD_TOL = 0.2


def expression_matrix(adata: Any, layer: str | None = None) -> np.ndarray | sp.csr_matrix:
    """``adata.X`` or ``adata.layers[layer]`` as float32 (dense, or CSR when sparse),
    checked finite. Shape (cells, genes)."""
    if layer is None:
        X = adata.X
        where = "adata.X"
    else:
        if layer not in adata.layers:
            raise KeyError(f"layer {layer!r} not in adata.layers {list(adata.layers)}")
        X = adata.layers[layer]
        where = f"adata.layers[{layer!r}]"
    if X is None:
        raise ValueError(f"{where} is empty (None)")
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=np.float32)
        check_array(X.data, where, finite=True, nonempty=False)
        return X
    X = np.asarray(X)
    check_array(X, where, ndim=2)
    return X.astype(np.float32, copy=False)


def looks_scaled(X: np.ndarray | sp.csr_matrix) -> tuple[bool, float, float]:
    """The official check: global mean within 0.1 of 0 and standard deviation within 0.2
    of 1. Returns (ok, mean, std)."""
    if sp.issparse(X):
        n = X.shape[0] * X.shape[1]
        mean = float(X.sum(dtype=np.float64) / n)
        std = float(np.sqrt(max(X.multiply(X).sum(dtype=np.float64) / n - mean**2, 0.0)))
    else:
        mean, std = float(X.mean(dtype=np.float64)), float(X.std(dtype=np.float64))
    ok = abs(mean) < SCALED_MEAN_TOL and abs(std - 1.0) < SCALED_STD_TOL
    return ok, mean, std


def scale_genes(X: np.ndarray | sp.csr_matrix, max_value: float | None = 10.0) -> np.ndarray:
    """Each gene to zero mean and unit variance (ddof 0; constant genes become 0), then
    clipped to ``[-max_value, max_value]`` (scanpy's ``pp.scale`` convention). Dense out."""
    D = X.toarray() if sp.issparse(X) else np.array(X, dtype=np.float32)
    mean = D.mean(0, dtype=np.float64)
    std = D.std(0, dtype=np.float64)
    std[std == 0] = 1.0
    D = ((D - mean) / std).astype(np.float32)
    if max_value is not None:
        np.clip(D, -max_value, max_value, out=D)
    return D


# -- covariates -------------------------------------------------------------------------


@dataclass
class CovariateEncoder:
    """One-hot categorical and z-scored continuous ``obs`` columns, fitted on training cells
    (the official encoding state, saved with a model).

    Attributes
    ----------
    categorical : dict of str to list of str
        Column -> its categories in one-hot order.
    continuous : dict of str to (mean, std)
        Column -> training mean and standard deviation.
    """

    categorical: dict[str, list[str]] = field(default_factory=dict)
    continuous: dict[str, tuple[float, float]] = field(default_factory=dict)

    @classmethod
    def fit(
        cls,
        obs: pd.DataFrame,
        categorical: Sequence[str] = (),
        continuous: Sequence[str] = (),
    ) -> CovariateEncoder:
        """Learn categories and scales from ``obs`` (the training cells)."""
        enc = cls()
        for key in categorical:
            values = _obs_column(obs, key)
            if values.isna().any():
                raise ValueError(f"obs[{key!r}] has missing values; fill or drop those cells")
            enc.categorical[key] = sorted(values.astype(str).unique().tolist())
        for key in continuous:
            values = pd.to_numeric(_obs_column(obs, key), errors="coerce").to_numpy(float)
            if not np.isfinite(values).all():
                raise ValueError(f"obs[{key!r}] must be numeric and finite in every cell")
            std = float(values.std())
            enc.continuous[key] = (float(values.mean()), std if std > 0 else 1.0)
        return enc

    @property
    def width(self) -> int:
        """Number of encoded columns."""
        return sum(len(c) for c in self.categorical.values()) + len(self.continuous)

    def transform(self, obs: pd.DataFrame) -> np.ndarray:
        """``obs`` -> (cells, width) float32. A category unseen in training is an error."""
        parts = [np.zeros((len(obs), 0), np.float32)]
        for key, cats in self.categorical.items():
            values = _obs_column(obs, key).astype(str).to_numpy()
            unknown = sorted(set(values) - set(cats))
            if unknown:
                raise ValueError(
                    f"obs[{key!r}] has categories {unknown[:5]} not seen in training {cats[:10]}"
                )
            index = {c: i for i, c in enumerate(cats)}
            onehot = np.zeros((len(obs), len(cats)), np.float32)
            onehot[np.arange(len(obs)), [index[v] for v in values]] = 1.0
            parts.append(onehot)
        for key, (mean, std) in self.continuous.items():
            values = pd.to_numeric(_obs_column(obs, key), errors="coerce").to_numpy(float)
            if not np.isfinite(values).all():
                raise ValueError(f"obs[{key!r}] must be numeric and finite in every cell")
            parts.append(((values - mean) / std).astype(np.float32)[:, None])
        return np.concatenate(parts, axis=1)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"categorical": self.categorical, "continuous": self.continuous}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CovariateEncoder:
        """Inverse of :meth:`to_dict`."""
        return cls(
            {str(k): list(map(str, v)) for k, v in data.get("categorical", {}).items()},
            {str(k): (float(v[0]), float(v[1])) for k, v in data.get("continuous", {}).items()},
        )


def _obs_column(obs: pd.DataFrame, key: str) -> pd.Series:
    if key not in obs.columns:
        raise KeyError(f"{key!r} is not a column of adata.obs (columns: {list(obs.columns)[:20]})")
    return obs[key]


# -- gene embeddings --------------------------------------------------------------------


def read_embedding_parquet(path: str | os.PathLike) -> pd.DataFrame:
    """A gene embedding table from parquet: the official layout (columns ``gene_id`` and
    ``embedding``, one list per row) or a wide table (a ``gene_id`` column or the index,
    one numeric column per dimension). Returns a DataFrame indexed by gene."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"gene embedding file {str(path)!r} does not exist")
    try:
        df = pd.read_parquet(path)
    except Exception as err:  # pyarrow raises several types for a corrupt file
        raise ValueError(f"could not read gene embedding file {str(path)!r}: {err}") from err
    if "embedding" in df.columns:
        if "gene_id" not in df.columns:
            raise ValueError(f"{str(path)!r} has an 'embedding' column but no 'gene_id' column")
        rows = [np.asarray(e, dtype=np.float32).ravel() for e in df["embedding"]]
        if len({r.size for r in rows}) > 1:
            raise ValueError(f"{str(path)!r}: embeddings of different lengths")
        return pd.DataFrame(np.vstack(rows), index=df["gene_id"].astype(str).to_numpy())
    if "gene_id" in df.columns:
        df = df.set_index("gene_id")
    return df


def _as_table(value: Any, name: str, var_names: pd.Index) -> pd.DataFrame:
    if isinstance(value, str | os.PathLike):
        value = read_embedding_parquet(value)
    if isinstance(value, pd.DataFrame):
        table = value.copy()
        table.index = table.index.astype(str)
    else:
        arr = np.asarray(value)
        if arr.ndim != 2 or arr.shape[0] != len(var_names):
            raise ValueError(
                f"gene embedding {name!r}: an array without gene names must have one row per "
                f"gene of adata ({len(var_names)}), got shape {arr.shape}; pass a DataFrame "
                "indexed by gene symbol otherwise"
            )
        table = pd.DataFrame(arr, index=var_names.astype(str))
    if table.index.has_duplicates:
        dup = table.index[table.index.duplicated()].unique().tolist()[:5]
        raise ValueError(f"gene embedding {name!r} lists genes more than once: {dup}")
    try:
        values = table.to_numpy(dtype=np.float32)
    except (TypeError, ValueError) as err:
        raise TypeError(f"gene embedding {name!r} must be numeric: {err}") from err
    check_array(values, f"gene embedding {name!r}", ndim=2)
    return pd.DataFrame(values, index=table.index)


def normalise_modalities(gene_embeddings: GeneEmbeddings) -> dict[str, Any]:
    """``None`` -> ``{}``; one table -> ``{"embedding": table}``; a sequence -> numbered
    names; a mapping stays (names are modality names)."""
    if gene_embeddings is None:
        return {}
    if isinstance(gene_embeddings, Mapping):
        if not gene_embeddings:
            raise ValueError("gene_embeddings is an empty mapping; pass None for none")
        return {str(k): v for k, v in gene_embeddings.items()}
    if isinstance(gene_embeddings, list | tuple):
        if not gene_embeddings:
            raise ValueError("gene_embeddings is an empty sequence; pass None for none")
        return {f"embedding_{i}": v for i, v in enumerate(gene_embeddings)}
    return {"embedding": gene_embeddings}


def align_gene_embeddings(
    var_names: Sequence[str], gene_embeddings: GeneEmbeddings
) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, Any]]:
    """Intersect every modality's genes with ``var_names``, in ``var_names`` order.

    Returns
    -------
    mask : ndarray of bool, shape (n_vars,)
        Genes present in every modality (the genes modelled).
    tables : dict of str to ndarray
        Modality -> (mask.sum(), d_m) float32, rows in the order of ``var_names[mask]``.
    report : dict
        ``n_vars``, ``n_used``, ``dropped`` (genes of adata without an embedding, first 50),
        and per modality the genes it has and those of its genes not in adata.
    """
    var = pd.Index(np.asarray(var_names).astype(str))
    if var.has_duplicates:
        raise ValueError("adata.var_names has duplicates; call adata.var_names_make_unique()")
    modalities = normalise_modalities(gene_embeddings)
    tables = {name: _as_table(v, name, var) for name, v in modalities.items()}
    mask = np.ones(len(var), dtype=bool)
    for table in tables.values():
        mask &= var.isin(table.index)
    if not mask.any():
        raise ValueError(
            "no gene of adata.var_names has an embedding in every modality "
            f"(adata: {list(var[:5])}...; "
            + "; ".join(f"{n}: {list(t.index[:5])}..." for n, t in tables.items())
            + ")"
        )
    used = var[mask]
    report = {
        "n_vars": len(var),
        "n_used": int(mask.sum()),
        "dropped": var[~mask].tolist()[:50],
        "n_dropped": int((~mask).sum()),
        "modalities": {
            n: {"n_genes": len(t), "not_in_adata": int((~t.index.isin(var)).sum())}
            for n, t in tables.items()
        },
    }
    return mask, {n: t.loc[used].to_numpy() for n, t in tables.items()}, report
