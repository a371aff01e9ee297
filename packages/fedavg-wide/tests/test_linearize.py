"""The linearized model: equal to the network at theta0, its jvp equal to autograd's
Jacobian-vector product, trainable; weight and kernel change measures."""

import copy

import pytest
import torch
from torch.func import functional_call

from fedavg_wide import MLP, FedAvg, linearize, ntk_change, relative_weight_change


def _model():
    return MLP(4, 2, 16, seed=0).double()


def _x():
    return torch.randn(7, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)


def test_linearized_model_equals_the_network_at_theta0():
    model, x = _model(), _x()
    lin = linearize(model)
    torch.testing.assert_close(lin(x), model(x), rtol=0, atol=0)
    assert [n for n, _ in lin.named_parameters()] == [
        f"net.{n}" for n, _ in model.named_parameters()
    ]


def test_linearized_output_is_f0_plus_the_autograd_jacobian_times_the_step():
    model, x = _model(), _x()
    lin = linearize(model)
    gen = torch.Generator().manual_seed(1)
    step = {
        n: 0.05 * torch.randn(p.shape, generator=gen, dtype=p.dtype)
        for n, p in model.named_parameters()
    }
    with torch.no_grad():
        for n, p in lin.net.named_parameters():
            p.add_(step[n])
    names = list(step)
    params0 = tuple(p.detach() for p in model.parameters())

    def f(*flat):
        return functional_call(model, dict(zip(names, flat, strict=True)), (x,))

    jac = torch.autograd.functional.jacobian(f, params0)  # per parameter: (7, 2, *shape)
    expected = model(x) + sum(
        torch.einsum("nk...,...->nk", j, step[n]) for j, n in zip(jac, names, strict=True)
    )
    torch.testing.assert_close(lin(x), expected)
    # linear in theta: doubling the step doubles the change
    with torch.no_grad():
        for n, p in lin.net.named_parameters():
            p.add_(step[n])
    torch.testing.assert_close(lin(x) - model(x), 2 * (expected - model(x)))


def test_the_linearized_model_trains_and_keeps_theta0_fixed():
    model, x = _model(), _x()
    y = torch.randn(7, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    lin = linearize(model)
    base = copy.deepcopy(dict(lin.base.named_buffers()))
    hist = FedAvg(lin, [(x[:4], y[:4]), (x[4:], y[4:])], lr=0.2, local_steps=3, rounds=5)
    assert hist.train_loss[-1] < 0.7 * hist.train_loss[0]
    for n, b in hist.model.base.named_buffers():
        torch.testing.assert_close(b, base[n], rtol=0, atol=0)
    # the trained network is not changed by linearize()
    torch.testing.assert_close(model(x), _model()(x), rtol=0, atol=0)


def test_weight_and_kernel_change_are_zero_at_init_and_positive_after_training():
    model, x = _model(), _x()
    assert relative_weight_change(model, copy.deepcopy(model)) == 0.0
    assert ntk_change(model, copy.deepcopy(model), x) == 0.0
    y = torch.zeros(7, 2, dtype=torch.float64)
    trained = FedAvg(model, [(x, y + 1.0)], lr=0.5, local_steps=2, rounds=3).model
    assert relative_weight_change(trained, model) > 0
    per = relative_weight_change(trained, model, per_layer=True)
    assert set(per) == {n for n, _ in model.named_parameters()} and all(v > 0 for v in per.values())
    assert ntk_change(trained, model, x) > 0
    with pytest.raises(ValueError, match="same parameters"):
        relative_weight_change(trained, MLP(4, 2, 8).double())
    with pytest.raises(TypeError, match=r"nn\.Module"):
        linearize(lambda t: t)


def test_official_metrics_weight_rmse_and_taylor_remainder():
    from fedavg_wide import linearization_gap, weight_rmse

    ref = MLP(5, 2, 16, depth=2, seed=0).double()
    moved = copy.deepcopy(ref)
    with torch.no_grad():
        for p in moved.parameters():
            p.add_(0.3)
    assert weight_rmse(moved, ref) == pytest.approx(0.3, rel=1e-12)
    # the Taylor remainder of an affine model is zero; of a ReLU net it is second order
    lin_model = torch.nn.Linear(5, 2).double()
    shifted = copy.deepcopy(lin_model)
    with torch.no_grad():
        shifted.weight.add_(1.0)
    x = torch.randn(40, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert linearization_gap(shifted, lin_model, x) < 1e-12
    torch.manual_seed(0)  # a smooth network: the remainder is exactly second order
    smooth = torch.nn.Sequential(
        torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2)
    ).double()
    direction = [torch.randn_like(p) for p in smooth.parameters()]
    gaps = []
    for step in (1e-2, 5e-3):
        m = copy.deepcopy(smooth)
        with torch.no_grad():
            for p, d in zip(m.parameters(), direction, strict=True):
                p.add_(step * d)
        gaps.append(linearization_gap(m, smooth, x))
    assert gaps[0] / gaps[1] == pytest.approx(4.0, rel=0.05)  # halving the step quarters it
