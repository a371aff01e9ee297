"""The package contract (icml25-core's conformance kit). Socialized pairs save their
weights with save_weights / load_weights (tested in test_socialized.py): they hold two
experts of any architecture, so there is no config-only from_pretrained to check."""

import torch

from disc_coevo import TinyResNet, accuracy, train
from icml25_core.testing import PackageConformance


class TestConformance(PackageConformance):
    distribution = "disc-coevo"

    def _data(self):
        torch.manual_seed(0)
        return TinyResNet(3, widths=(4, 8, 8)), torch.rand(8, 1, 8, 8), torch.arange(8) % 3

    def divergent_training(self):
        model, x, y = self._data()
        return {"train": (lambda: train(model, x, y, epochs=2, lr=1e12), "lr")}

    def label_consumers(self):
        model, x, y = self._data()
        return {
            "train": (lambda labels: train(model, x, labels, epochs=1), "y", y.numpy(), 3),
            "accuracy": (lambda labels: accuracy(model, x, labels), "y", y.numpy(), 3),
        }
