"""Small AnnData objects (synthetic cell types, scaled) and gene embeddings."""

import numpy as np
import pandas as pd
import pytest

from scilama import SciLaMA, synthetic_cells

TINY = dict(hidden=(32, 16), latent_dim=4)


@pytest.fixture
def adata():
    """120 cells x 40 genes of 4 cell types, X scaled, layers["counts"]."""
    return synthetic_cells(120, 40, n_types=4, seed=0)


@pytest.fixture
def embeddings(adata):
    """A 6-d gene embedding per gene, in reversed gene order (alignment must reorder)."""
    rng = np.random.default_rng(1)
    genes = adata.var_names[::-1]
    return pd.DataFrame(rng.normal(size=(len(genes), 6)).astype(np.float32), index=genes)


@pytest.fixture(scope="module")
def trained():
    """A tiny model trained stepwise (60 epochs per phase) on 300 cells x 30 genes of 3
    types (gene means scaled by ``depth=20``: little sampling noise)."""
    data = synthetic_cells(300, 30, n_types=3, depth=20, seed=2)
    rng = np.random.default_rng(3)
    emb = pd.DataFrame(rng.normal(size=(30, 8)).astype(np.float32), index=data.var_names)
    model = SciLaMA(data, emb, hidden=(64, 32), latent_dim=8)
    model.train("stepwise", max_epochs=60, progress=False, seed=0)
    return model
