r"""The Latent Exploration Score and the scores it is compared with.

A decoder maps latents ``z (B, d)`` to logits ``l(z) (B, L, V)`` over ``L`` positions and
``V`` symbols. With ``A = dl/dz`` (``L V x d`` per sample) and, at each position, the
Jacobian of the softmax and of the inverse normalizing constant ``1/Z``, ``Z = sum_v
exp(l_v)``, with respect to the logits,

.. math::

    S_t = \begin{pmatrix} \mathrm{diag}(s_t) - s_t s_t^\top \\
          -\exp(l_t)^\top / Z_t^2 \end{pmatrix} \in \mathbb{R}^{(V+1) \times V},

the score is

.. math::

    \mathrm{LES}(z) = -\tfrac12 \log\det(J^\top J) = -\sum_i \log \sigma_i(J),
    \qquad J = \mathrm{blockdiag}(S_1, \dots, S_L)\, A \in \mathbb{R}^{L(V+1) \times d},

computed from the singular values of ``J`` (never a determinant). ``polarity=True`` uses
``J = A`` (the score of the logits map itself). Higher is more in-distribution: the
decoder contracts volume where it was trained and expands it where it extrapolates.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch
from torch.func import functional_call, jacfwd, vmap

from icml25_core import check_array, check_choice, check_scalar, quiet_forward_mode

__all__ = [
    "JACOBIANS",
    "decoder_jacobian",
    "knn_score",
    "les",
    "likelihood_score",
    "prior_score",
    "softmax_jacobian",
    "uncertainty_score",
]

JACOBIANS = ("autograd", "fd")
Decoder = Callable[[torch.Tensor], torch.Tensor]


class _eval_mode:
    """Put a module in eval mode (or, ``training=True``, train mode) for the block and
    restore its mode after (scores never use dropout, except the uncertainty's)."""

    def __init__(self, decoder: Decoder, training: bool = False) -> None:
        self.module = decoder if isinstance(decoder, torch.nn.Module) else None
        self.training = training

    def __enter__(self) -> None:
        if self.module is not None:
            self.was_training = self.module.training
            self.module.train(self.training)

    def __exit__(self, *exc: object) -> None:
        if self.module is not None:
            self.module.train(self.was_training)


def _decoder_dtype(decoder: Decoder, z: torch.Tensor) -> torch.dtype:
    if isinstance(decoder, torch.nn.Module):
        for p in decoder.parameters():
            if p.is_floating_point():
                return p.dtype
    return z.dtype


def _check_z(decoder: Decoder, z: torch.Tensor, name: str = "z") -> torch.Tensor:
    if not isinstance(z, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape (B, d), got {type(z).__name__}")
    if not z.dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating-point tensor, got {z.dtype}")
    check_array(z, name, ndim=2)
    latent_dim = getattr(decoder, "latent_dim", None)
    if latent_dim is not None and z.shape[1] != latent_dim:
        raise ValueError(
            f"{name} must have shape (B, {latent_dim}) for this decoder, got {tuple(z.shape)}"
        )
    return z


def _logits(decoder: Decoder, z: torch.Tensor) -> torch.Tensor:
    """``decoder(z)`` checked: a finite ``(B, L, V)`` tensor."""
    try:
        out = decoder(z)
    except RuntimeError as err:
        raise ValueError(f"decoder failed on z of shape {tuple(z.shape)}: {err}") from err
    if not isinstance(out, torch.Tensor) or out.ndim != 3 or out.shape[0] != z.shape[0]:
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(
            f"decoder must map z (B, d) to logits (B, L, V) with B = {z.shape[0]}, got {shape}"
        )
    if not torch.isfinite(out).all():
        raise ValueError("decoder returned non-finite logits")
    return out


#: the finite-difference step relative to the latents' scale: ``eps_64^(1/5)``, which
#: balances the five-point stencil's truncation (``h^4``) and rounding (``eps_64 / h``)
FD_STEP = float(torch.finfo(torch.float64).eps) ** 0.2


def _float64_decoder(decoder: Decoder) -> Decoder:
    """``decoder`` evaluated in float64: a module through ``functional_call`` with float64
    copies of its floating parameters and buffers (the module itself is not changed); a
    plain callable gets float64 latents and must compute in their dtype."""
    if not isinstance(decoder, torch.nn.Module):
        return decoder
    state = {
        k: v.double() if v.is_floating_point() else v
        for k, v in {**dict(decoder.named_parameters()), **dict(decoder.named_buffers())}.items()
    }
    return lambda z: functional_call(decoder, state, (z,))


def _fd_jacobian(decoder: Decoder, z: torch.Tensor, eps: float | None) -> torch.Tensor:
    """Five-point central differences in float64, ``(B, L, V, d)`` in ``z``'s dtype."""
    b, d = z.shape
    z64 = z.double()
    if eps is None:
        scale = float(z64.detach().pow(2).mean().sqrt()) or 1.0
        eps = FD_STEP * scale
    check_scalar(eps, "eps", low=0.0, low_inclusive=False)
    steps = eps * torch.eye(d, dtype=torch.float64, device=z.device)
    shifted = torch.cat([z64[:, None, :] + k * steps for k in (1, -1, 2, -2)], dim=1)
    out = _logits(_float64_decoder(decoder), shifted.reshape(4 * b * d, d))
    if out.dtype != torch.float64:
        warnings.warn(
            f"jacobian='fd' ran in {out.dtype}: the decoder ignored the float64 latents, "
            "and LES from such differences can be off by tens of nats on trained decoders; "
            "pass a torch.nn.Module decoder or one that computes in its input's dtype",
            stacklevel=3,
        )
    f1, f_1, f2, f_2 = out.reshape(b, 4, d, *out.shape[1:]).unbind(1)
    a = (8 * (f1 - f_1) - (f2 - f_2)) / (12 * eps)
    return a.permute(0, 2, 3, 1).to(z.dtype)


def decoder_jacobian(
    decoder: Decoder, z: torch.Tensor, *, jacobian: str = "autograd", eps: float | None = None
) -> torch.Tensor:
    """``A = dl/dz``, shape ``(B, L, V, d)``, differentiable in ``z``.

    ``jacobian="autograd"``: forward-mode autograd through ``torch.func`` (exact; ``d``
    tangents per sample; needs a decoder of operations with forward-mode and ``vmap``
    support, as :mod:`les_lso.models`' are). ``"fd"``: five-point central differences
    ``(8 [l(z + h) - l(z - h)] - [l(z + 2h) - l(z - 2h)]) / 12 h`` computed in float64
    whatever the decoder's dtype (a module is evaluated with float64 copies of its
    weights), with ``h = eps`` or, by default, ``eps_64^(1/5)`` (7e-4) times the RMS of
    ``z``; any decoder, one batched call over ``4 d`` shifted copies of every latent.
    Measured on a trained float32 GRU decoder (latent 8): within 4e-5 nats of the exact
    float64 score, as close as float32 forward-mode autograd (3.7e-5), where float32
    two-point differences at ``h = 1e-4`` were off by 0.32 nats (median; 2.4 at most). Samples must not
    interact inside the decoder (no batch statistics); a module decoder runs in eval
    mode.
    """
    check_choice(jacobian, "jacobian", JACOBIANS)
    z = _check_z(decoder, z)
    with _eval_mode(decoder):
        if jacobian == "fd":
            return _fd_jacobian(decoder, z, eps)
        _logits(decoder, z[:1])  # shape and finiteness, with a clear message

        def one(zi: torch.Tensor) -> torch.Tensor:
            return decoder(zi[None])[0]

        try:
            with quiet_forward_mode():
                return vmap(jacfwd(one))(z)
        except (RuntimeError, NotImplementedError) as err:
            raise TypeError(
                f"jacobian='autograd' needs a decoder with forward-mode autograd and vmap support ({err}); "
                "use jacobian='fd'"
            ) from err


def softmax_jacobian(logits: torch.Tensor) -> torch.Tensor:
    """Per-position Jacobian of ``[softmax(l), 1/Z]`` in the logits: ``(B, L, V+1, V)``,
    rows ``diag(s) - s s^T`` and ``-exp(l)^T / Z^2 = -s^T / Z``."""
    s = torch.softmax(logits, dim=-1)
    top = torch.diag_embed(s) - s[..., :, None] * s[..., None, :]
    extra = -(s * torch.exp(-torch.logsumexp(logits, dim=-1, keepdim=True)))[..., None, :]
    return torch.cat([top, extra], dim=-2)


def _score_jacobian(logits: torch.Tensor, a: torch.Tensor, polarity: bool) -> torch.Tensor:
    """``J`` per sample: ``(B, L (V+1), d)`` (``(B, L V, d)`` with ``polarity``)."""
    b, _, _, d = a.shape
    if polarity:
        return a.reshape(b, -1, d)
    s = torch.softmax(logits, dim=-1)[..., None]  # (B, L, V, 1)
    sa = (s * a).sum(dim=-2, keepdim=True)  # s^T A: (B, L, 1, d)
    top = s * a - s * sa
    inv_z = torch.exp(-torch.logsumexp(logits, dim=-1))[..., None, None]
    return torch.cat([top, -sa * inv_z], dim=-2).reshape(b, -1, d)


def _neg_log_volume(j: torch.Tensor) -> torch.Tensor:
    """``-sum_i log sigma_i(J)`` per sample, with the SVD in float64 where the device has
    it; a zero singular value is clamped to the smallest normal number (a huge, finite
    score) instead of giving ``inf``."""
    work = j if j.device.type == "mps" else j.double()
    sv = torch.linalg.svdvals(work)
    return -torch.log(sv.clamp_min(torch.finfo(sv.dtype).tiny)).sum(-1).to(j.dtype)


def les(
    decoder: Decoder,
    z: torch.Tensor,
    *,
    polarity: bool = False,
    jacobian: str = "autograd",
    eps: float | None = None,
    a: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""The Latent Exploration Score ``(B,)`` of latents ``z (B, d)``; higher is more
    in-distribution. Differentiable in ``z``.

    Parameters
    ----------
    decoder : callable
        ``z (B, d) -> logits (B, L, V)``, e.g. ``SequenceVAE.decoder``; a module is put
        in eval mode for the call (no dropout) and restored.
    z : torch.Tensor
        Latents, ``(B, d)``; cast to the decoder's dtype, the score is returned in
        ``z``'s dtype.
    polarity : bool
        Score the logits map (``J = A``) instead of the softmax-composed map.
    jacobian : {"autograd", "fd"}
        How ``A = dl/dz`` is computed (:func:`decoder_jacobian`).
    eps : float, optional
        Finite-difference step (``jacobian="fd"``; default: chosen for float64, see
        :func:`decoder_jacobian`).
    a : torch.Tensor, optional
        A precomputed ``A`` ``(B, L, V, d)`` to use instead (the reference's optimizer
        keeps the ``A`` of the starting point); only the softmax part then depends on
        ``z``.
    """
    z = _check_z(decoder, z)
    out_dtype = z.dtype
    zc = z.to(_decoder_dtype(decoder, z))
    with _eval_mode(decoder):
        logits = _logits(decoder, zc)
        if a is None:
            a = decoder_jacobian(decoder, zc, jacobian=jacobian, eps=eps)
        else:
            check_array(a, "a", shape=(*logits.shape, z.shape[1]))
            a = a.to(logits.dtype)
    score = _neg_log_volume(_score_jacobian(logits, a, polarity))
    if not torch.isfinite(score).all():
        raise ValueError("LES is not finite: the decoder's Jacobian has non-finite entries")
    return score.to(out_dtype)


def likelihood_score(decoder: Decoder, z: torch.Tensor) -> torch.Tensor:
    """The decoder's confidence in its own greedy decoding, ``sum_t log max_v
    softmax(l_t)_v``, ``(B,)`` (the reference's likelihood baseline; eval mode)."""
    z = _check_z(decoder, z)
    with _eval_mode(decoder):
        logits = _logits(decoder, z.to(_decoder_dtype(decoder, z)))
    return torch.log_softmax(logits, dim=-1).amax(dim=-1).sum(-1).to(z.dtype)


def _log_diff_exp(log_a: torch.Tensor, log_b: torch.Tensor) -> torch.Tensor:
    """``log |exp(log_a) - exp(log_b)|``, floored at the smallest normal number (equal
    arguments give a huge finite negative number instead of ``-inf``)."""
    hi, lo = torch.maximum(log_a, log_b), torch.minimum(log_a, log_b)
    tiny = torch.finfo(hi.dtype).tiny
    return hi + torch.log((-torch.expm1(lo - hi)).clamp_min(tiny))


@torch.no_grad()
def uncertainty_score(
    decoder: Decoder, z: torch.Tensor, *, n_models: int = 10, n_preds: int = 10, seed: int = 0
) -> torch.Tensor:
    r"""Minus the reference's decoder uncertainty (Notin et al. 2021), ``(B,)``; higher is
    more in-distribution.

    The decoder's dropout masks act as an ensemble: for each of ``n_preds`` draws, a
    greedy decode :math:`s` is taken under one mask and scored under ``n_models`` others,
    :math:`p_m = p(s \mid z, m)`; with :math:`\bar p = \tfrac1M \sum_m p_m`,

    .. math::

        I = \frac{1}{\bar p}\Big(-\bar p \log \bar p
            + \tfrac1M \sum_m p_m \log p_m\Big),

    averaged over the draws (all in log space, as the reference computes it). The score is
    :math:`-\log \bar I`. The module runs in train mode for the call (dropout on; its mode
    is restored), with its masks drawn from a generator seeded by ``seed`` (torch's global
    generator is left as it was); a decoder whose train mode does more than dropout
    (batch statistics) is not meant for it. A decoder without dropout has zero
    uncertainty: the score is then a huge finite number. Cost: ``n_preds (1 + n_models)``
    decoder passes (110 by default; the reference's OOD study uses ``n_preds=40``).
    """
    z = _check_z(decoder, z)
    check_scalar(n_models, "n_models", integer=True, low=1)
    check_scalar(n_preds, "n_preds", integer=True, low=1)
    zc = z.to(_decoder_dtype(decoder, z))
    devices = [z.device] if z.device.type == "cuda" else []
    with _eval_mode(decoder, training=True), torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        mi = []
        for _ in range(n_preds):
            greedy = _logits(decoder, zc).argmax(-1)  # (B, L), under one mask
            logits = _logits(decoder, zc.repeat(n_models, 1))  # (M B, L, V)
            logp = torch.log_softmax(logits.double(), -1)
            picked = logp.gather(-1, greedy.repeat(n_models, 1)[..., None])[..., 0]
            log_pm = picked.sum(-1).reshape(n_models, -1).T  # (B, M)
            log_m, tiny = math.log(n_models), torch.finfo(torch.float64).tiny
            log_p = torch.logsumexp(log_pm, 1) - log_m
            ln_b = log_p + torch.log((-log_p).clamp_min(tiny))
            ln_a = torch.logsumexp(log_pm + torch.log((-log_pm).clamp_min(tiny)), 1) - log_m
            mi.append(_log_diff_exp(ln_a, ln_b) - log_p)
    log_mi = torch.logsumexp(torch.stack(mi, 1), 1) - math.log(n_preds)
    return (-log_mi).to(z.dtype)


def prior_score(z: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """Log-density of ``N(0, scale^2 I)`` at ``z (B, d)``, ``(B,)``."""
    check_array(z, "z", ndim=2)
    check_scalar(scale, "scale", low=0.0, low_inclusive=False)
    d = z.shape[1]
    return -0.5 * (z / scale).pow(2).sum(-1) - d * math.log(scale) - 0.5 * d * math.log(2 * math.pi)


def knn_score(z: torch.Tensor, reference: torch.Tensor, k: int = 3) -> torch.Tensor:
    """Minus the mean Euclidean distance from each ``z (B, d)`` to its ``k`` nearest
    latents of ``reference (N, d)`` (e.g. encoded training data), ``(B,)``."""
    check_array(z, "z", ndim=2)
    check_array(reference, "reference", ndim=2)
    if reference.shape[1] != z.shape[1]:
        raise ValueError(
            f"reference must have {z.shape[1]} columns like z, got {reference.shape[1]}"
        )
    check_scalar(k, "k", integer=True, low=1, high=reference.shape[0])
    dist = torch.cdist(z, reference.to(z))
    return -dist.topk(k, dim=1, largest=False).values.mean(1)
