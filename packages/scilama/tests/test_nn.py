"""The networks: fusion identities, the official layer layout, the paired reconstruction."""

import math

import pytest
import torch
from torch import nn

from scilama import SciLaMAConfig, SciLaMANetwork, fuse_latents


def _gaussians(seed, shape=(7, 3)):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g), torch.rand(shape, generator=g) + 0.1


def test_identical_modalities_average_is_the_input():
    mu, sigma = _gaussians(0)
    got_mu, got_sigma = fuse_latents([mu, mu, mu], [sigma, sigma, sigma], "average")
    torch.testing.assert_close(got_mu, mu)
    torch.testing.assert_close(got_sigma, sigma)


def test_identical_modalities_poe_keeps_the_mean_and_adds_precisions():
    mu, sigma = _gaussians(1)
    got_mu, got_sigma = fuse_latents([mu, mu], [sigma, sigma], "poe")
    torch.testing.assert_close(got_mu, mu)
    torch.testing.assert_close(got_sigma, sigma / math.sqrt(2), rtol=1e-5, atol=1e-6)
    one_mu, one_sigma = fuse_latents([mu], [sigma], "poe")
    torch.testing.assert_close(one_mu, mu)
    torch.testing.assert_close(one_sigma, sigma, rtol=1e-5, atol=1e-6)


def test_poe_is_the_product_of_two_gaussian_densities():
    (m1, s1), (m2, s2) = _gaussians(2), _gaussians(3)
    mu, sigma = fuse_latents([m1, m2], [s1, s2], "poe")
    # N(m1, s1^2) N(m2, s2^2) is proportional to N(mu, sigma^2): compare log densities
    # at two points, whose difference does not depend on the normalising constant
    a, b = torch.zeros_like(m1), torch.ones_like(m1)

    def logp(x, m, s):
        return -0.5 * ((x - m) / s) ** 2

    lhs = (logp(a, m1, s1) + logp(a, m2, s2)) - (logp(b, m1, s1) + logp(b, m2, s2))
    rhs = logp(a, mu, sigma) - logp(b, mu, sigma)
    torch.testing.assert_close(lhs, rhs, rtol=1e-4, atol=1e-4)


def test_fusion_is_checked():
    mu, sigma = _gaussians(4)
    with pytest.raises(ValueError, match="fusion"):
        fuse_latents([mu], [sigma], "moe")
    with pytest.raises(ValueError, match="one sigma per mu"):
        fuse_latents([mu, mu], [sigma], "average")


def test_layers_follow_the_official_layout():
    cfg = SciLaMAConfig(
        n_genes=10, gene_input_dims=(6,), gene_input_names=("text",), hidden=(8, 4), latent_dim=3
    )
    net = SciLaMANetwork(cfg)
    block = net.cell_encoder.hidden
    kinds = [type(m) for m in block]
    assert kinds == [nn.Linear, nn.LayerNorm, nn.LeakyReLU, nn.Dropout] * 2
    assert not block[1].elementwise_affine
    # decoder: hidden widths reversed, the last hidden layer a plain Linear (h_s, h_f)
    dec = net.cell_decoder.hidden
    assert isinstance(dec[-1], nn.Linear) and dec[-1].out_features == 8
    assert net.cell_decoder.output.out_features == 10 and net.gene_decoder.output is None
    for m in net.modules():
        if isinstance(m, nn.Linear):
            assert torch.count_nonzero(m.bias) == 0  # Xavier weights, zero biases


def test_paired_reconstruction_uses_the_cell_decoder_bias():
    cfg = SciLaMAConfig(
        n_genes=5, gene_input_dims=(3,), gene_input_names=("e",), hidden=(4,), latent_dim=2
    )
    net = SciLaMANetwork(cfg)
    with torch.no_grad():
        net.cell_decoder.output.bias.copy_(torch.arange(5.0))
    h_s, z_s = torch.randn(6, 4), torch.randn(6, 2)
    h_f, z_f = torch.randn(5, 4), torch.randn(5, 2)
    x_hidden, x_latent = net.paired(h_s, z_s, h_f, z_f)
    torch.testing.assert_close(x_hidden, h_s @ h_f.T + torch.arange(5.0))
    torch.testing.assert_close(x_latent, z_s @ z_f.T + torch.arange(5.0))


def test_forward_shapes_and_covariates():
    cfg = SciLaMAConfig(
        n_genes=5,
        gene_input_dims=(3, 2),
        gene_input_names=("a", "b"),
        n_covariates=2,
        hidden=(4,),
        latent_dim=2,
    )
    net = SciLaMANetwork(cfg)
    out = net(torch.randn(6, 5), torch.randn(6, 2))
    assert out["x_hidden"].shape == out["x_latent"].shape == (6, 5)
    assert out["mu_f"].shape == (5, 2) and out["mu_s"].shape == (6, 2)
    with pytest.raises(ValueError, match="covariates must have shape"):
        net(torch.randn(6, 5))


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("dropout", 1.5, "dropout"),
        ("latent_dim", 0, "latent_dim"),
        ("hidden", (), "hidden"),
        ("fusion", "sum", "fusion"),
    ],
)
def test_config_refuses_meaningless_settings(field, value, match):
    with pytest.raises((ValueError, TypeError), match=match):
        SciLaMAConfig(n_genes=3, **{field: value})
