"""The package contract (icml25-core's conformance kit), with tiny configs of the three
networks the estimators save."""

from icml25_core.testing import PackageConformance


class TestConformance(PackageConformance):
    distribution = "geo-tlp"

    def divergent_training(self):
        from geo_tlp import GeoTLP, mixed_geometry_graph

        snaps = mixed_geometry_graph(30, 4, seed=0).snapshots
        model = GeoTLP(epochs=5, hidden=4, dim=2, lr=1e12, device="cpu")
        return {"GeoTLP.fit": (lambda: model.fit(snaps), "lr")}

    def pretrained_models(self):
        from geo_tlp import EvolveGCNNet, GeoTLPNet, StaticGAENet

        return [
            GeoTLPNet(6, hidden=4, dim=3),
            GeoTLPNet(6, in_channels=2, hidden=4, dim=3, routing="hard"),
            EvolveGCNNet(6, hidden=4, dim=3),
            StaticGAENet(6, in_channels=2, hidden=4, dim=3),
        ]
