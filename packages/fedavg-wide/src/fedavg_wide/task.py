"""The federated task the Flower app runs: settings, the model and every client's data.

The server and each client rebuild the same data from the settings (the datasets are
bundled with scikit-learn and the partitions are seeded), so the app needs no data
transfer: client ``i`` of ``n`` trains on partition ``i`` of the same split the plain loop
uses (:func:`federated_data`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import nn

from icml25_core import check_choice, check_scalar

from .data import (
    dirichlet_partition,
    iid_partition,
    load_digits,
    pathological_partition,
    synthetic_regression,
)
from .models import CNN, MLP, PARAMETERIZATIONS

__all__ = ["Settings", "build_model", "federated_data", "load_global"]

DATASETS = ("digits01", "digits", "synthetic")
PARTITIONS = ("pathological", "dirichlet", "iid")


@dataclass(frozen=True)
class Settings:
    """A run's configuration (``[tool.flwr.app.config]`` keys, with dashes, map onto these).

    ``dataset``: ``"digits01"`` (digits 0/1, targets -1/+1, one output, MSE),
    ``"digits"`` (10 classes) or ``"synthetic"`` (regression, partitioned by input group).
    ``partition``: ``"pathological"`` (``classes_per_client`` classes each),
    ``"dirichlet"`` (``alpha``) or ``"iid"``. ``model``: ``"mlp"`` or ``"cnn"`` (8x8
    images; not for ``"synthetic"``). ``batch_size`` 0 = full-batch GD. ``n_clients``
    0 = the number of SuperNodes. ``min_nodes``: clients the server waits for (0 = those
    connected at the start). ``result_path``: where the server writes the per-round
    metrics (JSON) and the final weights (``.safetensors`` beside it); empty = nowhere.
    """

    dataset: str = "digits01"
    partition: str = "pathological"
    alpha: float = 0.1
    classes_per_client: int = 1
    n_clients: int = 0
    model: str = "mlp"
    width: int = 256
    depth: int = 2
    parameterization: str = "ntk"
    loss: str = "mse"
    lr: float = 0.5
    local_steps: int = 5
    num_server_rounds: int = 10
    batch_size: int = 0
    weight_decay: float = 0.0
    participation: float = 1.0
    dtype: str = "float32"
    seed: int = 0
    min_nodes: int = 0
    result_path: str = ""

    def __post_init__(self) -> None:
        check_choice(self.dataset, "dataset", DATASETS)
        check_choice(self.partition, "partition", PARTITIONS)
        check_choice(self.model, "model", ("mlp", "cnn"))
        check_choice(self.loss, "loss", ("mse", "cross_entropy"))
        check_choice(self.dtype, "dtype", ("float32", "float64"))
        check_scalar(self.width, "width", low=1, integer=True)
        check_scalar(self.depth, "depth", low=1, integer=True)
        check_scalar(self.alpha, "alpha", low=0.0, low_inclusive=False)
        check_scalar(self.classes_per_client, "classes_per_client", low=1, integer=True)
        check_scalar(self.weight_decay, "weight_decay", low=0.0)
        check_scalar(self.seed, "seed", low=0, integer=True)
        check_scalar(self.min_nodes, "min_nodes", low=0, integer=True)
        check_choice(self.parameterization, "parameterization", PARAMETERIZATIONS)
        check_scalar(self.local_steps, "local_steps", low=1, integer=True)
        check_scalar(self.num_server_rounds, "num_server_rounds", low=1, integer=True)
        check_scalar(self.lr, "lr", low=0.0, low_inclusive=False)
        check_scalar(self.participation, "participation", low=0.0, high=1.0, low_inclusive=False)
        check_scalar(self.batch_size, "batch_size", low=0, integer=True)
        check_scalar(self.n_clients, "n_clients", low=0, integer=True)
        if self.model == "cnn" and self.dataset == "synthetic":
            raise ValueError("model='cnn' needs image data: dataset 'digits' or 'digits01'")
        if self.dataset == "digits" and self.loss == "mse":
            raise ValueError("dataset='digits' has integer labels: use loss='cross_entropy'")
        if self.dataset != "digits" and self.loss == "cross_entropy":
            raise ValueError(f"dataset={self.dataset!r} has float targets: use loss='mse'")

    @classmethod
    def from_config(cls, config, **overrides) -> Settings:
        """Settings from a Flower run config (dashed keys) overlaid with ``overrides``
        (underscored or dashed); an unknown key is an error, not silently ignored."""
        names = {f.name for f in fields(cls)}
        values = {k.replace("-", "_"): v for k, v in {**dict(config), **overrides}.items()}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"unknown setting(s) {unknown}; known: {sorted(names)}")
        return cls(**values)

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)


def _shape(settings: Settings) -> tuple[int, int]:
    if settings.dataset == "synthetic":
        return 16, 1
    return 64, 10 if settings.dataset == "digits" else 1


def build_model(settings: Settings) -> nn.Module:
    """The initial global model (seeded by ``settings.seed``)."""
    n_in, n_out = _shape(settings)
    kw = {
        "depth": settings.depth,
        "parameterization": settings.parameterization,
        "seed": settings.seed,
    }
    if settings.model == "cnn":
        model = CNN(1, n_out, settings.width, **kw)
    else:
        model = MLP(n_in, n_out, settings.width, **kw)
    return model.to(settings.torch_dtype)


def federated_data(settings: Settings, n_clients: int):
    """``(clients, test)``: ``n_clients`` ``(X, y)`` pairs split by ``settings.partition``
    and the held-out ``(X, y)`` (CNN inputs reshaped to ``(N, 1, 8, 8)``)."""
    check_scalar(n_clients, "n_clients", low=1, integer=True)
    dtype, seed = settings.torch_dtype, settings.seed
    if settings.dataset == "synthetic":
        X, y, groups = synthetic_regression(seed=seed, dtype=dtype)
        gen = torch.Generator().manual_seed(seed)
        perm = torch.randperm(len(X), generator=gen)
        n_test = len(X) // 4
        test_idx, train_idx = perm[:n_test], perm[n_test:]
        Xa, ya, labels = X[train_idx], y[train_idx], groups[train_idx.numpy()]
        Xb, yb = X[test_idx], y[test_idx]
    else:
        Xa, ya, Xb, yb = load_digits(binary=settings.dataset == "digits01", seed=seed, dtype=dtype)
        labels = ya.numpy().ravel() if settings.dataset == "digits" else (ya[:, 0] > 0).numpy()
    if settings.partition == "iid":
        parts = iid_partition(labels, n_clients, seed=seed)
    elif settings.partition == "dirichlet":
        parts = dirichlet_partition(labels, n_clients, settings.alpha, seed=seed)
    else:
        parts = pathological_partition(labels, n_clients, settings.classes_per_client, seed=seed)
    if settings.model == "cnn":
        Xa, Xb = Xa.reshape(-1, 1, 8, 8), Xb.reshape(-1, 1, 8, 8)
    return [(Xa[idx], ya[idx]) for idx in parts], (Xb, yb)


def load_global(model: nn.Module, state: dict) -> nn.Module:
    """Load the global ``state`` (what Flower's FedAvg aggregated) into ``model``. Flower
    averages every array in float, integer buffers included (batch norm's
    ``num_batches_tracked``); they are rounded here, as :func:`~fedavg_wide.FedAvg` rounds
    them, instead of truncated by ``load_state_dict``."""
    own = model.state_dict()
    fixed = {
        k: v.round().to(own[k].dtype)
        if k in own and not own[k].is_floating_point() and v.is_floating_point()
        else v
        for k, v in state.items()
    }
    model.load_state_dict(fixed)
    return model
