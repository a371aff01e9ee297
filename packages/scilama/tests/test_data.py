"""AnnData setup: expression checks, covariates, gene-embedding alignment, parquet."""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from scilama import CovariateEncoder, SciLaMA, align_gene_embeddings, read_embedding_parquet
from scilama.data import looks_scaled

from .conftest import TINY


def test_alignment_follows_adata_order_whatever_the_table_order(adata, embeddings):
    # the official code pairs embedding rows in sorted-symbol order with expression
    # columns in adata order; here row i of the aligned table is gene var_names[i]
    mask, tables, report = align_gene_embeddings(adata.var_names, embeddings)
    assert mask.all() and report["n_dropped"] == 0
    np.testing.assert_array_equal(tables["embedding"], embeddings.loc[adata.var_names].to_numpy())


def test_alignment_intersects_modalities_and_reports_drops(adata, embeddings):
    other = embeddings.iloc[5:].copy()  # the first 5 rows = the last 5 genes of adata
    mask, tables, report = align_gene_embeddings(adata.var_names, {"a": embeddings, "b": other})
    assert mask.sum() == adata.n_vars - 5 and not mask[-5:].any()
    assert report["n_dropped"] == 5 and report["dropped"] == list(adata.var_names[-5:])
    assert tables["a"].shape == tables["b"].shape == (adata.n_vars - 5, 6)
    with pytest.warns(UserWarning, match="5 of 40 genes have no embedding"):
        model = SciLaMA(adata, {"a": embeddings, "b": other}, **TINY)
    assert model.genes_ == list(adata.var_names[:-5])


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda e: e.set_axis([f"x{i}" for i in range(len(e))]), "no gene of adata"),
        (lambda e: e.mask(np.arange(e.size).reshape(e.shape) == 7), "must be finite"),
        (lambda e: pd.concat([e, e.iloc[:1]]), "more than once"),
        (lambda e: e.to_numpy()[:10], "one row per gene"),
        (lambda e: e.astype(str).radd("g"), "must be numeric"),
    ],
)
def test_bad_gene_embeddings_are_refused(adata, embeddings, change, match):
    with pytest.raises((ValueError, TypeError), match=match):
        SciLaMA(adata, change(embeddings), **TINY)


def test_parquet_in_both_layouts(tmp_path, embeddings):
    official = pd.DataFrame({"gene_id": embeddings.index, "embedding": list(embeddings.to_numpy())})
    official.to_parquet(tmp_path / "official.parquet")
    wide = embeddings.copy()
    wide.columns = [f"d{i}" for i in range(wide.shape[1])]
    wide.to_parquet(tmp_path / "wide.parquet")
    for name in ("official", "wide"):
        got = read_embedding_parquet(tmp_path / f"{name}.parquet")
        np.testing.assert_array_equal(got.to_numpy(), embeddings.to_numpy())
        assert list(got.index) == list(embeddings.index)
    bad = tmp_path / "corrupt.parquet"
    bad.write_bytes(b"PAR1 not really")
    with pytest.raises(ValueError, match=r"corrupt.parquet"):
        read_embedding_parquet(bad)
    with pytest.raises(FileNotFoundError, match=r"missing.parquet"):
        read_embedding_parquet(tmp_path / "missing.parquet")


def test_unscaled_or_non_finite_expression_is_refused(adata):
    raw = adata.copy()
    raw.X = raw.layers["counts"]
    with pytest.raises(ValueError, match=r"does not look scaled.*scale=True"):
        SciLaMA(raw, **TINY)
    model = SciLaMA(raw, scale=True, **TINY)  # scaled here instead
    ok, mean, _ = looks_scaled(model._X)
    assert ok and abs(mean) < 1e-3
    nan = adata.copy()
    nan.X[3, 4] = np.nan
    with pytest.raises(ValueError, match=r"adata.X must be finite"):
        SciLaMA(nan, **TINY)
    with pytest.raises(KeyError, match="layer 'nope'"):
        SciLaMA(adata, layer="nope", **TINY)


def test_sparse_expression_trains_like_dense(adata):
    dense = SciLaMA(adata, **TINY).train("direct", max_epochs=3, progress=False, seed=0)
    sparse = adata.copy()
    sparse.X = sp.csr_matrix(np.where(np.abs(adata.X) < 0.3, 0.0, adata.X))
    dense_too = adata.copy()
    dense_too.X = sparse.X.toarray()
    a = SciLaMA(sparse, check_scaling=False, **TINY).train(
        "direct", max_epochs=3, progress=False, seed=0
    )
    b = SciLaMA(dense_too, check_scaling=False, **TINY).train(
        "direct", max_epochs=3, progress=False, seed=0
    )
    np.testing.assert_array_equal(a.get_latent_representation(), b.get_latent_representation())
    assert dense.get_latent_representation().shape == (adata.n_obs, 4)


def test_covariate_encoder_fits_on_training_cells_and_refuses_unknowns():
    obs = pd.DataFrame({"batch": ["b", "a", "b", "c"], "age": [1.0, 2.0, 3.0, 6.0]})
    enc = CovariateEncoder.fit(obs, ["batch"], ["age"])
    assert enc.categorical == {"batch": ["a", "b", "c"]} and enc.width == 4
    out = enc.transform(obs)
    np.testing.assert_array_equal(out[:, :3], np.eye(3)[[1, 0, 1, 2]])
    np.testing.assert_allclose(out[:, 3], (obs.age - 3.0) / obs.age.std(ddof=0), rtol=1e-6)
    assert CovariateEncoder.from_dict(enc.to_dict()) == enc
    with pytest.raises(ValueError, match=r"categories \['z'\] not seen"):
        enc.transform(pd.DataFrame({"batch": ["z"], "age": [1.0]}))
    with pytest.raises(KeyError, match="'donor' is not a column"):
        CovariateEncoder.fit(obs, ["donor"])
    with pytest.raises(ValueError, match="numeric and finite"):
        CovariateEncoder.fit(obs.assign(age=[1.0, np.nan, 2.0, 3.0]), (), ["age"])


def test_missing_batch_key_and_not_an_anndata(adata):
    with pytest.raises(KeyError, match=r"'donor' is not a column of adata.obs"):
        SciLaMA(adata, batch_key="donor", **TINY)
    with pytest.raises(TypeError, match=r"anndata.AnnData"):
        SciLaMA(adata.X, **TINY)


def test_gene_pairs_are_invariant_to_permuting_var_names(adata, embeddings):
    # the official defect 1 would fail this: it pairs embedding rows in sorted-symbol order
    # with expression columns in adata order, so permuting var_names re-pairs the genes
    perm = np.random.default_rng(4).permutation(adata.n_vars)
    shuffled = adata[:, perm].copy()
    pairs = {}
    for data in (adata, shuffled):
        model = SciLaMA(data, embeddings, **TINY).train("direct", max_epochs=1, progress=False)
        inputs = model.network_.gene_inputs()[0].numpy()
        pairs[id(data)] = {
            g: (model._X[:, j].copy(), inputs[j]) for j, g in enumerate(model.genes_)
        }
        for j, g in enumerate(model.genes_):
            np.testing.assert_array_equal(inputs[j], embeddings.loc[g].to_numpy())
            np.testing.assert_array_equal(model._X[:, j], data[:, g].X.ravel())
    first, second = pairs.values()
    assert first.keys() == second.keys()
    for g, (x, e) in first.items():
        np.testing.assert_array_equal(x, second[g][0])
        np.testing.assert_array_equal(e, second[g][1])
