"""The package contract (icml25-core's conformance kit). juice-lm saves no model (it edits
a user's model at test time); its one artefact, head scores, is JSON with its own tests."""

from icml25_core.testing import PackageConformance


class TestConformance(PackageConformance):
    distribution = "juice-lm"
