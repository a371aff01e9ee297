"""The package contract (icml25-core's conformance kit)."""

from icml25_core.testing import PackageConformance


class TestConformance(PackageConformance):
    distribution = "vsp-point"

    def pretrained_models(self):
        from vsp_point import PointMAEConfig, PointTransformer

        cfg = PointMAEConfig(
            trans_dim=16, depth=1, num_heads=2, encoder_dims=16, num_group=4, group_size=4
        )
        return [PointTransformer(cfg)]
