"""The generated shifts."""

import pytest
import torch
from torch import nn

from linear_tca import CORRUPTIONS, AffineFeatureShift, corrupt


@pytest.fixture
def images():
    g = torch.Generator().manual_seed(0)
    return torch.rand(16, 1, 8, 8, generator=g)


@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_corruptions_keep_shape_and_range_and_grow_with_severity(images, kind):
    dist = []
    for severity in (1, 2, 3):
        out = corrupt(images, kind, severity, generator=torch.Generator().manual_seed(1))
        assert out.shape == images.shape and out.dtype == images.dtype
        assert float(out.min()) >= 0.0 and float(out.max()) <= 1.0
        dist.append(float((out - images).abs().mean()))
    assert dist[0] > 0 and dist[0] < dist[1] < dist[2], dist


def test_contrast_and_brightness_closed_forms():
    x = torch.full((1, 1, 2, 2), 0.5)
    x[0, 0, 0, 0] = 0.1
    mean = float(x.mean())
    out = corrupt(x, "contrast", 1)  # contrast kept: 0.5
    torch.testing.assert_close(out, (x - mean) * 0.5 + mean)
    torch.testing.assert_close(corrupt(x, "brightness", 1), (x + 0.15).clamp(0, 1))


def test_corrupt_refuses_bad_input(images):
    with pytest.raises(ValueError, match="kind must be one of"):
        corrupt(images, "fog")
    with pytest.raises(ValueError, match="severity must be one of"):
        corrupt(images, "contrast", 4)
    with pytest.raises(ValueError, match=r"values in \[0, 1\]"):
        corrupt(images * 255, "contrast")
    with pytest.raises(ValueError, match="N, C, H, W"):
        corrupt(images[0], "contrast")


def test_affine_feature_shift_is_spd_and_affine():
    shift = AffineFeatureShift(nn.Identity(), 6, 1.0, generator=torch.Generator().manual_seed(0))
    A = shift.A.double()
    torch.testing.assert_close(A, A.T)
    assert float(torch.linalg.eigvalsh(A).min()) > 0
    z = torch.randn(4, 6)
    torch.testing.assert_close(shift(z), z @ shift.A + shift.b)
