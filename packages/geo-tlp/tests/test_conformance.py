"""The package contract (icml25-core's conformance kit), with tiny configs of the three
networks the estimators save."""

from icml25_core.testing import PackageConformance


class TestConformance(PackageConformance):
    distribution = "geo-tlp"

    def pretrained_models(self):
        from geo_tlp import EvolveGCNNet, GeoTLPNet, StaticGAENet

        return [
            GeoTLPNet(6, hidden=4, dim=3),
            GeoTLPNet(6, in_channels=2, hidden=4, dim=3, routing="hard"),
            EvolveGCNNet(6, hidden=4, dim=3),
            StaticGAENet(6, in_channels=2, hidden=4, dim=3),
        ]
