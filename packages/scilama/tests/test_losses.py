"""The objectives against a hand computation, and the KL warm-up schedule."""

import numpy as np
import pytest
import torch
from torch.distributions import Normal, kl_divergence

from scilama import beta_at, cell_vae_loss, gene_vae_loss, joint_loss, kl_standard_normal
from scilama.losses import first_full_beta_epoch


def _tiny(seed=0):
    g = torch.Generator().manual_seed(seed)
    cells, genes, d = 3, 4, 2
    x = torch.randn(cells, genes, generator=g)
    xh, xl = torch.randn(cells, genes, generator=g), torch.randn(cells, genes, generator=g)
    mu_s, s_s = torch.randn(cells, d, generator=g), torch.rand(cells, d, generator=g) + 0.2
    mu_f, s_f = torch.randn(genes, d, generator=g), torch.rand(genes, d, generator=g) + 0.2
    return x, xh, xl, mu_s, s_s, mu_f, s_f


def test_kl_matches_torch_distributions():
    _, _, _, mu, s, _, _ = _tiny()
    want = kl_divergence(Normal(mu, s), Normal(0.0, 1.0)).sum(-1)
    torch.testing.assert_close(kl_standard_normal(mu, s), want)


def _kl(mu, s):
    mu, s = mu.double().numpy(), s.double().numpy()
    return (0.5 * (mu**2 + s**2 - 1) - np.log(s)).sum(1)


def test_joint_loss_equals_a_hand_computation():
    x, xh, xl, mu_s, s_s, mu_f, s_f = _tiny()
    beta, gamma = 0.3, 0.05
    X, XH, XL = (t.double().numpy() for t in (x, xh, xl))
    sse = ((XH - X) ** 2).sum(1) + gamma * ((XL - X) ** 2).sum(1)  # per cell
    want = sse.mean() + beta * (_kl(mu_s, s_s).mean() + _kl(mu_f, s_f).mean())
    got, parts = joint_loss(x, xh, xl, mu_s, s_s, mu_f, s_f, beta, gamma)
    assert float(got) == pytest.approx(want, rel=1e-5)
    assert float(parts["mse"]) == pytest.approx(sse.mean(), rel=1e-5)


def test_gene_and_cell_losses_equal_a_hand_computation():
    x, xh, xl, mu_s, s_s, mu_f, s_f = _tiny(1)
    X, XH = x.double().numpy(), xh.double().numpy()
    want = ((XH - X) ** 2).sum(1).mean() + 0.5 * _kl(mu_f, s_f).mean()  # gamma = 0
    got, _ = gene_vae_loss(x, xh, xl, mu_f, s_f, 0.5, 0.0)
    assert float(got) == pytest.approx(want, rel=1e-5)
    want = (((XH - X) ** 2).sum(1) + 2.0 * _kl(mu_s, s_s)).mean()
    got, _ = cell_vae_loss(x, xh, mu_s, s_s, 2.0)
    assert float(got) == pytest.approx(want, rel=1e-5)


def test_beta_schedule_is_the_official_one():
    assert [beta_at(e) for e in (0, 10, 25)] == [0.0, 0.0, 0.0]
    assert beta_at(26) == pytest.approx(0.05)
    assert beta_at(35) == pytest.approx(0.5)
    assert beta_at(45) == pytest.approx(1.0)
    assert beta_at(300) == 1.0
    assert first_full_beta_epoch() == 45
    assert beta_at(44) < 1.0
    assert first_full_beta_epoch(warmup_epochs=0, rate=0.5) == 2
    assert beta_at(3, warmup_epochs=0, rate=0.5, end=0.7) == 0.7
