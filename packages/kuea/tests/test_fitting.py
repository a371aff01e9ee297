"""fit_kernel_params recovers known parameters."""

import pytest
import torch

from kuea import fit_kernel_params, median_bandwidth

D = torch.randn(256, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


@pytest.mark.parametrize("scale", [0.1, 3.0])
def test_recovers_polynomial_ratio(scale):
    # e = s d: (r e e^T + c0)^3 matches the teacher's (d d^T / 8 + 1)^3 at r = 1 / (8 s^2)
    fit = fit_kernel_params(D * scale, D, c0=0.5, batch_size=64)
    assert fit.params["c0"] == 0.5
    assert fit.params["gamma"] == pytest.approx(0.5 / (8 * scale**2), rel=1e-3)
    assert fit.loss < 1e-10 and fit.loss <= fit.grid_loss


def test_recovers_gaussian_bandwidth():
    fit = fit_kernel_params(
        D * 2.0, D, kind="gaussian", teacher_kind="gaussian", teacher_bandwidth=1.7
    )
    assert fit.params["bandwidth"] == pytest.approx(3.4, rel=1e-3)


def test_fit_on_models_and_images():
    from kuea import PixelStatsTeacher, make_shapes, tiny_clip

    world = make_shapes(40, seed=0)
    teacher = PixelStatsTeacher().fit(world.images)
    fit = fit_kernel_params(tiny_clip(), teacher, world.images, batch_size=20)
    assert fit.params["gamma"] > 0 and fit.loss <= fit.grid_loss


def test_median_bandwidth_and_errors():
    x = torch.tensor([[0.0], [1.0], [3.0]])
    assert median_bandwidth(x) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="identical"):
        median_bandwidth(torch.ones(3, 2))
    with pytest.raises(ValueError, match="different numbers"):
        fit_kernel_params(D[:10], D[:12])
    with pytest.raises(ValueError, match="NaN"):
        fit_kernel_params(D * float("nan"), D)
    with pytest.raises(ValueError, match="images are needed"):
        fit_kernel_params(lambda x: x, D)
    with pytest.raises(ValueError, match="kind"):
        fit_kernel_params(D, D, kind="cosine")
