"""The package contract (icml25-core's conformance kit): metadata, documented public API,
a light entry point, the README quick start, the experiment on its smoke profile, the
benchmark at smoke size and safe persistence of the model."""

from icml25_core.testing import PackageConformance


class TestConformance(PackageConformance):
    distribution = "tabicl-lite"

    def pretrained_models(self):
        from tabicl_lite.model import TabICL, TabICLConfig

        sizes = {"max_classes": 3, "embed_dim": 8, "n_inducing": 4, "n_cls": 2}
        blocks = {"col_blocks": 1, "row_blocks": 1, "icl_blocks": 1}
        heads = {"col_heads": 2, "row_heads": 2, "icl_heads": 2}
        return [TabICL(TabICLConfig(**sizes, **blocks, **heads))]
