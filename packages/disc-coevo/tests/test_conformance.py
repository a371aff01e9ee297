"""The package contract (icml25-core's conformance kit). Socialized pairs save their
weights with save_weights / load_weights (tested in test_socialized.py): they hold two
experts of any architecture, so there is no config-only from_pretrained to check."""

from icml25_core.testing import PackageConformance


class TestConformance(PackageConformance):
    distribution = "disc-coevo"
