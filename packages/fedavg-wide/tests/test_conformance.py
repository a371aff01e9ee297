"""The package contract (icml25-core's conformance kit).
A package saving models through icml25_core.hub.PretrainedModelMixin overrides
`pretrained_models()` with tiny instances of each class; the kit checks their persistence.
"""

import torch

from fedavg_wide import MLP, FedAvg, centralized_gd
from icml25_core.testing import PackageConformance


def _clients(labels=None):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(12, 3, generator=gen)
    y = x.sum(1, keepdim=True) if labels is None else torch.as_tensor(labels)
    return [(x[:6], y[:6]), (x[6:], y[6:])]


class TestConformance(PackageConformance):
    distribution = "fedavg-wide"

    def divergent_training(self):
        model = MLP(3, 1, 16, seed=0)
        return {
            "FedAvg": (lambda: FedAvg(model, _clients(), lr=1e8, local_steps=2, rounds=3), "lr"),
            "centralized_gd": (
                lambda: centralized_gd(model, _clients(), lr=1e8, local_steps=2, rounds=3),
                "lr",
            ),
        }

    def label_consumers(self):
        model = MLP(3, 3, 16, seed=0)
        labels = [0, 1, 2] * 4

        def fedavg(y):
            FedAvg(model, _clients(y), lr=0.1, local_steps=1, rounds=1, loss="cross_entropy")

        return {"FedAvg": (fedavg, "y", labels, 3)}
