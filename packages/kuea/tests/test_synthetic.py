"""The generated world, the tokenizer, the CLIP loss against transformers' own."""

import numpy as np
import pytest
import torch

from kuea import PixelStatsTeacher, WordTokenizer, make_shapes, tiny_clip
from kuea.synthetic import COLOURS, SHAPES, clip_contrastive_loss


def test_world_reproducible_and_labelled():
    a, b = make_shapes(30, seed=3), make_shapes(30, seed=3)
    torch.testing.assert_close(a.images, b.images)
    assert a.images.shape == (30, 3, 32, 32)
    assert float(a.images.min()) >= -0.5 and float(a.images.max()) <= 0.5
    assert set(a.shape) <= set(range(len(SHAPES))) and set(a.colour) <= set(range(len(COLOURS)))
    assert a.captions()[0] == f"a photo of a {list(COLOURS)[a.colour[0]]} object"
    # the left/right attribute is where the object is
    x = make_shapes(200, seed=4)
    fg = (x.images + 0.15).abs().amax(dim=1) > 0.2
    left = fg[:, :, :16].sum(dim=(1, 2)) > fg[:, :, 16:].sum(dim=(1, 2))
    assert np.mean(left.numpy() == (x.position == 0)) > 0.95


def test_tokenizer():
    tok = WordTokenizer()
    out = tok(["a photo of a circle"])
    ids = out["input_ids"][0].tolist()
    assert ids[0] == tok.BOS and ids[6] == tok.EOS and out["attention_mask"][0].sum() == 7
    with pytest.raises(ValueError, match="unknown word"):
        tok(["a photo of a dog"])


def test_contrastive_loss_equals_transformers():
    model = tiny_clip(seed=0)
    tok = WordTokenizer()
    world = make_shapes(6, seed=0)
    text = tok(["a photo of a circle", "a photo of a square", "a photo of a triangle"] * 2)
    with torch.no_grad():
        out = model(pixel_values=world.images, return_loss=True, **text)
        img = model.get_image_features(pixel_values=world.images).pooler_output
        txt = model.get_text_features(**text).pooler_output
        ours = clip_contrastive_loss(img, txt, model.logit_scale)
    torch.testing.assert_close(ours, out.loss)


def test_teacher_standardized():
    world = make_shapes(64, seed=1)
    teacher = PixelStatsTeacher().fit(world.images)
    d = teacher(world.images)
    assert d.shape == (64, 3 * 16 + 4)
    torch.testing.assert_close(d.mean(dim=0), torch.zeros(52), atol=1e-5, rtol=0)
