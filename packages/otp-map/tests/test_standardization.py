"""Standardised training (0.2.3): equivariance, the potential in data units, old saves,
the per-source noise floor and the k-point bound."""

import json

import numpy as np
import pytest
import torch

from otp_map import OTP, SemiDualOT
from otp_map.metrics import quantization_bound
from otp_map.schedules import DEFAULT_FLOOR, source_floor

SMALL = {"hidden": (16, 16), "seed": 0}


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(1)
    return rng.normal(size=(300, 2)) * [1.0, 0.5], rng.normal(size=(300, 2)) * [0.4, 1.2]


@pytest.mark.parametrize(("cls", "c_y"), [(SemiDualOT, 0.5), (OTP, 3.0)])
def test_training_is_equivariant_to_shifts_and_scales(cls, c_y, data):
    # the quadratic cost's plan commutes with x -> c_x x + a, y -> c_y y + b (OTP: one
    # common scale, since its noise is in units of the target's scale); standardised, the
    # networks see the same numbers up to float rounding, so the maps agree
    xs, xt = data
    c_x, a, b = 3.0, np.array([5.0, -1.0]), np.array([-2.0, 4.0])
    one = cls(**SMALL).fit(xs, xt, n_iter=30, batch_size=32)
    two = cls(**SMALL).fit(c_x * xs + a, c_y * xt + b, n_iter=30, batch_size=32)
    x = xs[:50]
    np.testing.assert_allclose(two.map(c_x * x + a), c_y * one.map(x) + b, atol=1e-3 * c_y)
    assert two.eps_ == pytest.approx(c_y * one.eps_, rel=1e-5)


def test_without_standardization_the_shift_must_be_learned(data):
    xs, xt = data
    a = np.array([50.0, 0.0])
    raw = SemiDualOT(standardize=False, **SMALL).fit(xs, xt + a, n_iter=30, batch_size=32)
    std = SemiDualOT(**SMALL).fit(xs, xt + a, n_iter=30, batch_size=32)
    # standardised, the residual map starts at the shift between the means; raw it starts
    # at the identity and 30 steps of Adam at lr 1e-3 move it far less than 50
    assert abs(std.map(xs).mean(0)[0] - 50.0) < 1.0
    assert abs(raw.map(xs).mean(0)[0] - 50.0) > 40.0


@pytest.mark.parametrize("tau", [1.0, 0.3])
def test_potential_is_the_data_units_potential(data, tau):
    # the map's objective tau ||x - y||^2 - V(y) in data units equals s^2 times the one the
    # networks train on, up to a term in x alone: differences over y must agree
    xs, xt = data
    model = OTP(tau=tau, **SMALL).fit(xs, 2.0 * xt + 3.0, n_iter=20, batch_size=32)
    nets = model.networks_
    x = torch.tensor(xs[:1], dtype=torch.float32).expand(40, 2)
    y = torch.tensor(2.0 * xt[:40] + 3.0, dtype=torch.float32)
    data_obj = tau * (x - y).pow(2).sum(1) - torch.as_tensor(model.potential(y))
    with torch.no_grad():
        xn, yn = nets.source_in(x), nets.target_in(y)
        net_obj = tau * (xn - yn).pow(2).sum(1) - model.potential_net_(yn)
    factor = float(nets.source_scale * nets.target_scale)
    torch.testing.assert_close(
        data_obj - data_obj[0], factor * (net_obj - net_obj[0]), rtol=1e-4, atol=1e-4
    )


def test_a_model_saved_before_standardization_loads_as_it_was(data, tmp_path):
    model = OTP(standardize=False, **SMALL).fit(*data, n_iter=20, batch_size=32)
    model.save_pretrained(tmp_path / "m")
    cfg_path = tmp_path / "m" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    del cfg["network"]["standardized"]  # the 0.2.2 layout: neither key
    del cfg["estimator"]["params"]["standardize"]
    cfg_path.write_text(json.dumps(cfg))
    again = OTP.from_pretrained(tmp_path / "m")
    assert again.standardize is False
    x = data[0][:20]
    np.testing.assert_array_equal(again.map(x), model.map(x))
    np.testing.assert_array_equal(again.potential(x), model.potential(x))


def test_source_floor():
    rng = np.random.default_rng(0)
    corners = torch.tensor([[-1.0, -1], [1, 1], [1, -1], [-1, 1]])
    atoms = corners[torch.as_tensor(rng.integers(0, 4, 1000))]
    assert source_floor(atoms, 2) == pytest.approx(4 ** (-1 / 2))  # K = 4 atoms in 2-D
    assert source_floor(torch.zeros(50, 3), 3) == 1.0  # a Dirac: one atom
    assert source_floor(atoms, 2, floor=0.7) == 0.7  # never below the floor asked for
    segment = torch.tensor(np.c_[rng.uniform(-1, 1, 1000), np.zeros(1000)])
    assert source_floor(segment, 2) == DEFAULT_FLOOR  # distinct points: no atoms
    many = corners.repeat_interleave(2, 0)[:5]  # 5 rows, 3 distinct
    assert source_floor(many, 1) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="dim"):
        source_floor(atoms, 0)


def test_default_schedule_uses_the_source_floor(tmp_path):
    rng = np.random.default_rng(0)
    corners = np.array([[-1.0, -1], [1, 1], [1, -1], [-1, 1]])
    src = corners[rng.integers(0, 4, 400)]
    model = OTP(**SMALL).fit(src, rng.normal(size=(400, 2)), n_iter=5, batch_size=16)
    assert model.schedule is None
    assert model.schedule_.floor == pytest.approx(0.5)
    model.save_pretrained(tmp_path / "m")
    assert OTP.from_pretrained(tmp_path / "m").schedule_ == model.schedule_
    gauss = OTP(**SMALL).fit(rng.normal(size=(400, 2)), src, n_iter=5, batch_size=16)
    assert gauss.schedule_.floor == DEFAULT_FLOOR


def test_quantization_bound_oracles():
    rng = np.random.default_rng(0)
    y = rng.normal(size=(300, 2)) * [2.0, 0.5]
    # one atom: the best point is the mean, W2^2 = total variance
    assert quantization_bound(y, 1) == pytest.approx(np.sqrt(y.var(0).sum()), rel=1e-9)
    assert quantization_bound(y, 300) == pytest.approx(0.0, abs=1e-9)  # every point an atom
    two = np.r_[np.zeros((10, 2)), np.ones((10, 2))]
    assert quantization_bound(two, 2) == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ValueError, match="k must be"):
        quantization_bound(y, 0)
