"""The package contract (icml25-core's conformance kit): metadata, documented public API,
a light entry point, the README quick start, the experiment on its smoke profile, the
benchmark at smoke size and safe persistence of the models."""

from icml25_core.testing import PackageConformance


class TestConformance(PackageConformance):
    distribution = "nego-graph"

    def pretrained_models(self):
        from nego_graph.models import MODEL_CLASSES

        small = {"in_dim": 3, "n_classes": 2, "hidden": 4, "layers": 1}
        return [MODEL_CLASSES[name](**small) for name in ("GNNClassifier", "GSAT", "NeGo")]
