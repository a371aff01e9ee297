"""The package contract (icml25-core's conformance kit).
A package saving models through icml25_core.hub.PretrainedModelMixin overrides
`pretrained_models()` with tiny instances of each class; the kit checks their persistence.
"""

import torch

from icml25_core.testing import PackageConformance
from kuea import PixelStatsTeacher, WordTokenizer, align, make_shapes, tiny_clip, zero_shot_accuracy


class TestConformance(PackageConformance):
    distribution = "kuea"

    def divergent_training(self):
        world = make_shapes(32, seed=0)
        teacher = PixelStatsTeacher().fit(world.images)
        return {
            "align": (
                lambda: align(
                    tiny_clip(seed=0),
                    teacher,
                    world.images,
                    steps=5,
                    batch_size=16,
                    lr=1e6,
                    progress=False,
                ),
                "lr",
            )
        }

    def label_consumers(self):
        model = tiny_clip(seed=2)
        prompts = WordTokenizer()(["a circle", "a square", "a triangle"])
        x = torch.randn(4, 3, 32, 32)
        return {
            "zero_shot_accuracy": (
                lambda y: zero_shot_accuracy(model, x, y, prompts),
                "labels",
                [0, 1, 2, 0],
                3,
            )
        }
