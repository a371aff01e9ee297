"""The package contract (icml25-core's conformance kit)."""

from icml25_core.testing import PackageConformance


class TestConformance(PackageConformance):
    distribution = "scilama"

    def pretrained_models(self):
        from scilama import SciLaMAConfig, SciLaMANetwork

        cfg = SciLaMAConfig(
            n_genes=5, gene_input_dims=(3,), gene_input_names=("text",), hidden=(4,), latent_dim=2
        )
        return [SciLaMANetwork(cfg)]
