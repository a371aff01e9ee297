"""Training, outputs and persistence of SciLaMA."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from scilama import SciLaMA, synthetic_cells
from scilama.losses import first_full_beta_epoch

from .conftest import TINY


def test_defaults_work_on_small_easy_data():
    # 100 cells: 90 train in one batch of the default 128
    data = synthetic_cells(100, 20, n_types=3, seed=5)
    model = SciLaMA(data).train(progress=False)  # every default: direct, up to 500 epochs
    Z = model.get_latent_representation()
    assert Z.shape == (100, 50) and np.isfinite(Z).all()
    assert data.obsm["X_scilama"] is Z
    genes = model.get_gene_embeddings()
    assert genes.shape == (20, 50) and list(genes.index) == list(data.var_names)
    epochs = len(model.history_["direct:joint"])
    assert first_full_beta_epoch() + 1 <= epochs <= 500  # never stopped before beta = 1


def test_reconstruction_beats_the_gene_mean_predictor(trained):
    X = trained._X
    mean_predictor = ((X - X.mean(0)) ** 2).mean()
    paired = ((trained.reconstruct() - X) ** 2).mean()
    assert paired <= 0.85 * mean_predictor  # measured 0.79 vs 1.00 (cell-type means: 0.59)
    latent = ((trained.reconstruct(source="latent") - X) ** 2).mean()
    assert latent < mean_predictor


def test_training_lowers_the_loss(trained):
    for phase, hist in trained.history_.items():
        # compare epochs at the same KL weight: the first and last of the beta = 0 epochs
        assert hist[25]["train_loss"] < 0.9 * hist[0]["train_loss"], phase
        assert hist[-1]["beta"] == 1.0


def test_stepwise_runs_three_phases_and_freezes_the_cell_vae_in_phase_two(
    adata, embeddings, monkeypatch
):
    changed = {}
    fit_phase = SciLaMA._fit_phase

    def recording(self, phase, *args, **kwargs):
        cell = [p.detach().clone() for p in self.network_.cell_encoder.parameters()]
        gene = [p.detach().clone() for p in self.network_.gene_encoders.parameters()]
        out = fit_phase(self, phase, *args, **kwargs)
        changed[phase] = (
            any(
                not (a == b).all()
                for a, b in zip(cell, self.network_.cell_encoder.parameters(), strict=True)
            ),
            any(
                not (a == b).all()
                for a, b in zip(gene, self.network_.gene_encoders.parameters(), strict=True)
            ),
        )
        return out

    monkeypatch.setattr(SciLaMA, "_fit_phase", recording)
    model = SciLaMA(adata, embeddings, **TINY).train("stepwise", max_epochs=3, progress=False)
    assert list(model.history_) == ["stepwise:cell", "stepwise:gene", "stepwise:joint"]
    # (cell encoder changed, gene encoders changed) per phase
    assert changed == {"cell": (True, False), "gene": (False, True), "joint": (True, True)}
    assert all(p.requires_grad for p in model.network_.parameters())
    beta_vae = SciLaMA(adata, embeddings, **TINY).train("beta_vae", max_epochs=2, progress=False)
    with pytest.raises(RuntimeError, match="gene VAE was not trained"):
        beta_vae.get_gene_embeddings()


def test_gene_embeddings_go_to_varm_with_nan_for_unmodelled_genes(adata, embeddings):
    with pytest.warns(UserWarning, match="not modelled"):
        model = SciLaMA(adata, embeddings.iloc[:30], **TINY)
    model.train("direct", max_epochs=2, progress=False)
    table = model.get_gene_embeddings()
    assert table.shape == (30, 4)
    full = adata.varm["scilama"]
    modelled = adata.var["scilama_modelled"].to_numpy()
    assert modelled.sum() == 30 and np.isnan(full[~modelled]).all()
    np.testing.assert_array_equal(full[modelled], table.loc[adata.var_names[modelled]].to_numpy())


def test_batch_covariate_and_new_cells(adata):
    adata.obs["batch"] = np.where(np.arange(adata.n_obs) % 2, "b1", "b0")
    model = SciLaMA(adata, batch_key="batch", **TINY).train("direct", max_epochs=2, progress=False)
    assert model.network_.config.n_covariates == 2
    new = adata[:10].copy()
    Z = model.get_latent_representation(new)
    np.testing.assert_allclose(
        Z, model.get_latent_representation(key=None)[:10], rtol=1e-5, atol=1e-6
    )
    new.obs["batch"] = "b9"
    with pytest.raises(ValueError, match=r"categories \['b9'\] not seen"):
        model.get_latent_representation(new)
    with pytest.raises(ValueError, match="lacks 1 of the model's 40 genes"):
        model.get_latent_representation(adata[:, 1:].copy())


def test_save_load_gives_identical_representations(tmp_path, trained):
    path = trained.save(tmp_path / "model")
    loaded = SciLaMA.load(path, trained.adata)
    np.testing.assert_array_equal(
        loaded.get_latent_representation(key=None), trained.get_latent_representation(key=None)
    )
    np.testing.assert_array_equal(
        loaded.get_gene_embeddings(key=None).to_numpy(),
        trained.get_gene_embeddings(key=None).to_numpy(),
    )
    assert loaded.history_ == json.loads(json.dumps(trained.history_))
    with pytest.raises(FileExistsError, match="overwrite=True"):
        trained.save(path)
    trained.save(path, overwrite=True)
    (path / "scilama.json").write_text("{torn")
    with pytest.raises(ValueError, match=r"scilama.json"):
        SciLaMA.load(path, trained.adata)
    with pytest.raises(FileNotFoundError, match="not a saved SciLaMA folder"):
        SciLaMA.load(tmp_path, trained.adata)


def test_save_load_without_embeddings_and_with_scaling(tmp_path, adata):
    raw = adata.copy()
    raw.X = raw.layers["counts"]
    model = SciLaMA(raw, scale=True, **TINY).train("direct", max_epochs=2, progress=False)
    assert model.network_.config.gene_input_names == ("expression",)
    # the gene VAE reads the training cells only: one input column per training cell,
    # exactly their scaled expression; no validation cell is among them
    assert model.network_.config.gene_input_dims == (len(model.train_cells_),) == (108,)
    assert not set(model.train_cells_) & set(model._val_cells)
    np.testing.assert_array_equal(
        model.network_.gene_inputs()[0].numpy(), model._X[model.train_cells_].T
    )
    loaded = SciLaMA.load(model.save(tmp_path / "m"), raw)
    np.testing.assert_array_equal(
        loaded.get_latent_representation(key=None), model.get_latent_representation(key=None)
    )


def test_training_settings_are_checked(adata):
    model = SciLaMA(adata, **TINY)
    for kwargs, match in [
        ({"mode": "joint"}, "mode"),
        ({"max_epochs": 0}, "max_epochs"),
        ({"validation_size": 1.0}, "validation_size"),
        ({"lr": float("nan")}, "lr"),
        ({"batch_size": 2.5}, "batch_size"),
    ]:
        with pytest.raises((ValueError, TypeError), match=match):
            model.train(progress=False, **kwargs)
    with pytest.raises(RuntimeError, match="train"):
        model.get_latent_representation()
    with pytest.raises(ValueError, match="fusion"):
        SciLaMA(adata, fusion="moe")
    with pytest.raises(ValueError, match="dropout"):
        SciLaMA(adata, dropout=1.5)


def test_a_loaded_model_labels_genes_by_name_whatever_the_var_order(tmp_path, trained):
    path = trained.save(tmp_path / "model")
    want = trained.get_gene_embeddings(key=None)
    shuffled = trained.adata[:, trained.adata.var_names[::-1]].copy()
    loaded = SciLaMA.load(path, shuffled)
    got = loaded.get_gene_embeddings()
    np.testing.assert_array_equal(got.loc[want.index].to_numpy(), want.to_numpy())
    varm = pd.DataFrame(shuffled.varm["scilama"], index=shuffled.var_names)
    np.testing.assert_array_equal(varm.loc[want.index].to_numpy(), want.to_numpy())
    np.testing.assert_array_equal(
        loaded.get_latent_representation(key=None), trained.get_latent_representation(key=None)
    )


def test_a_fresh_process_loads_the_model_from_its_folder(tmp_path, trained):
    path = trained.save(tmp_path / "model")
    trained.adata.write_h5ad(tmp_path / "cells.h5ad")
    script = (
        "import anndata, numpy as np, sys\n"
        "from scilama import SciLaMA\n"
        f"adata = anndata.read_h5ad({str(tmp_path / 'cells.h5ad')!r})\n"
        f"model = SciLaMA.load({str(path)!r}, adata, device='cpu')\n"
        f"np.save({str(tmp_path / 'z.npy')!r}, model.get_latent_representation(key=None))\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)
    np.testing.assert_array_equal(
        np.load(tmp_path / "z.npy"), trained.get_latent_representation(key=None)
    )
