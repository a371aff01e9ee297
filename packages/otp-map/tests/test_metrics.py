"""Metric and cost oracles with known answers (no training)."""

import numpy as np
import ot
import pytest
import torch

from otp_map import QuadraticCost
from otp_map import datasets as D
from otp_map.metrics import (
    discrete_ot_cost,
    gaussian_map,
    map_error,
    plan_cost,
    wasserstein2,
)


def test_wasserstein2_identities():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 3))
    assert wasserstein2(x, x) == pytest.approx(0.0, abs=1e-7)
    shift = np.array([1.0, -2.0, 0.5])
    # a translation is optimal for the quadratic cost: W2 = |shift|
    assert wasserstein2(x, x + shift) == pytest.approx(np.linalg.norm(shift), rel=1e-6)
    # invariant to the order of samples
    assert wasserstein2(x, x[::-1] + shift) == pytest.approx(np.linalg.norm(shift), rel=1e-6)
    assert discrete_ot_cost(x, x + shift) == pytest.approx(float(shift @ shift), rel=1e-6)
    with pytest.raises(ValueError, match="same dimension"):
        wasserstein2(x, x[:, :2])


def test_gaussian_map_diagonal_closed_form():
    # between diagonal Gaussians the OT map scales each axis by the ratio of the stds
    T = gaussian_map([0, 0], np.diag([1.0, 4.0]), [1, 2], np.diag([9.0, 1.0]))
    x = np.array([[1.0, 2.0], [0.0, 0.0]])
    np.testing.assert_allclose(T(x), [[1 + 3.0, 2 + 0.5 * 2.0], [1.0, 2.0]])


def test_gaussian_map_pushes_forward():
    rng = np.random.default_rng(1)
    Cs, Ct = np.array([[1.0, 0.3], [0.3, 0.5]]), np.array([[0.6, -0.2], [-0.2, 1.2]])
    x = D.gaussian(20000, [0, 0], Cs, seed=rng)
    y = gaussian_map([0, 0], Cs, [2, 1], Ct)(x)
    np.testing.assert_allclose(np.cov(y.T), Ct, atol=0.05)
    np.testing.assert_allclose(y.mean(0), [2, 1], atol=0.05)
    # the mapped pairs cost the Bures-Wasserstein distance squared
    bw = float(ot.gaussian.bures_wasserstein_distance(np.zeros(2), np.array([2.0, 1]), Cs, Ct))
    assert plan_cost(x, y) == pytest.approx(bw**2, rel=0.02)


def test_map_error_and_plan_cost():
    y = np.array([[0.0, 0.0], [2.0, 0.0]])
    assert map_error(y, y) == 0.0
    assert map_error(y + 1.0, y) == pytest.approx(2.0 / 1.0)  # E|1,1|^2 / tr Cov = 2 / 1
    assert plan_cost(y, y + np.array([3.0, 4.0])) == pytest.approx(25.0)
    with pytest.raises(ValueError, match="paired"):
        plan_cost(y, y[:1])


def test_quadratic_cost():
    x = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    y = torch.tensor([[3.0, 4.0], [1.0, 1.0]])
    torch.testing.assert_close(QuadraticCost(0.5)(x, y), torch.tensor([12.5, 0.0]))
    with pytest.raises(ValueError, match="tau"):
        QuadraticCost(-1.0)


def test_datasets_shapes_and_support():
    assert D.eight_gaussians(100, seed=0).shape == (100, 2)
    seg = D.segment(100, seed=0)
    assert np.all(seg[:, 1] == 0) and np.all(np.abs(seg[:, 0]) <= 1)
    pm = D.point_masses(200, [[0, 0], [1, 1]], weights=[1, 3], seed=0)
    assert {tuple(p) for p in pm} == {(0.0, 0.0), (1.0, 1.0)}
    assert (pm[:, 0] == 1).mean() == pytest.approx(0.75, abs=0.1)
    assert np.all(D.dirac(5, (1.0, 2.0)) == [1.0, 2.0])
    mix = D.gaussian_and_segment(100, seed=0)
    assert (mix[:, 1] == 0).sum() >= 50
    grey, colour = D.digits_gray_and_colour(seed=0)
    assert grey.shape == colour.shape == (1797, 3, 8, 8)
    assert np.all(grey[:, 0] == grey[:, 1]) and colour.min() >= 0 and colour.max() <= 1
    with pytest.raises(ValueError, match="weights"):
        D.point_masses(10, [[0, 0]], weights=[-1])
