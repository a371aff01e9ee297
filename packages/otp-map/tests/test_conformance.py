"""The package contract (icml25-core's conformance kit): metadata, documented public API,
a light entry point, the README quick start, the experiment on its smoke profile and the
benchmark at smoke size."""

from icml25_core.testing import PackageConformance


class TestConformance(PackageConformance):
    distribution = "otp-map"
