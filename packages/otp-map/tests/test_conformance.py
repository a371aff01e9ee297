"""The package contract (icml25-core's conformance kit): metadata, documented public API,
a light entry point, the README quick start, the experiment on its smoke profile, the
benchmark at smoke size and safe persistence of the networks."""

from icml25_core.testing import PackageConformance


class TestConformance(PackageConformance):
    distribution = "otp-map"

    def pretrained_models(self):
        from otp_map.networks import TransportNetworks

        network = {"arch": "mlp", "source_shape": [2], "target_shape": [2], "hidden": [8]}
        return [TransportNetworks(network)]
