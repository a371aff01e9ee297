"""``SciLaMA``: the scvi-tools-style model a scanpy user trains on their AnnData."""

from __future__ import annotations

import copy
import json
import math
import warnings
from collections.abc import Sequence
from importlib.metadata import version as _version
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
import torch

from icml25_core import check_choice, check_scalar, select_device, track
from icml25_core.files import json_default
from icml25_core.hub import atomic_directory, recover_directory

from .data import (
    CovariateEncoder,
    GeneEmbeddings,
    align_gene_embeddings,
    expression_matrix,
    looks_scaled,
    normalise_modalities,
)
from .losses import beta_at, cell_vae_loss, first_full_beta_epoch, gene_vae_loss, joint_loss
from .nn import FUSIONS, SciLaMAConfig, SciLaMANetwork

MODES = ("direct", "stepwise", "beta_vae")
SETUP_NAME = "scilama.json"
NETWORK_DIR = "network"
OBSM_KEY = "X_scilama"
VARM_KEY = "scilama"


def _check_adata(adata: Any, name: str = "adata") -> None:
    try:
        import anndata
    except ImportError as err:  # pragma: no cover - a dependency
        raise ImportError("scilama needs anndata") from err
    if not isinstance(adata, anndata.AnnData):
        raise TypeError(f"{name} must be an anndata.AnnData, got {type(adata).__name__}")
    if adata.n_obs < 2 or adata.n_vars < 1:
        raise ValueError(f"{name} must hold at least 2 cells and 1 gene, got {adata.shape}")


class SciLaMA:
    """sciLaMA on an AnnData: a cell VAE and a gene VAE in one latent space.

    The gene VAE reads static gene embeddings (from language models, one encoder per
    modality, fused), or without them the transposed expression of the training cells;
    the two meet in the paired reconstruction ``x ~ h_s h_f^T + b`` (see
    :mod:`scilama.nn`). Cell representations are the cell posterior means
    (:meth:`get_latent_representation`), gene representations the gene posterior means
    (:meth:`get_gene_embeddings`), in the same space.

    Parameters
    ----------
    adata : anndata.AnnData
        Cells x genes. The expression (``adata.X`` or ``layer``) must be scaled per gene
        (mean 0, variance 1, e.g. ``sc.pp.scale``) because the likelihood is a squared
        error; pass ``scale=True`` to have it scaled here.
    gene_embeddings : DataFrame, array, parquet path, or a mapping / sequence of them
        Static gene embeddings indexed by gene symbol (an array must have one row per
        ``adata.var_names``); a mapping ``{"text": ..., "protein": ...}`` gives several
        modalities. Genes missing from any modality are not modelled (see
        ``gene_report_``). ``None``: the gene VAE reads the transposed expression matrix
        of the training cells.
    layer : str, optional
        Read ``adata.layers[layer]`` instead of ``adata.X``.
    batch_key : str, optional
        ``obs`` column of batches, one-hot into both cell encoder and decoder.
    categorical_covariate_keys, continuous_covariate_keys : sequence of str
        Further ``obs`` covariates (one-hot; z-scored with training statistics).
    latent_dim, hidden, dropout, batchnorm, layernorm, var_eps, fusion
        The network (:class:`~scilama.nn.SciLaMAConfig`); ``fusion`` is ``"average"``
        (the official default) or ``"poe"``.
    scale : bool
        Scale every gene to mean 0 and variance 1 (clipped at 10) before training.
    check_scaling : bool
        Refuse expression that does not look scaled (official criterion: global mean
        within 0.1 of 0, standard deviation within 0.2 of 1).
    device : str
        ``"auto"`` (cuda, then mps, then cpu), or a torch device name.

    Attributes
    ----------
    network_ : SciLaMANetwork
        The trained network (after :meth:`train`).
    history_ : dict
        Per phase, one dict per epoch: ``epoch, beta, lr, train_loss, val_loss``.
    gene_report_ : dict
        What the gene-embedding intersection kept and dropped.
    """

    def __init__(
        self,
        adata: Any,
        gene_embeddings: GeneEmbeddings = None,
        *,
        layer: str | None = None,
        batch_key: str | None = None,
        categorical_covariate_keys: Sequence[str] = (),
        continuous_covariate_keys: Sequence[str] = (),
        latent_dim: int = 50,
        hidden: Sequence[int] = (900, 400),
        dropout: float = 0.1,
        batchnorm: bool = False,
        layernorm: bool = True,
        var_eps: float = 1e-4,
        fusion: str = "average",
        scale: bool = False,
        check_scaling: bool = True,
        device: str = "auto",
    ) -> None:
        _check_adata(adata)
        check_choice(fusion, "fusion", FUSIONS)
        self.adata = adata
        self.settings: dict[str, Any] = {
            "layer": layer,
            "batch_key": batch_key,
            "categorical_covariate_keys": list(categorical_covariate_keys),
            "continuous_covariate_keys": list(continuous_covariate_keys),
            "latent_dim": latent_dim,
            "hidden": list(hidden),
            "dropout": dropout,
            "batchnorm": batchnorm,
            "layernorm": layernorm,
            "var_eps": var_eps,
            "fusion": fusion,
            "scale": scale,
            "check_scaling": check_scaling,
        }
        # validate the network sizes now, not at the first train() call
        SciLaMAConfig(
            n_genes=1,
            latent_dim=latent_dim,
            hidden=tuple(hidden),
            dropout=dropout,
            var_eps=var_eps,
            fusion=fusion,
        )
        self.device = select_device(device)
        modalities = normalise_modalities(gene_embeddings)
        if modalities:
            mask, tables, report = align_gene_embeddings(adata.var_names, modalities)
            if report["n_dropped"]:
                warnings.warn(
                    f"{report['n_dropped']} of {report['n_vars']} genes have no embedding in "
                    f"every modality and are not modelled (first: {report['dropped'][:5]}); "
                    "see gene_report_",
                    UserWarning,
                    stacklevel=2,
                )
        else:
            mask = np.ones(adata.n_vars, dtype=bool)
            tables, report = {}, {"n_vars": adata.n_vars, "n_used": adata.n_vars, "n_dropped": 0}
        self.gene_mask_ = mask
        self.genes_ = adata.var_names[mask].astype(str).tolist()
        self.gene_report_ = report
        self._tables = tables
        keys = ([batch_key] if batch_key else []) + list(categorical_covariate_keys)
        self.covariates_ = CovariateEncoder.fit(adata.obs, keys, continuous_covariate_keys)
        self._X, self.scaling_ = self._expression(adata, fit=True)
        self.network_: SciLaMANetwork | None = None
        self.train_cells_: np.ndarray | None = None
        self.history_: dict[str, list[dict[str, float]]] = {}
        self.trained_: dict[str, bool] = {"cell": False, "gene": False}

    # -- data ---------------------------------------------------------------------------
    def _expression(
        self, adata: Any, *, fit: bool = False
    ) -> tuple[np.ndarray | sp.csr_matrix, dict[str, list[float]] | None]:
        """The modelled genes' expression of ``adata`` (cells, genes), scaled if asked."""
        s = self.settings
        missing = [g for g in self.genes_ if g not in adata.var_names] if not fit else []
        if missing:
            raise ValueError(
                f"adata lacks {len(missing)} of the model's {len(self.genes_)} genes "
                f"(first: {missing[:5]})"
            )
        sub = adata[:, self.genes_] if not fit else adata[:, self.gene_mask_]
        X = expression_matrix(sub, s["layer"])
        scaling = None if fit else self.scaling_
        if s["scale"]:
            D = X.toarray() if sp.issparse(X) else np.asarray(X, np.float32)
            if fit:
                std = D.std(0, dtype=np.float64)
                scaling = {
                    "mean": D.mean(0, dtype=np.float64).tolist(),
                    "std": np.where(std > 0, std, 1.0).tolist(),
                }
            assert scaling is not None
            X = ((D - np.asarray(scaling["mean"])) / np.asarray(scaling["std"])).astype(np.float32)
            np.clip(X, -10.0, 10.0, out=X)
        elif s["check_scaling"]:
            ok, mean, std = looks_scaled(X)
            if not ok:
                where = "adata.X" if s["layer"] is None else f"adata.layers[{s['layer']!r}]"
                raise ValueError(
                    f"{where} does not look scaled (mean {mean:.3f}, std {std:.3f}; sciLaMA's "
                    "squared-error likelihood expects each gene at mean 0 and variance 1): "
                    "run sc.pp.scale first, or pass scale=True (or check_scaling=False to "
                    "train on it as it is)"
                )
        return X, scaling

    def _batches(self, X, C, order: np.ndarray, batch_size: int, drop_single: bool):
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            if drop_single and len(idx) == 1 and len(order) > 1:
                continue  # BatchNorm cannot train on one cell
            x = X[idx]
            x = torch.from_numpy(x.toarray() if sp.issparse(x) else np.ascontiguousarray(x))
            yield x.to(self.device), torch.from_numpy(C[idx]).to(self.device)

    def _build(self, train: np.ndarray) -> SciLaMANetwork:
        s = self.settings
        if self._tables:
            names = tuple(self._tables)
            inputs = [self._tables[n] for n in names]
        else:  # the transposed expression of the training cells only (no leak)
            Xt = self._X[train]
            Xt = Xt.toarray() if sp.issparse(Xt) else np.asarray(Xt)
            names, inputs = ("expression",), [np.ascontiguousarray(Xt.T)]
        cfg = SciLaMAConfig(
            n_genes=len(self.genes_),
            gene_input_dims=tuple(a.shape[1] for a in inputs),
            gene_input_names=names,
            n_covariates=self.covariates_.width,
            latent_dim=s["latent_dim"],
            hidden=tuple(s["hidden"]),
            dropout=s["dropout"],
            batchnorm=s["batchnorm"],
            layernorm=s["layernorm"],
            var_eps=s["var_eps"],
            fusion=s["fusion"],
        )
        net = SciLaMANetwork(cfg)
        net.set_gene_inputs([torch.from_numpy(np.asarray(a, np.float32)) for a in inputs])
        return net.to(self.device)

    # -- training -----------------------------------------------------------------------
    def train(
        self,
        mode: str = "direct",
        max_epochs: int = 500,
        *,
        batch_size: int = 128,
        validation_size: float = 0.1,
        early_stopping: bool = True,
        patience: int = 25,
        lr: float = 1e-3,
        weight_decay: float = 0.0,
        lr_decay: float = 0.99,
        gamma: float = 0.05,
        beta_warmup_epochs: int = 25,
        beta_rate: float = 0.05,
        beta_max: float = 1.0,
        seed: int = 0,
        progress: bool = True,
    ) -> SciLaMA:
        """Train, as the official trainer does.

        Parameters
        ----------
        mode : {"direct", "stepwise", "beta_vae"}
            ``"direct"``: the joint objective from the start. ``"stepwise"``: the cell VAE
            alone, then the gene VAE with the cell VAE frozen (``gamma = 0``), then joint.
            ``"beta_vae"``: the cell VAE alone (the baseline; no gene representations).
        max_epochs : int
            Epochs per phase (each phase restarts the KL warm-up and the learning rate).
        batch_size : int
            Cells per step; every step also encodes all genes.
        validation_size : float
            Fraction of cells held out for early stopping and the best-model choice,
            drawn once (on the first call) with ``seed``; 0 trains on every cell and keeps
            the last epoch.
        early_stopping : bool
            Stop a phase when the validation loss (at ``beta = 1``) has not improved for
            ``patience`` epochs; counted only once the KL weight is at ``beta_max``, the
            best epoch since then is restored.
        lr, weight_decay, lr_decay : float
            AdamW and ExponentialLR(``lr_decay``) per epoch.
        gamma : float
            Weight of the latent reconstruction ``z_s z_f^T + b``.
        beta_warmup_epochs, beta_rate, beta_max : float
            KL weight 0 through epoch ``beta_warmup_epochs``, then ``+beta_rate`` per
            epoch up to ``beta_max`` (:func:`~scilama.losses.beta_at`).
        seed : int
            Seeds the split, the initial weights, the batches and the samples (the global
            torch RNG is restored afterwards).
        progress : bool
            Show a progress bar per phase.

        Returns
        -------
        SciLaMA
            ``self``.
        """
        check_choice(mode, "mode", MODES)
        check_scalar(max_epochs, "max_epochs", low=1, integer=True)
        check_scalar(batch_size, "batch_size", low=1, integer=True)
        check_scalar(validation_size, "validation_size", low=0, high=1, high_inclusive=False)
        check_scalar(patience, "patience", low=1, integer=True)
        check_scalar(lr, "lr", low=0, low_inclusive=False)
        check_scalar(weight_decay, "weight_decay", low=0)
        check_scalar(lr_decay, "lr_decay", low=0, high=1, low_inclusive=False)
        check_scalar(gamma, "gamma", low=0)
        check_scalar(beta_warmup_epochs, "beta_warmup_epochs", low=0, integer=True)
        check_scalar(beta_rate, "beta_rate", low=0)
        check_scalar(beta_max, "beta_max", low=0)
        check_scalar(seed, "seed", low=0, integer=True)
        n = self._X.shape[0]
        rng = np.random.default_rng(seed)
        if self.train_cells_ is None:
            n_val = round(validation_size * n)
            if validation_size > 0 and (n_val < 1 or n - n_val < 2):
                raise ValueError(
                    f"validation_size={validation_size} of {n} cells leaves no validation or "
                    "training cells; use 0 or a larger dataset"
                )
            order = rng.permutation(n)
            self.train_cells_ = np.sort(order[n_val:])
            self._val_cells = np.sort(order[:n_val])
        elif validation_size != self._validation_size:
            raise ValueError(
                f"validation_size is fixed by the first train() call ({self._validation_size}); "
                f"got {validation_size}"
            )
        self._validation_size = validation_size
        schedule = dict(warmup_epochs=beta_warmup_epochs, rate=beta_rate, end=beta_max)
        options = dict(
            max_epochs=max_epochs,
            batch_size=batch_size,
            early_stopping=early_stopping,
            patience=patience,
            lr=lr,
            weight_decay=weight_decay,
            lr_decay=lr_decay,
            schedule=schedule,
            progress=progress,
        )
        C = self.covariates_.transform(self.adata.obs)
        devices = [torch.device(self.device).index or 0] if self.device.startswith("cuda") else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            if self.network_ is None:
                self.network_ = self._build(self.train_cells_)
            net = self.network_
            phases = {
                "direct": [("joint", gamma)],
                "stepwise": [("cell", 0.0), ("gene", 0.0), ("joint", gamma)],
                "beta_vae": [("cell", 0.0)],
            }[mode]
            for phase, g in phases:
                if phase != "cell" and not net.has_gene_vae:  # pragma: no cover - guarded
                    raise RuntimeError("this network has no gene VAE")
                for p in net.cell_encoder.parameters():
                    p.requires_grad_(phase != "gene")
                for p in net.cell_decoder.parameters():
                    p.requires_grad_(phase != "gene")
                self.history_[f"{mode}:{phase}"] = self._fit_phase(phase, g, C, rng, **options)
                self.trained_["cell"] |= phase != "gene"
                self.trained_["gene"] |= phase != "cell"
            for p in net.parameters():
                p.requires_grad_(True)
        net.eval()
        return self

    def _loss(self, phase: str, out: dict, x: torch.Tensor, beta: float, gamma: float):
        if phase == "cell":
            return cell_vae_loss(x, out["out"], out["mu_s"], out["sigma_s"], beta)
        args = (x, out["x_hidden"], out["x_latent"])
        if phase == "gene":
            return gene_vae_loss(*args, out["mu_f"], out["sigma_f"], beta, gamma)
        return joint_loss(
            *args, out["mu_s"], out["sigma_s"], out["mu_f"], out["sigma_f"], beta, gamma
        )

    def _fit_phase(
        self,
        phase: str,
        gamma: float,
        C: np.ndarray,
        rng: np.random.Generator,
        *,
        max_epochs: int,
        batch_size: int,
        early_stopping: bool,
        patience: int,
        lr: float,
        weight_decay: float,
        lr_decay: float,
        schedule: dict[str, float],
        progress: bool,
    ) -> list[dict[str, float]]:
        net = self.network_
        assert net is not None and self.train_cells_ is not None
        params = [p for p in net.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
        sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=lr_decay)
        watch_from = first_full_beta_epoch(**schedule)
        best, best_state, waited = math.inf, None, 0
        history: list[dict[str, float]] = []
        epochs = range(max_epochs)
        if progress:
            epochs = track(epochs, f"sciLaMA {phase}")
        for epoch in epochs:
            beta = beta_at(epoch, **schedule)
            lr_now = opt.param_groups[0]["lr"]
            net.train()
            total, count = torch.zeros((), device=self.device), 0
            for x, c in self._batches(
                self._X, C, rng.permutation(self.train_cells_), batch_size, net.config.batchnorm
            ):
                loss, _ = self._loss(phase, net(x, c), x, beta, gamma)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total += loss.detach() * len(x)
                count += len(x)
            sched.step()
            train_loss = float(total) / count
            if not math.isfinite(train_loss):
                raise FloatingPointError(
                    f"the {phase} loss became {train_loss} in epoch {epoch}; lower lr (now "
                    f"{lr_now}) or check the expression scaling"
                )
            record = {"epoch": epoch, "beta": beta, "lr": lr_now, "train_loss": train_loss}
            if len(self._val_cells):
                record["val_loss"] = self._evaluate(phase, gamma, C, batch_size)
                if epoch >= watch_from:
                    if record["val_loss"] < best:
                        best, waited = record["val_loss"], 0
                        best_state = copy.deepcopy(net.state_dict())
                    else:
                        waited += 1
            history.append(record)
            if early_stopping and best_state is not None and waited >= patience:
                break
        if best_state is not None:
            net.load_state_dict(best_state)
        return history

    @torch.no_grad()
    def _evaluate(self, phase: str, gamma: float, C: np.ndarray, batch_size: int) -> float:
        net = self.network_
        assert net is not None
        net.eval()
        total = torch.zeros((), device=self.device)
        for x, c in self._batches(self._X, C, self._val_cells, batch_size, False):
            loss, _ = self._loss(phase, net(x, c), x, 1.0, gamma)
            total += loss * len(x)
        return float(total) / len(self._val_cells)

    # -- outputs ------------------------------------------------------------------------
    def _trained(self, part: str = "cell") -> SciLaMANetwork:
        if self.network_ is None:
            raise RuntimeError("call train() first")
        if not self.trained_[part]:
            raise RuntimeError(
                f"the {part} VAE was not trained (train(mode='beta_vae') trains the cell VAE "
                "alone); train with mode='direct' or 'stepwise'"
            )
        return self.network_

    def _cells(self, adata: Any | None):
        if adata is None or adata is self.adata:
            return self.adata, self._X, self.covariates_.transform(self.adata.obs)
        _check_adata(adata)
        X, _ = self._expression(adata)
        return adata, X, self.covariates_.transform(adata.obs)

    @torch.no_grad()
    def get_latent_representation(
        self, adata: Any | None = None, *, batch_size: int = 1024, key: str | None = OBSM_KEY
    ) -> np.ndarray:
        """Cell posterior means, (cells, latent_dim); also written to
        ``adata.obsm[key]`` (``key=None``: not written).

        ``adata`` defaults to the training AnnData; another one must hold the model's genes
        and covariate columns (its expression is checked / scaled as at training)."""
        net = self._trained("cell").eval()
        adata, X, C = self._cells(adata)
        out = [
            net.encode_cells(x, c)[0].cpu().numpy()
            for x, c in self._batches(X, C, np.arange(X.shape[0]), batch_size, False)
        ]
        Z = np.concatenate(out).astype(np.float32)
        if key is not None:
            adata.obsm[key] = Z
        return Z

    @torch.no_grad()
    def get_gene_embeddings(self, *, key: str | None = VARM_KEY) -> pd.DataFrame:
        """Gene posterior means, a DataFrame (modelled genes x latent_dim) indexed by gene.

        Also written to ``adata.varm[key]`` (genes without an embedding get NaN rows;
        ``adata.var[key + "_modelled"]`` marks the modelled ones)."""
        net = self._trained("gene").eval()
        mu_f = net.encode_genes()[0].cpu().numpy().astype(np.float32)
        if key is not None:
            # by name: a loaded model's AnnData may order its genes differently
            rows = self.adata.var_names.get_indexer(self.genes_)
            full = np.full((self.adata.n_vars, mu_f.shape[1]), np.nan, dtype=np.float32)
            full[rows] = mu_f
            self.adata.varm[key] = full
            self.adata.var[f"{key}_modelled"] = self.gene_mask_
        return pd.DataFrame(mu_f, index=pd.Index(self.genes_, name="gene"))

    @torch.no_grad()
    def reconstruct(
        self, adata: Any | None = None, *, source: str = "paired", batch_size: int = 1024
    ) -> np.ndarray:
        """The model's expression from posterior means, (cells, modelled genes):
        ``"paired"`` ``h_s h_f^T + b`` (the trained objective), ``"latent"`` ``z_s z_f^T +
        b``, or ``"cell"`` (the cell decoder's own output layer)."""
        check_choice(source, "source", ("paired", "latent", "cell"))
        net = self._trained("cell" if source == "cell" else "gene").eval()
        adata, X, C = self._cells(adata)
        h_f = z_f = None
        if source != "cell":
            z_f = net.encode_genes()[0]
            assert net.gene_decoder is not None
            h_f = net.gene_decoder(z_f)[0]
        out = []
        for x, c in self._batches(X, C, np.arange(X.shape[0]), batch_size, False):
            z_s = net.encode_cells(x, c)[0]
            h_s, own = net.decode_cells(z_s, c)
            if source == "cell":
                out.append(own)
            else:
                paired, latent = net.paired(h_s, z_s, h_f, z_f)
                out.append(paired if source == "paired" else latent)
        return torch.cat(out).cpu().numpy()

    # -- persistence --------------------------------------------------------------------
    def save(self, path: str | Path, *, overwrite: bool = False) -> Path:
        """Write the model into folder ``path`` atomically: ``network/`` (safetensors
        weights and gene inputs + ``config.json``) and ``scilama.json`` (genes,
        covariate encoding, scaling, training cells, history). An existing non-empty folder
        is refused unless ``overwrite=True``."""
        net = self._trained("cell")
        path = Path(path)
        setup = {
            "format": 1,
            "scilama_version": _version("scilama"),
            "settings": self.settings,
            "genes": self.genes_,
            "covariates": self.covariates_.to_dict(),
            "scaling": self.scaling_,
            "train_cells": self.adata.obs_names[self.train_cells_].astype(str).tolist(),
            "validation_size": self._validation_size,
            "trained": self.trained_,
            "history": self.history_,
            "gene_report": {k: v for k, v in self.gene_report_.items() if k != "modalities"},
        }
        with atomic_directory(path, overwrite=overwrite, contents=(NETWORK_DIR, SETUP_NAME)) as tmp:
            net.save_pretrained(tmp / NETWORK_DIR)
            (tmp / SETUP_NAME).write_text(json.dumps(setup, default=json_default))
        return path

    @classmethod
    def load(cls, path: str | Path, adata: Any, *, device: str = "auto") -> SciLaMA:
        """A model written by :meth:`save`, attached to ``adata`` (which must hold the
        model's genes and covariate columns)."""
        _check_adata(adata)
        path = Path(path)
        recover_directory(path)
        setup_file = path / SETUP_NAME
        if not setup_file.is_file():
            raise FileNotFoundError(f"{str(setup_file)!r} is missing: not a saved SciLaMA folder")
        try:
            setup = json.loads(setup_file.read_text())
            settings, genes = setup["settings"], list(setup["genes"])
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise ValueError(f"{str(setup_file)!r} is corrupt: {err}") from err
        net = SciLaMANetwork.from_pretrained(path / NETWORK_DIR)
        self = cls.__new__(cls)
        self.adata = adata
        self.settings = settings
        self.device = select_device(device)
        missing = [g for g in genes if g not in adata.var_names]
        if missing:
            raise ValueError(
                f"adata lacks {len(missing)} of the saved model's {len(genes)} genes "
                f"(first: {missing[:5]})"
            )
        self.genes_ = genes
        self.gene_mask_ = np.asarray(adata.var_names.isin(genes))
        self.gene_report_ = setup.get("gene_report", {})
        self._tables = {}
        self.covariates_ = CovariateEncoder.from_dict(setup["covariates"])
        self.scaling_ = setup["scaling"]
        self._X, _ = self._expression(adata)
        self.network_ = net.to(self.device).eval()
        cells = pd.Index(adata.obs_names.astype(str))
        self.train_cells_ = np.flatnonzero(cells.isin(setup["train_cells"]))
        self._val_cells = np.flatnonzero(~cells.isin(setup["train_cells"]))
        self._validation_size = setup["validation_size"]
        self.history_ = setup["history"]
        self.trained_ = setup["trained"]
        return self
