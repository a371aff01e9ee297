"""LES against closed forms, torch.func, its invariances and finite differences; the
baseline scores against their formulas; bad input."""

import math

import pytest
import torch
from torch.func import jacrev

from les_lso import (
    decoder_jacobian,
    knn_score,
    les,
    likelihood_score,
    prior_score,
    softmax_jacobian,
)

L, V, D = 4, 3, 5


def _softmax_and_inverse_z(logits):
    """The map LES differentiates, per position: ``[softmax(l), 1/Z]``."""
    return torch.cat([torch.softmax(logits, -1), 1 / torch.exp(logits).sum(-1, keepdim=True)], -1)


def test_linear_decoder_with_polarity_is_the_log_volume_of_w(linear_decoder):
    g = torch.Generator().manual_seed(0)
    w, b = (
        torch.randn(L * V, D, generator=g, dtype=torch.float64),
        torch.randn(L * V, dtype=torch.float64),
    )
    z = torch.randn(6, D, generator=g, dtype=torch.float64)
    want = -0.5 * torch.linalg.slogdet(w.T @ w).logabsdet
    torch.testing.assert_close(les(linear_decoder(w, b, L, V), z, polarity=True), want.expand(6))


def test_square_jacobian_gives_minus_log_abs_det(linear_decoder):
    w = torch.randn(L * V, L * V, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    z = torch.randn(2, L * V, dtype=torch.float64)
    want = -torch.linalg.slogdet(w).logabsdet
    torch.testing.assert_close(
        les(linear_decoder(w, torch.zeros(L * V, dtype=torch.float64), L, V), z, polarity=True),
        want.expand(2),
    )


def test_softmax_block_equals_jacrev_of_softmax_and_inverse_normalizer():
    logits = torch.randn(2, L, V, dtype=torch.float64) * 3
    blocks = softmax_jacobian(logits)
    assert blocks.shape == (2, L, V + 1, V)
    for b in range(2):
        for t in range(L):
            torch.testing.assert_close(blocks[b, t], jacrev(_softmax_and_inverse_z)(logits[b, t]))


@pytest.mark.parametrize("decoder", ["gru", "lstm", "transformer"])
def test_les_equals_the_log_volume_of_the_composed_map(tiny_vae, decoder):
    vae = tiny_vae(decoder)
    z = torch.randn(3, 3, dtype=torch.float64)

    def composed(zi):
        return _softmax_and_inverse_z(vae.decoder(zi[None])[0]).reshape(-1)

    for i in range(3):
        j = jacrev(composed)(z[i])
        want = -0.5 * torch.linalg.slogdet(j.T @ j).logabsdet
        torch.testing.assert_close(les(vae.decoder, z[i : i + 1])[0], want)
        a = jacrev(lambda zi: vae.decoder(zi[None])[0])(z[i]).reshape(-1, 3)
        want_polarity = -0.5 * torch.linalg.slogdet(a.T @ a).logabsdet
        torch.testing.assert_close(les(vae.decoder, z[i : i + 1], polarity=True)[0], want_polarity)


@pytest.mark.parametrize("polarity", [False, True])
def test_orthogonal_reparametrization_leaves_les_unchanged(tiny_vae, polarity):
    vae = tiny_vae("gru")
    q, _ = torch.linalg.qr(
        torch.randn(3, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    )
    z = torch.randn(4, 3, dtype=torch.float64)
    rotated = lambda u: vae.decoder(u @ q.T)  # noqa: E731  decoder(Q u)
    torch.testing.assert_close(
        les(rotated, z @ q, polarity=polarity), les(vae.decoder, z, polarity=polarity)
    )


def test_scaling_z_by_s_shifts_les_by_minus_d_log_s(tiny_vae):
    vae = tiny_vae("transformer")
    s, z = 2.5, torch.randn(4, 3, dtype=torch.float64)
    scaled = lambda u: vae.decoder(s * u)  # noqa: E731  the decoder fed s z: J scales by s
    torch.testing.assert_close(les(scaled, z), les(vae.decoder, s * z) - 3 * math.log(s))


@pytest.mark.parametrize("decoder", ["gru", "lstm", "transformer"])
def test_finite_differences_agree_with_autograd(tiny_vae, decoder):
    vae = tiny_vae(decoder)
    z = torch.randn(5, 3, dtype=torch.float64)
    a = decoder_jacobian(vae.decoder, z)
    a_fd = decoder_jacobian(vae.decoder, z, jacobian="fd", eps=1e-5)
    assert a.shape == (5, 8, 5, 3)
    torch.testing.assert_close(a_fd, a, rtol=1e-6, atol=1e-8)
    torch.testing.assert_close(
        les(vae.decoder, z, jacobian="fd", eps=1e-5), les(vae.decoder, z), rtol=1e-7, atol=1e-6
    )


def test_gradient_of_les_matches_its_finite_differences(tiny_vae):
    vae = tiny_vae("gru")
    z = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda u: les(vae.decoder, u), (z,), eps=1e-6, atol=1e-5)


def test_scores_run_in_eval_mode_and_restore_the_mode(tiny_vae):
    vae = tiny_vae("gru", dropout=0.5).train()
    z = torch.randn(3, 3, dtype=torch.float64)
    first = les(vae.decoder, z)
    torch.testing.assert_close(les(vae.decoder, z), first)  # no dropout noise
    assert vae.decoder.training
    torch.testing.assert_close(likelihood_score(vae.decoder, z), likelihood_score(vae.decoder, z))
    assert vae.decoder.training


def test_float32_decoder_takes_float64_latents(tiny_vae):
    vae = tiny_vae("gru", dtype=torch.float32)
    z = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    s = les(vae.decoder, z)
    assert s.dtype == torch.float64
    (g,) = torch.autograd.grad(s.sum(), z)
    assert g.dtype == torch.float64 and torch.isfinite(g).all()


def test_precomputed_jacobian_is_used(tiny_vae):
    vae = tiny_vae("gru")
    z0, z1 = torch.randn(2, 3, dtype=torch.float64), torch.randn(2, 3, dtype=torch.float64)
    a0 = decoder_jacobian(vae.decoder, z0)
    torch.testing.assert_close(les(vae.decoder, z0, a=a0), les(vae.decoder, z0))
    assert not torch.allclose(les(vae.decoder, z1, a=a0), les(vae.decoder, z1))


def test_baseline_scores_match_their_formulas(tiny_vae):
    vae = tiny_vae("gru")
    z = torch.randn(6, 3, dtype=torch.float64)
    logp = torch.log_softmax(vae.decoder(z), -1)
    torch.testing.assert_close(likelihood_score(vae.decoder, z), logp.max(-1).values.sum(-1))
    normal = torch.distributions.Normal(0.0, 0.3)
    torch.testing.assert_close(prior_score(z, scale=0.3), normal.log_prob(z).sum(-1))
    ref = torch.randn(20, 3, dtype=torch.float64)
    brute = torch.stack([-(ref - zi).norm(dim=1).sort().values[:3].mean() for zi in z])
    torch.testing.assert_close(knn_score(z, ref, k=3), brute)


def test_bad_input_is_refused(tiny_vae):
    vae = tiny_vae("gru")
    z = torch.randn(2, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"shape \(B, 3\)"):
        les(vae.decoder, torch.randn(2, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="finite"):
        les(vae.decoder, torch.tensor([[0.0, float("nan"), 0.0]], dtype=torch.float64))
    with pytest.raises(TypeError, match="floating-point"):
        les(vae.decoder, torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(TypeError, match=r"torch\.Tensor"):
        les(vae.decoder, [[0.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match=r"logits \(B, L, V\)"):
        les(lambda u: u, z)
    with pytest.raises(ValueError, match="non-finite logits"):
        les(lambda u: torch.full((u.shape[0], 2, 2), float("inf"), dtype=u.dtype), z)
    with pytest.raises(ValueError, match="jacobian must be one of"):
        les(vae.decoder, z, jacobian="numeric")
    with pytest.raises(ValueError, match="a must have shape"):
        les(vae.decoder, z, a=torch.zeros(2, 8, 5, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="columns like z"):
        knn_score(z, torch.zeros(5, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="k must be <="):
        knn_score(z, torch.zeros(2, 3, dtype=torch.float64), k=3)
    with pytest.raises(ValueError, match="scale must be >"):
        prior_score(z, scale=0.0)


def test_decoder_without_forward_mode_support_points_to_fd():
    gru = torch.nn.GRU(2, 3, batch_first=True).double()

    def decoder(z):
        out, _ = gru(z[:, None, :].expand(-1, 4, -1))
        return out

    z = torch.randn(2, 2, dtype=torch.float64)
    with pytest.raises(TypeError, match="jacobian='fd'"):
        les(decoder, z)
    assert torch.isfinite(les(decoder, z, jacobian="fd")).all()


def test_fd_matches_the_exact_score_on_a_trained_float32_decoder():
    """On a trained decoder (saturated softmax, where two-point float32 differences lose
    whole nats), the default fd stays at float32 autograd's distance from the exact
    float64 score."""
    import copy

    from les_lso import SequenceVAE, train_vae
    from les_lso.grammar import encode, sample_expressions

    tokens = torch.as_tensor(encode(sample_expressions(300, seed=0)))
    torch.manual_seed(0)
    vae = SequenceVAE(
        vocab_size=int(tokens.max()) + 1,
        max_length=tokens.shape[1],
        latent_dim=4,
        hidden_size=16,
        num_layers=1,
    )
    train_vae(vae, tokens, epochs=15, batch_size=64, lr=3e-3, beta=0.1)
    gen = torch.Generator().manual_seed(1)
    z = (
        torch.randn(12, 4, generator=gen)
        * vae.eps_std
        * torch.tensor([1.0, 5.0]).repeat(6)[:, None]
    )
    with torch.no_grad():
        exact = les(copy.deepcopy(vae.decoder).double(), z.double())
        fd = les(vae.decoder, z, jacobian="fd")
        autograd32 = les(vae.decoder, z)
    assert fd.dtype == torch.float32
    err_fd = float((fd.double() - exact).abs().max())
    err_autograd = float((autograd32.double() - exact).abs().max())
    assert err_fd < max(3 * err_autograd, 1e-4)  # measured 4.9e-6 (autograd 5.3e-6)
    # the two-point float32 differences the default replaced (eps=1e-4, central)
    with torch.no_grad():
        steps = 1e-4 * torch.eye(4)
        shifted = torch.cat([z[:, None] + steps, z[:, None] - steps], 1).reshape(-1, 4)
        out = vae.decoder(shifted).reshape(12, 2, 4, *vae.decoder(z[:1]).shape[1:])
        a = ((out[:, 0] - out[:, 1]) / 2e-4).permute(0, 2, 3, 1)
        old = les(vae.decoder, z, a=a)
    assert float((old.double() - exact).abs().max()) > 30 * err_fd  # measured 0.091


def test_uncertainty_is_the_reference_mutual_information_in_probability_space(tiny_vae):
    """The log-space computation equals the mutual information written out in
    probabilities, with the same dropout masks (same calls from the same seed)."""
    from les_lso import uncertainty_score

    vae = tiny_vae()  # float64, GRU with dropout 0.2 between its two layers
    z = 0.5 * torch.randn(5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    state = torch.random.get_rng_state()
    got = uncertainty_score(vae.decoder, z, n_models=4, n_preds=3, seed=7)
    assert torch.equal(torch.random.get_rng_state(), state) and not vae.decoder.training
    dec = vae.decoder.train()
    torch.manual_seed(7)
    draws = []
    with torch.no_grad():
        for _ in range(3):
            greedy = dec(z).argmax(-1)
            probs = torch.softmax(dec(z.repeat(4, 1)), -1)
            p = probs.gather(-1, greedy.repeat(4, 1)[..., None])[..., 0].prod(-1)
            p = p.reshape(4, -1).T  # (B, M)
            mean = p.mean(1)
            draws.append((-mean * mean.log() + (p * p.log()).mean(1)) / mean)
    dec.eval()
    want = -torch.log(torch.stack(draws, 1).mean(1))
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)
    assert (torch.stack(draws) > 0).all()  # dropout makes the masks disagree

    def deterministic(u):  # no dropout: every mask agrees, zero mutual information
        return torch.stack([u, -u, u**2], dim=-1).repeat(1, 1, 1)

    certain = uncertainty_score(deterministic, z, n_models=3, n_preds=2)
    assert torch.isfinite(certain).all() and (certain > 600).all()
    assert (got < 100).all()
