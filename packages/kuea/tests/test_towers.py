"""Adapters: equal to transformers' own image features; open_clip's layout; bad images."""

import pytest
import torch
from torch import nn

from kuea import as_teacher, image_tower, tiny_clip


def test_transformers_tower_equals_get_image_features():
    model = tiny_clip(seed=1)
    x = torch.randn(3, 3, 32, 32)
    tower = image_tower(model)
    with torch.no_grad():
        want = model.get_image_features(pixel_values=x).pooler_output
        torch.testing.assert_close(tower.encode(x), want)
    names = {n for n, _ in tower.frozen_parameters()}
    assert "logit_scale" in names and all(not n.startswith("vision_model") for n in names)
    assert any(n.startswith("text_model") for n in names)


def test_vision_model_with_projection():
    from transformers import CLIPVisionModelWithProjection

    model = CLIPVisionModelWithProjection(tiny_clip().config.vision_config)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(image_tower(model).encode(x), model(pixel_values=x).image_embeds)


class FakeOpenCLIP(nn.Module):
    """The layout of an open_clip CLIP: .visual, .encode_image(x, normalize=)."""

    def __init__(self):
        super().__init__()
        self.visual = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 4))
        self.visual.image_size = (8, 8)
        self.transformer = nn.Linear(4, 4)

    def encode_image(self, x, normalize=False):
        out = self.visual(x)
        return nn.functional.normalize(out, dim=-1) if normalize else out


def test_open_clip_layout():
    model = FakeOpenCLIP()
    tower = image_tower(model)
    x = torch.randn(2, 3, 8, 8)
    torch.testing.assert_close(tower.encode(x), model.encode_image(x))
    assert tower.image_size == 8
    assert {n for n, _ in tower.frozen_parameters()} == {"transformer.weight", "transformer.bias"}


def test_bad_images_and_models():
    tower = image_tower(tiny_clip())
    with pytest.raises(ValueError, match="expects 32x32"):
        tower.check_images(torch.zeros(2, 3, 16, 16))
    with pytest.raises(ValueError, match="channels"):
        tower.check_images(torch.zeros(2, 1, 32, 32))
    with pytest.raises(ValueError, match="empty"):
        tower.check_images(torch.zeros(0, 3, 32, 32))
    with pytest.raises(ValueError, match="NaN"):
        tower.check_images(torch.full((1, 3, 32, 32), float("nan")))
    with pytest.raises(TypeError, match="clip_model"):
        image_tower(nn.Linear(2, 2))
    with pytest.raises(TypeError, match="teacher"):
        as_teacher(3)


def test_teacher_from_transformers_model():
    from transformers import Dinov2Config, Dinov2Model

    dino = Dinov2Model(
        Dinov2Config(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            image_size=32,
            patch_size=8,
        )
    ).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(as_teacher(dino)(x), dino(pixel_values=x).pooler_output)
