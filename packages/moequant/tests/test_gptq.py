"""GPTQ, RTN and bit packing on single matrices: oracles with known answers."""

import math

import pytest
import torch

from moequant import Hessian, gptq, pack, reconstruction_error, rtn, unpack


def _data(seed=0, rows=24, cols=64, n=512):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, cols, generator=g) @ torch.randn(cols, cols, generator=g) * 0.2
    return torch.randn(rows, cols, generator=g), x


@pytest.mark.parametrize("bits", range(2, 9))
def test_pack_round_trip_and_exact_size(bits):
    codes = torch.randint(0, 2**bits, (7, 13), generator=torch.Generator().manual_seed(bits))
    packed = pack(codes, bits)
    assert packed.dtype == torch.uint8 and packed.numel() == math.ceil(7 * 13 * bits / 8)
    assert torch.equal(unpack(packed, bits, (7, 13)), codes)


def test_hessian_is_the_mean_outer_product_and_weighted_rows_scale_it():
    _, x = _data()
    h = Hessian(64)
    h.add(x[:100])
    h.add(x[100:])
    torch.testing.assert_close(h.H, 2 * x.double().T @ x.double() / len(x))
    c = torch.rand(len(x), generator=torch.Generator().manual_seed(1))
    hw = Hessian(64)
    hw.add(x, c)
    torch.testing.assert_close(hw.H, 2 * (x.double() * c[:, None]).T @ x.double() / len(x))


@pytest.mark.parametrize(("group_size", "sym"), [(-1, False), (16, False), (16, True)])
def test_gptq_with_identity_hessian_is_round_to_nearest(group_size, sym):
    w, _ = _data()
    q = gptq(w, torch.eye(64, dtype=torch.float64), 3, group_size, sym)
    r = rtn(w, 3, group_size, sym)
    assert torch.equal(q.codes, r.codes)
    torch.testing.assert_close(q.scales, r.scales)


@pytest.mark.parametrize("act_order", [False, True])
def test_gptq_beats_rtn_on_reconstruction_error(act_order):
    for seed in range(3):
        w, x = _data(seed)
        h = Hessian(64)
        h.add(x)
        q = gptq(w, h.H, 3, 16, act_order=act_order).dequantize()
        r = rtn(w, 3, 16).dequantize()
        # GPTQ's whole point; at 3 bits it roughly halves the error on correlated inputs
        assert reconstruction_error(w, q, h.H) < 0.8 * reconstruction_error(w, r, h.H)


def test_scaling_the_hessian_changes_nothing():
    """Scaling every affinity by a constant scales H; relative damping makes GPTQ ignore it."""
    w, x = _data()
    c = torch.rand(len(x), generator=torch.Generator().manual_seed(2))
    h1, h2 = Hessian(64), Hessian(64)
    h1.add(x, c)
    h2.add(x, 7.5 * c)
    a, b = gptq(w, h1.H, 4, 16, act_order=True), gptq(w, h2.H, 4, 16, act_order=True)
    assert torch.equal(a.codes, b.codes) and torch.equal(a.g_idx, b.g_idx)
    torch.testing.assert_close(a.scales, b.scales)


def test_act_order_groups_follow_the_hessian_diagonal():
    w, x = _data()
    x[:, 5] *= 10  # the most active input column is quantized first: group 0
    h = Hessian(64)
    h.add(x)
    q = gptq(w, h.H, 4, 16, act_order=True)
    assert q.g_idx[5] == 0 and torch.bincount(q.g_idx).tolist() == [16] * 4


def test_bad_arguments():
    w, _ = _data()
    with pytest.raises(ValueError, match="bits"):
        rtn(w, 9)
    with pytest.raises(ValueError, match="group_size"):
        rtn(w, 4, 48)
    with pytest.raises(ValueError, match="H must be"):
        gptq(w, torch.eye(32), 4, 16)


def test_non_finite_weights_damping_and_out_of_range_codes_are_refused():
    w, x = _data()
    h = Hessian(64)
    h.add(x)
    bad = w.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match="w must be finite"):
        rtn(bad, 4, 16)
    with pytest.raises(ValueError, match="w must be finite"):
        gptq(bad, h.H, 4, 16)
    with pytest.raises(ValueError, match=r"damp must be finite"):
        gptq(w, h.H, 4, 16, damp=float("nan"))
    with pytest.raises(ValueError, match=r"damp must be > 0\.0"):
        gptq(w, h.H, 4, 16, damp=0.0)
    with pytest.raises(
        ValueError, match=r"codes must lie in \[0, 16\) for bits=4, got range \[0, 16\]"
    ):
        pack(torch.tensor([0, 3, 16]), 4)
    with pytest.raises(ValueError, match="codes must lie in"):
        pack(torch.tensor([-1, 3]), 4)
    with pytest.raises(TypeError, match="codes must be an integer tensor"):
        pack(torch.tensor([0.5]), 4)
    codes = torch.tensor([0, 7, 15, 9])
    assert unpack(pack(codes, 4), 4, (4,)).tolist() == codes.tolist()
