"""Tiny random backbones (3-D and 2-D) and a few clouds."""

import pytest
import torch
import transformers as T

from vsp_point import PointMAEConfig, PointTransformer, ShapeWorld

TINY = dict(trans_dim=32, depth=2, num_heads=4, encoder_dims=32, num_group=8, group_size=8)


@pytest.fixture(scope="session")
def config():
    return PointMAEConfig(**TINY)


@pytest.fixture(scope="session")
def model3d(config):
    torch.manual_seed(0)
    return PointTransformer(config).eval()


def _vit(kind: str = "vit", layers: int = 2):
    torch.manual_seed(1)
    common = dict(
        hidden_size=24,
        intermediate_size=48,
        num_hidden_layers=layers,
        num_attention_heads=4,
        image_size=16,
        patch_size=8,
    )
    if kind == "clip":
        return T.CLIPVisionModel(T.CLIPVisionConfig(**common)).eval()
    if kind == "dinov2":
        return T.Dinov2Model(T.Dinov2Config(**common)).eval()
    return T.ViTModel(T.ViTConfig(**common), add_pooling_layer=False).eval()


@pytest.fixture(scope="session")
def vit():
    """``vit(kind="vit"|"clip"|"dinov2", layers=2)``: a random 16x16 2-D encoder."""
    return _vit


@pytest.fixture(scope="session")
def clouds():
    world = ShapeWorld(("sphere", "box", "torus"), num_points=64, partial=0.5, clutter=0.1)
    return world.sample(4, seed=0)
