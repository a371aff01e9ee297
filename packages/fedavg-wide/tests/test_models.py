"""Networks and kernels: parameterizations, the analytic NTK as the infinite-width limit,
the empirical NTK against an explicit Jacobian."""

import math

import pytest
import torch
from torch.func import functional_call, jacrev

from fedavg_wide import CNN, MLP, analytic_ntk, empirical_ntk


def _x(n=12, d=5, seed=0):
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_ntk_and_standard_parameterizations_compute_the_same_function_at_init():
    """Same draw, scale in the forward (NTK) or in the weights (standard): same outputs."""
    x = _x()
    a = MLP(5, 3, 64, depth=3, parameterization="ntk", seed=1).double()
    b = MLP(5, 3, 64, depth=3, parameterization="standard", seed=1).double()
    # (the draw is float32: the standard weights hold the scale rounded to float32)
    torch.testing.assert_close(a(x), b(x), rtol=1e-6, atol=1e-6)
    # ... but the NTK parameterization's weights are O(1) at any width, the standard's shrink
    assert float(a.hidden[1].weight.std()) == pytest.approx(1.0, abs=0.05)
    assert float(b.hidden[1].weight.std()) == pytest.approx(math.sqrt(2 / 64), rel=0.05)


def test_analytic_ntk_first_layer_and_nngp_closed_forms():
    x = _x()
    k1 = 2.0 * (x @ x.T) / 5 + 0.1**2
    # one hidden layer: K2 = sw^2 E[relu relu] + sb^2; at x = x' the arc-cosine gives k/2
    nngp = analytic_ntk(x, depth=1, kernel="nngp")
    torch.testing.assert_close(torch.diagonal(nngp), 2.0 * torch.diagonal(k1) / 2 + 0.01)
    ntk = analytic_ntk(x, depth=1)
    # Theta2(x, x) = K2(x, x) + sw^2 * (1/2) * K1(x, x)
    torch.testing.assert_close(torch.diagonal(ntk), torch.diagonal(nngp) + torch.diagonal(k1))
    torch.testing.assert_close(ntk, ntk.T)
    assert torch.linalg.eigvalsh(ntk).min() > 0


def test_empirical_ntk_converges_to_the_analytic_ntk_as_width_grows():
    x = _x(10, 6)
    exact = analytic_ntk(x, depth=2)
    errors = []
    for width in (32, 256, 2048):
        # the average over 3 draws: the error is the draw's O(width^-1/2) fluctuation
        e = [
            float(
                (empirical_ntk(MLP(6, 2, width, seed=s).double(), x, output="trace") - exact).norm()
            )
            / float(exact.norm())
            for s in range(3)
        ]
        errors.append(sum(e) / 3)
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 0.1  # measured 0.066 (0.41 at width 32)
    # the decay is about width^-1/2 (a factor sqrt(8) = 2.8 per step; at least 1.8 asked)
    assert errors[0] / errors[1] > 1.8 and errors[1] / errors[2] > 1.8


def test_empirical_ntk_equals_the_explicit_jacobian_product():
    model = CNN(1, 3, 4, seed=0).double()
    x1 = torch.randn(5, 1, 6, 6, dtype=torch.float64)
    x2 = torch.randn(4, 1, 6, 6, dtype=torch.float64)
    params = {k: v.detach() for k, v in model.named_parameters()}

    def jac(x):
        j = jacrev(lambda p: functional_call(model, p, (x,)))(params)
        return torch.cat([v.reshape(len(x), 3, -1) for v in j.values()], dim=2)

    expected = torch.einsum("iap,jbp->ijab", jac(x1), jac(x2))
    torch.testing.assert_close(empirical_ntk(model, x1, x2), expected)
    trace = empirical_ntk(model, x1, x2, output="trace")
    torch.testing.assert_close(trace, torch.diagonal(expected, dim1=2, dim2=3).mean(-1))


def test_empirical_ntk_in_chunks_equals_one_chunk(monkeypatch):
    import fedavg_wide.linearization as lin

    model = MLP(5, 2, 16, seed=0).double()
    x = _x(9)
    whole = empirical_ntk(model, x)
    n_params = sum(p.numel() for p in model.parameters())
    monkeypatch.setattr(lin, "CHUNK_BYTES", 3 * n_params * 8)  # one sample (2 rows) per chunk
    torch.testing.assert_close(empirical_ntk(model, x), whole)


def test_cnn_shapes_and_bad_input():
    model = CNN(1, 10, 8, seed=0)
    assert model(torch.zeros(3, 1, 8, 8)).shape == (3, 10)
    with pytest.raises(ValueError, match="width"):
        MLP(4, 1, 0)
    with pytest.raises(ValueError, match="width"):
        CNN(1, 1, 0)
    with pytest.raises(ValueError, match="parameterization"):
        MLP(4, 1, 8, parameterization="mup")
    with pytest.raises(ValueError, match="depth"):
        MLP(4, 1, 8, depth=0)
    with pytest.raises(ValueError, match="features"):
        MLP(4, 1, 8)(torch.zeros(2, 5))
    with pytest.raises(ValueError, match=r"shape \(N, 1, H, W\)"):
        model(torch.zeros(3, 8, 8))
    with pytest.raises(ValueError, match="same features"):
        analytic_ntk(torch.zeros(2, 3), torch.zeros(2, 4))


def test_analytic_ntk_at_zero_input_without_bias_is_finite_and_matches_torch():
    """x = 0 with sigma_b = 0 makes every pre-activation 0: the kernel is 0 (relu'(0) = 0,
    torch's convention), not NaN, and equals the empirical NTK of a wide network."""
    x = torch.zeros(2, 3, dtype=torch.float64)
    k = analytic_ntk(x, sigma_b=0.0)
    assert torch.isfinite(k).all()
    model = MLP(3, 1, 64, depth=2, sigma_b=0.0, seed=0).double()
    torch.testing.assert_close(empirical_ntk(model, x, output="trace"), k)


def test_official_init_draws_every_weight_with_variance_one_and_a_half_over_width():

    net = MLP(784, 1, 128, depth=2, parameterization="official", seed=0)
    for layer in [*net.hidden, net.readout]:
        assert float(layer.weight.detach().std()) == pytest.approx((1.5 / 128) ** 0.5, rel=0.1)
        assert (layer.w_scale, layer.b_scale) == (1.0, 1.0)  # the standard forward
    biases = torch.cat([layer.bias.detach() for layer in [*net.hidden, net.readout]])
    assert float(biases.std()) == pytest.approx(0.1, rel=0.15)
    with pytest.raises(ValueError, match="official regression MLP"):
        CNN(1, 10, 8, parameterization="official")
    with pytest.raises(ValueError, match="parameterization"):
        MLP(4, 1, 8, parameterization="mup")
