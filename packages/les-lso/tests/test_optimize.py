"""Penalized normalized gradient ascent: closed forms, the penalty's effect, the
reference's stale-Jacobian gradient, bad input."""

import pytest
import torch

from les_lso import decoder_jacobian, les, normalize_rows, optimize_latent


def test_normalize_rows():
    g = torch.tensor([[3.0, 4.0], [0.0, 0.0]])
    torch.testing.assert_close(normalize_rows(g), torch.tensor([[0.6, 0.8], [0.0, 0.0]]))


def test_plain_ascent_on_a_linear_objective_moves_lr_per_step(tiny_vae):
    vae = tiny_vae("gru")
    c = torch.tensor([1.0, -2.0, 2.0], dtype=torch.float64)
    z0 = torch.randn(4, 3, dtype=torch.float64)
    z = optimize_latent(lambda u: u @ c, vae.decoder, z0, lr=0.1, n_steps=5, penalty=None)
    torch.testing.assert_close(z, z0 + 0.5 * c / c.norm())
    same = optimize_latent(lambda u: u @ c, vae.decoder, z0, lr=0.1, n_steps=5, alpha=0.0)
    torch.testing.assert_close(same, z)


@pytest.mark.parametrize("penalty", ["les", "polarity", "likelihood"])
def test_penalty_alone_raises_its_score(tiny_vae, penalty):
    vae = tiny_vae("transformer")
    z0 = 0.5 * torch.randn(6, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    flat = lambda u: u.sum(-1) * 0.0  # noqa: E731  zero gradient: only the penalty moves z
    z = optimize_latent(flat, vae.decoder, z0, lr=0.01, n_steps=5, penalty=penalty, alpha=1.0)
    score = {
        "les": lambda u: les(vae.decoder, u),
        "polarity": lambda u: les(vae.decoder, u, polarity=True),
        "likelihood": lambda u: __import__("les_lso").likelihood_score(vae.decoder, u),
    }[penalty]
    assert (score(z) > score(z0)).all()


def test_callable_penalty(tiny_vae):
    vae = tiny_vae("gru")
    z0 = torch.ones(2, 3, dtype=torch.float64)
    flat = lambda u: u.sum(-1) * 0.0  # noqa: E731
    z = optimize_latent(
        flat, vae.decoder, z0, lr=0.1, n_steps=3, penalty=lambda u: -u.pow(2).sum(-1), alpha=1.0
    )
    torch.testing.assert_close(z, z0 - 0.3 * z0 / z0.norm(dim=1, keepdim=True))


def test_reference_gradient_is_exact_for_a_constant_jacobian(linear_decoder):
    g = torch.Generator().manual_seed(0)
    w, b = (
        torch.randn(12, 3, generator=g, dtype=torch.float64),
        torch.randn(12, dtype=torch.float64),
    )
    decoder = linear_decoder(w, b, 4, 3)
    z0 = torch.randn(3, 3, generator=g, dtype=torch.float64)
    obj = lambda u: -u.pow(2).sum(-1)  # noqa: E731
    full = optimize_latent(obj, decoder, z0, n_steps=4, grad="full")
    ref = optimize_latent(obj, decoder, z0, n_steps=4, grad="reference")
    torch.testing.assert_close(ref, full)


def test_reference_gradient_differs_on_a_nonlinear_decoder(tiny_vae):
    vae = tiny_vae("gru")
    z0 = torch.randn(3, 3, dtype=torch.float64)
    obj = lambda u: -u.pow(2).sum(-1)  # noqa: E731
    full = optimize_latent(obj, vae.decoder, z0, n_steps=3, grad="full")
    ref = optimize_latent(obj, vae.decoder, z0, n_steps=3, grad="reference")
    assert not torch.allclose(ref, full)
    # the reference's step: the gradient of LES with A frozen at z0
    a0 = decoder_jacobian(vae.decoder, z0)
    one = optimize_latent(obj, vae.decoder, z0, n_steps=1, grad="reference")
    zr = z0.clone().requires_grad_(True)
    (gp,) = torch.autograd.grad(les(vae.decoder, zr, a=a0).sum(), zr)
    zo = z0.clone().requires_grad_(True)
    (gf,) = torch.autograd.grad(obj(zo).sum(), zo)
    torch.testing.assert_close(one, z0 + 0.03 * (normalize_rows(gf) + 0.5 * normalize_rows(gp)))


def test_bad_input_is_refused(tiny_vae):
    vae = tiny_vae("gru")
    z0 = torch.zeros(2, 3, dtype=torch.float64)
    obj = lambda u: u.sum(-1)  # noqa: E731
    with pytest.raises(ValueError, match="z0 must be finite"):
        optimize_latent(obj, vae.decoder, torch.full((2, 3), float("nan"), dtype=torch.float64))
    with pytest.raises(ValueError, match=r"z0 must be a floating-point tensor of shape \(B, d\)"):
        optimize_latent(obj, vae.decoder, torch.zeros(3, dtype=torch.float64))
    with pytest.raises(ValueError, match="penalty must be one of"):
        optimize_latent(obj, vae.decoder, z0, penalty="entropy")
    with pytest.raises(ValueError, match="grad must be one of"):
        optimize_latent(obj, vae.decoder, z0, grad="stale")
    with pytest.raises(ValueError, match=r"objective must map z \(B, d\) to values \(B,\)"):
        optimize_latent(lambda u: u, vae.decoder, z0)
    with pytest.raises(ValueError, match="lr must be >"):
        optimize_latent(obj, vae.decoder, z0, lr=0.0)
