"""The package contract (icml25-core's conformance kit).
A package saving models through icml25_core.hub.PretrainedModelMixin overrides
`pretrained_models()` with tiny instances of each class; the kit checks their persistence.
"""

from icml25_core.testing import PackageConformance


class TestConformance(PackageConformance):
    distribution = "kuea"
