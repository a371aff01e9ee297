"""The package contract (icml25-core's conformance kit). juice-lm saves no model (it edits
a user's model at test time); its one artefact, head scores, is JSON with its own tests."""

from icml25_core.testing import PackageConformance


class TestConformance(PackageConformance):
    distribution = "juice-lm"

    def divergent_training(self):
        from juice_lm import ToyWorld, train_toy

        world = ToyWorld(num_subjects=8, num_answers=4, num_fillers=4, seed=0)
        return {"train_toy": (lambda: train_toy(world, steps=5, batch_size=8, lr=1e12), "lr")}
