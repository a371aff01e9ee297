"""The package contract (icml25-core's conformance kit); fedq-gap saves no model."""

from icml25_core.testing import PackageConformance


class TestConformance(PackageConformance):
    distribution = "fedq-gap"
