"""Offline text embeddings and the bundled data."""

import numpy as np
import pytest
import scanpy as sc

from scilama import embed_genes, pbmc68k_reduced, simulate_batch
from scilama.text import default_text_model


@pytest.fixture(scope="module")
def text():
    return embed_genes(["CD3E", "CD3D", "HBB", "T cell receptor alpha"])


def test_embed_genes_uses_the_bundled_model(text):
    assert text.shape == (4, 384) and list(text.index) == [
        "CD3E",
        "CD3D",
        "HBB",
        "T cell receptor alpha",
    ]
    np.testing.assert_allclose(np.linalg.norm(text.to_numpy(), axis=1), 1.0, rtol=1e-5)
    again = embed_genes(
        ["CD3E", "CD3D", "HBB", "T cell receptor alpha"], model=default_text_model()
    )
    np.testing.assert_allclose(again.to_numpy(), text.to_numpy(), atol=1e-6)


def test_descriptions_are_embedded_under_their_symbols(text):
    described = embed_genes({"TRAC": "T cell receptor alpha"})
    assert list(described.index) == ["TRAC"]
    np.testing.assert_allclose(
        described.to_numpy()[0], text.loc["T cell receptor alpha"], atol=1e-5
    )


def test_embed_genes_refuses_bad_input(tmp_path):
    with pytest.raises(ValueError, match="more than once"):
        embed_genes(["CD3E", "CD3E"])
    with pytest.raises(ValueError, match="empty"):
        embed_genes([])
    with pytest.raises(TypeError, match="not one string"):
        embed_genes("CD3E")
    with pytest.raises(FileNotFoundError, match=r"config.json"):
        embed_genes(["CD3E"], model=tmp_path)


def test_recovered_counts_give_the_bundled_raw_back():
    adata = pbmc68k_reduced()
    counts = adata.layers["counts"]
    assert np.array_equal(counts, np.round(counts)) and counts.min() >= 0
    raw = adata.raw.X.toarray()
    again = np.log1p(counts / adata.obs["n_counts"].to_numpy()[:, None] * 1e4)
    np.testing.assert_allclose(again, raw, atol=2e-3)
    assert adata.shape == (700, 765) and adata.obs["bulk_labels"].nunique() == 10


def test_simulated_batch_is_balanced_scaled_and_seeded():
    adata = sc.datasets.pbmc68k_reduced()[:200, :50].copy()
    adata.layers["counts"] = (
        np.random.default_rng(0).poisson(2.0, size=adata.shape).astype(np.float32)
    )
    a = simulate_batch(adata, sigma=1.0, seed=3)
    b = simulate_batch(adata, sigma=1.0, seed=3)
    assert a.obs["batch"].value_counts().to_dict() == {"batch0": 100, "batch1": 100}
    np.testing.assert_array_equal(a.X, b.X)
    assert a.uns["batch_factors"].shape == (2, 50)
    assert abs(float(a.X.mean())) < 0.05 and np.isfinite(a.X).all()
    with pytest.raises(KeyError, match="layer 'nope'"):
        simulate_batch(adata, counts_layer="nope")
