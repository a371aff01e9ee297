"""The package contract (icml25-core's conformance kit). linear-tca saves no model (a
fitted LinearTCA is a few tensors refitted per stream), so the persistence check skips."""

from icml25_core.testing import PackageConformance


class TestConformance(PackageConformance):
    distribution = "linear-tca"
