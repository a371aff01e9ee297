"""The package contract (icml25-core's conformance kit). linear-tca saves no model (a
fitted LinearTCA is a few tensors refitted per stream), so the persistence check skips."""

from icml25_core.testing import PackageConformance


class TestConformance(PackageConformance):
    distribution = "linear-tca"

    def divergent_training(self):
        from linear_tca import digits_split, train_source_model

        x, y, _, _ = digits_split(0)
        return {
            "train_source_model": (
                lambda: train_source_model(x[:64], y[:64], seed=0, width=16, epochs=2, lr=1e12),
                "lr",
            )
        }

    def label_consumers(self):
        import torch

        from linear_tca import LinearTCA

        g = torch.Generator().manual_seed(0)
        Z = torch.randn(40, 4, generator=g, dtype=torch.float64)
        logits = torch.randn(40, 3, generator=g, dtype=torch.float64)

        def oracle(labels):
            LinearTCA(proportions="oracle").fit(Z, logits, labels=labels)

        return {"LinearTCA.fit": (oracle, "labels", logits.argmax(1).numpy(), 3)}
