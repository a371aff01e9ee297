"""Sequence VAEs whose decoders map a latent ``z`` to per-position logits.

:class:`SequenceVAE` is the reference's expression/molecule VAE: a small convolutional
encoder over one-hot sequences and one of three decoders,

- :class:`GRUDecoder` (``decoder="gru"``): the reference's ``DecoderRNNGRU``. The
  projected latent is the input of a stacked GRU at every step; each step's logits read
  the GRU output and a projection of the previous step's softmax (no teacher forcing);
- :class:`LSTMDecoder` (``decoder="lstm"``): the reference's ``DecoderRNNLSTM``, the same
  with a stacked LSTM;
- :class:`TransformerDecoder` (``decoder="transformer"``): causal self-attention over
  learned position queries and cross-attention to ``n_memory`` tokens projected from ``z``
  (the reference feeds all-zero tokens, so its decoder is also a function of ``z`` only).

All are written with plain tensor operations (the GRU and LSTM cells and attention
spelled out, parameters named as ``torch.nn.GRU``'s and ``torch.nn.LSTM``'s) so that
forward-mode autograd, ``torch.func.vmap`` and double back-propagation work on every
device: PyTorch's fused RNN kernels and flash attention support none of these, and LES
differentiates a Jacobian.

``SequenceVAE.from_official_checkpoint(path)`` loads the reference's released GRU and LSTM
VAEs (``trained_models/{expressions,smiles}_{gru,lstm}_*/w.pth``, plain state dicts, read
with ``weights_only=True``).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from icml25_core import check_choice, check_scalar, check_state_dict
from icml25_core.hub import PretrainedModelMixin

__all__ = [
    "DECODERS",
    "OFFICIAL_PRESETS",
    "ConvEncoder",
    "GRUDecoder",
    "LSTMDecoder",
    "SequenceVAE",
    "TransformerDecoder",
]

DECODERS = ("gru", "lstm", "transformer")
_CONV = {
    "small": ((2, 3, 4), (2, 3, 4)),
    "wide": ((32, 32, 32), (2, 3, 4)),
    "large": ((9, 9, 10), (9, 9, 11)),
}
_OFFICIAL_EXTRA = ("encoder.embedding.", "property_net.")
_SMILES = {
    "vocab_size": 35,
    "max_length": 120,
    "latent_dim": 56,
    "encoder_size": "large",
    "eps_std": 0.001,
}
#: the reference's released GRU and LSTM VAEs (``trained_models/{name}_{beta}/w.pth`` of
#: OmerRonen/les; the sizes of its ``configs/{dataset}.yaml``; decoder 3 x 100, dropout 0.2)
#: as configuration overrides of :class:`SequenceVAE`'s defaults (expressions: latent 25,
#: vocabulary 15, length 19, small encoder, ``eps_std`` 0.1)
OFFICIAL_PRESETS = {
    "expressions_gru": {"decoder": "gru"},
    "expressions_lstm": {"decoder": "lstm"},
    "smiles_gru": {"decoder": "gru", **_SMILES},
    "smiles_lstm": {"decoder": "lstm", **_SMILES},
}


class ConvEncoder(nn.Module):
    """The reference's grammar-VAE encoder: three ``Conv1d -> ReLU -> BatchNorm`` blocks
    over a one-hot sequence ``(B, L, V)``, a linear layer with ReLU, and two heads:
    ``forward`` returns ``(mu, raw)``, each ``(B, latent_dim)``."""

    def __init__(self, vocab_size, max_length, latent_dim, size="small", hidden=100):
        super().__init__()
        channels, kernels = _CONV[size]
        out_len = max_length - sum(kernels) + 3
        if out_len < 1:
            raise ValueError(f"max_length={max_length} is too short for the {size!r} encoder")
        c_in = vocab_size
        for i, (c, k) in enumerate(zip(channels, kernels, strict=True), start=1):
            setattr(self, f"conv{i}", nn.Conv1d(c_in, c, kernel_size=k))
            setattr(self, f"batch_norm{i}", nn.BatchNorm1d(c))
            c_in = c
        self.linear = nn.Linear(c_in * out_len, hidden)
        self.mu = nn.Linear(hidden, latent_dim)
        self.sigma = nn.Linear(hidden, latent_dim)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = x.transpose(1, 2)
        for i in (1, 2, 3):
            h = getattr(self, f"batch_norm{i}")(F.relu(getattr(self, f"conv{i}")(h)))
        h = F.relu(self.linear(h.flatten(1)))
        return self.mu(h), self.sigma(h)


class _RNNStack(nn.Module):
    """A stacked GRU (gates ``r, z, n`` as ``torch.nn.GRU``) or LSTM (gates ``i, f, g, o``
    as ``torch.nn.LSTM``), parameters named ``weight_ih_l{k}``... as torch's, one step at
    a time, from plain tensor operations; dropout on the inputs of layers above the first,
    as torch's ``dropout=``."""

    def __init__(self, hidden: int, layers: int, dropout: float, cell: str = "gru") -> None:
        super().__init__()
        self.hidden, self.layers, self.dropout, self.cell = hidden, layers, dropout, cell
        gates = {"gru": 3, "lstm": 4}[cell] * hidden
        bound = 1.0 / math.sqrt(hidden)
        for k in range(layers):
            for name, shape in (
                ("weight_ih", (gates, hidden)),
                ("weight_hh", (gates, hidden)),
                ("bias_ih", (gates,)),
                ("bias_hh", (gates,)),
            ):
                setattr(
                    self, f"{name}_l{k}", nn.Parameter(torch.empty(shape).uniform_(-bound, bound))
                )

    def zero_state(self, x: torch.Tensor) -> list:
        """All-zero states for inputs ``x (B, H)``: per layer ``h (B, H)`` (GRU) or
        ``(h, c)`` (LSTM)."""
        if self.cell == "gru":
            return [x.new_zeros(x.shape) for _ in range(self.layers)]
        return [(x.new_zeros(x.shape), x.new_zeros(x.shape)) for _ in range(self.layers)]

    def step(self, x: torch.Tensor, state: list) -> tuple[torch.Tensor, list]:
        """One time step: input ``(B, H)``, states per layer as :meth:`zero_state`'s;
        returns the top layer's output ``(B, H)`` and the new states."""
        new = []
        for k in range(self.layers):
            if k > 0:
                x = F.dropout(x, self.dropout, self.training)
            h = state[k] if self.cell == "gru" else state[k][0]
            gi = F.linear(x, getattr(self, f"weight_ih_l{k}"), getattr(self, f"bias_ih_l{k}"))
            gh = F.linear(h, getattr(self, f"weight_hh_l{k}"), getattr(self, f"bias_hh_l{k}"))
            if self.cell == "gru":
                ir, iz, i_n = gi.chunk(3, dim=-1)
                hr, hz, hn = gh.chunk(3, dim=-1)
                r, u = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
                n = torch.tanh(i_n + r * hn)
                x = (1 - u) * n + u * h
                new.append(x)
            else:
                i, f, g, o = (gi + gh).chunk(4, dim=-1)
                c = torch.sigmoid(f) * state[k][1] + torch.sigmoid(i) * torch.tanh(g)
                x = torch.sigmoid(o) * torch.tanh(c)
                new.append((x, c))
        return x, new


class GRUDecoder(nn.Module):
    """The reference's GRU decoder: ``z (B, d) -> logits (B, L, V)``.

    Step ``t``: ``o_t = GRU(W_p z, h_{t-1})``, ``logits_t = W_o [o_t, W_s s_{t-1}]`` with
    ``s_{t-1} = softmax(logits_{t-1})`` (``s_0 = 0``).
    """

    cell = "gru"

    def __init__(self, latent_dim, vocab_size, max_length, hidden=100, layers=3, dropout=0.2):
        super().__init__()
        self.latent_dim, self.vocab_size, self.max_length = latent_dim, vocab_size, max_length
        self.project = nn.Linear(latent_dim, hidden)
        self.out = nn.Linear(2 * hidden, vocab_size)
        self.output_projection = nn.Linear(vocab_size, hidden)
        self.gru = _RNNStack(hidden, layers, dropout, self.cell)  # the reference's name

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        context = self.project(z)
        h = self.gru.zero_state(context)
        probs = z.new_zeros(z.shape[0], self.vocab_size)
        steps = []
        for _ in range(self.max_length):
            o, h = self.gru.step(context, h)
            logits = self.out(torch.cat([o, self.output_projection(probs)], dim=-1))
            steps.append(logits)
            probs = torch.softmax(logits, dim=-1)
        return torch.stack(steps, dim=1)


class LSTMDecoder(GRUDecoder):
    """The reference's LSTM decoder (``DecoderRNNLSTM``): :class:`GRUDecoder`'s steps with
    a stacked LSTM (zero initial hidden and cell states), ``z (B, d) -> logits (B, L, V)``.
    Its stack is ``self.gru``, the reference's attribute name, so official state dicts
    load as they are."""

    cell = "lstm"


class _Attention(nn.Module):
    """Multi-head attention from plain tensor operations (``mask``: ``-inf`` where a query
    may not look)."""

    def __init__(self, hidden: int, heads: int, dropout: float) -> None:
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden={hidden} must be a multiple of num_heads={heads}")
        self.heads, self.dropout = heads, dropout
        self.query, self.key = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
        self.value, self.output = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor | None = None):
        def split(t: torch.Tensor) -> torch.Tensor:
            return t.unflatten(-1, (self.heads, -1)).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(memory)), split(self.value(memory))
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores + mask
        weights = F.dropout(torch.softmax(scores, dim=-1), self.dropout, self.training)
        return self.output((weights @ v).transpose(1, 2).flatten(2))


class _DecoderLayer(nn.Module):
    """Post-norm decoder layer (self-attention, cross-attention, ReLU feed-forward), as
    ``torch.nn.TransformerDecoderLayer`` with its defaults."""

    def __init__(self, hidden: int, heads: int, feedforward: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = _Attention(hidden, heads, dropout)
        self.cross_attn = _Attention(hidden, heads, dropout)
        self.ff = nn.Sequential(
            nn.Linear(hidden, feedforward),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(feedforward, hidden),
        )
        self.norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(3))
        self.dropout = dropout

    def forward(self, x: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        def drop(t: torch.Tensor) -> torch.Tensor:
            return F.dropout(t, self.dropout, self.training)

        x = self.norms[0](x + drop(self.self_attn(x, x, mask)))
        x = self.norms[1](x + drop(self.cross_attn(x, memory)))
        return self.norms[2](x + drop(self.ff(x)))


class TransformerDecoder(nn.Module):
    """A non-autoregressive Transformer decoder: ``z (B, d) -> logits (B, L, V)``.

    Queries are learned position embeddings under a causal mask; ``z`` enters through
    cross-attention to ``n_memory`` tokens ``W_m z``.
    """

    def __init__(
        self,
        latent_dim,
        vocab_size,
        max_length,
        hidden=64,
        layers=2,
        heads=4,
        feedforward=256,
        dropout=0.1,
        n_memory=4,
    ):
        super().__init__()
        self.latent_dim, self.vocab_size, self.max_length = latent_dim, vocab_size, max_length
        self.n_memory = n_memory
        self.positions = nn.Parameter(torch.randn(max_length, hidden) * 0.02)
        self.memory = nn.Linear(latent_dim, n_memory * hidden)
        self.layers = nn.ModuleList(
            _DecoderLayer(hidden, heads, feedforward, dropout) for _ in range(layers)
        )
        self.unembed = nn.Linear(hidden, vocab_size)
        causal = torch.full((max_length, max_length), float("-inf")).triu(1)
        self.register_buffer("causal_mask", causal, persistent=False)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        memory = self.memory(z).unflatten(-1, (self.n_memory, -1))
        x = self.positions.expand(z.shape[0], -1, -1)
        for layer in self.layers:
            x = layer(x, memory, self.causal_mask)
        return self.unembed(x)


class SequenceVAE(nn.Module, PretrainedModelMixin):
    """A VAE over token sequences of length ``max_length`` from a vocabulary of
    ``vocab_size`` symbols (the defaults are the reference's expression VAE).

    Parameters
    ----------
    decoder : {"gru", "lstm", "transformer"}
        The decoder (:class:`GRUDecoder`, :class:`LSTMDecoder` or
        :class:`TransformerDecoder`); ``self.decoder``
        maps ``z (B, latent_dim)`` to logits ``(B, max_length, vocab_size)`` and is what
        :func:`les_lso.les` scores.
    hidden_size, num_layers : int
        Decoder width and depth. ``num_heads``, ``dim_feedforward``, ``n_memory``: the
        Transformer decoder's attention heads, feed-forward width and memory tokens.
    encoder_size : {"small", "wide", "large"}
        Convolutional encoder: the reference's ``"small"`` (2, 3, 4 channels, kernels 2,
        3, 4: what its expression checkpoints use) and ``"large"`` (9, 9, 10 channels,
        kernels 9, 9, 11: molecules, too long for 19 symbols), or ``"wide"`` (32 channels
        each, kernels 2, 3, 4), which learns far faster on small data.
    eps_std : float
        Scale of the latent space: the prior is ``N(0, eps_std^2 I)`` and the posterior
        ``N(mu, eps_std^2 exp(logvar))``.
    logvar_activation : {"identity", "softplus"}
        How the encoder's second head becomes ``logvar``; ``"softplus"`` is the
        reference's (a log-variance of at least 0, so the posterior noise is never below
        ``eps_std``), set by :meth:`from_official_checkpoint`.

    ``save_pretrained(folder)`` / ``SequenceVAE.from_pretrained(folder or hub id)`` store
    the configuration (``config.json``) and the weights (``model.safetensors``).
    """

    def __init__(
        self,
        vocab_size=15,
        max_length=19,
        latent_dim=25,
        decoder="gru",
        hidden_size=100,
        num_layers=3,
        num_heads=4,
        dim_feedforward=256,
        n_memory=4,
        dropout=0.2,
        encoder_size="small",
        eps_std=0.1,
        logvar_activation="identity",
    ):
        super().__init__()
        for name, value in (
            ("vocab_size", vocab_size),
            ("max_length", max_length),
            ("latent_dim", latent_dim),
            ("hidden_size", hidden_size),
            ("num_layers", num_layers),
            ("num_heads", num_heads),
            ("dim_feedforward", dim_feedforward),
            ("n_memory", n_memory),
        ):
            check_scalar(value, name, integer=True, low=1)
        check_scalar(dropout, "dropout", low=0.0, high=1.0, high_inclusive=False)
        check_scalar(eps_std, "eps_std", low=0.0, low_inclusive=False)
        check_choice(decoder, "decoder", DECODERS)
        check_choice(encoder_size, "encoder_size", tuple(_CONV))
        check_choice(logvar_activation, "logvar_activation", ("identity", "softplus"))
        self.vocab_size, self.max_length, self.latent_dim = vocab_size, max_length, latent_dim
        self.eps_std, self.logvar_activation = float(eps_std), logvar_activation
        self.encoder = ConvEncoder(vocab_size, max_length, latent_dim, encoder_size)
        if decoder in ("gru", "lstm"):
            rnn = GRUDecoder if decoder == "gru" else LSTMDecoder
            self.decoder = rnn(latent_dim, vocab_size, max_length, hidden_size, num_layers, dropout)
        else:
            self.decoder = TransformerDecoder(
                latent_dim,
                vocab_size,
                max_length,
                hidden_size,
                num_layers,
                num_heads,
                dim_feedforward,
                dropout,
                n_memory,
            )

    def check_tokens(self, tokens) -> torch.Tensor:
        """``tokens`` as a tensor on the model's device, after checking they are integer ids
        ``(B, max_length)`` in ``[0, vocab_size)``; errors name ``tokens``."""
        tokens = torch.as_tensor(tokens, device=self.encoder.mu.weight.device)
        if tokens.dtype.is_floating_point or tokens.ndim != 2:
            raise ValueError(
                f"tokens must be integer ids of shape (B, L), got {tuple(tokens.shape)} {tokens.dtype}"
            )
        if tokens.shape[1] != self.max_length:
            raise ValueError(
                f"tokens must have max_length={self.max_length} columns, got {tokens.shape[1]}"
            )
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= self.vocab_size):
            raise ValueError(f"tokens must lie in [0, vocab_size={self.vocab_size})")
        return tokens.long()

    def one_hot(self, tokens: torch.Tensor) -> torch.Tensor:
        """``(B, L)`` token ids -> ``(B, L, V)`` one-hot in the model's dtype."""
        return F.one_hot(self.check_tokens(tokens), self.vocab_size).to(
            self.encoder.mu.weight.dtype
        )

    def posterior(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mu, logvar)`` of ``q(z | tokens)``, each ``(B, latent_dim)``; the posterior
        is ``N(mu, eps_std^2 exp(logvar))``."""
        mu, raw = self.encoder(self.one_hot(tokens))
        return mu, F.softplus(raw) if self.logvar_activation == "softplus" else raw

    def encode(self, tokens: torch.Tensor, sample: bool = False) -> torch.Tensor:
        """Latents ``(B, latent_dim)`` of token ids ``(B, L)``: the posterior mean, or a
        draw with ``sample=True``."""
        mu, logvar = self.posterior(tokens)
        if not sample:
            return mu
        return mu + self.eps_std * torch.exp(0.5 * logvar) * torch.randn_like(mu)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Greedy decoding: token ids ``(B, L)`` (argmax of the decoder's logits)."""
        return self.decoder(z).argmax(dim=-1)

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(logits (B, L, V), mu, logvar)`` with ``z`` drawn from the posterior."""
        mu, logvar = self.posterior(tokens)
        z = mu + self.eps_std * torch.exp(0.5 * logvar) * torch.randn_like(mu)
        return self.decoder(z), mu, logvar

    def kl(self, mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
        """``KL(q(z | x) || N(0, eps_std^2 I))`` per sample, ``(B,)``."""
        m = mu / self.eps_std
        return 0.5 * (m.pow(2) + logvar.exp() - 1.0 - logvar).sum(-1)

    def sample_prior(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """``n`` draws ``(n, latent_dim)`` of the prior ``N(0, eps_std^2 I)``."""
        w = self.encoder.mu.weight
        return self.eps_std * torch.randn(
            n, self.latent_dim, generator=generator, dtype=w.dtype
        ).to(w.device)

    @classmethod
    def from_official_checkpoint(
        cls, path: str | Path, *, preset: str | None = None, **overrides
    ) -> SequenceVAE:
        """One of the reference's released GRU or LSTM VAEs from its ``w.pth`` state dict
        (``trained_models/{expressions,smiles}_{gru,lstm}_{0.05,0.1,1}/w.pth`` of
        OmerRonen/les): decoder 3 x 100, softplus log-variance, and the sizes of
        :data:`OFFICIAL_PRESETS` (expressions: latent 25, small encoder, ``eps_std`` 0.1;
        SMILES: vocabulary 35, length 120, latent 56, large encoder, ``eps_std`` 0.001).

        ``preset``: one of :data:`OFFICIAL_PRESETS` (``"expressions_gru"``,
        ``"expressions_lstm"``, ``"smiles_gru"``, ``"smiles_lstm"``); by default the one
        whose name starts the checkpoint's folder or file name (``smiles_lstm_0.1/w.pth``),
        else ``"expressions_gru"``. ``overrides`` change the configuration further. The
        transformer checkpoints are another architecture and are refused by name.

        The file is read with ``torch.load(weights_only=True)`` (no code runs). The
        reference's unused encoder embedding and its property head are dropped; every
        other tensor must be present with its shape.
        """
        path = Path(path)
        names = (path.parent.name, path.stem)
        if preset is None:
            for name in names:
                if re.match(r"(expressions|smiles|selfies)_transformer", name):
                    raise ValueError(
                        f"{str(path)!r} is an official transformer checkpoint; only the "
                        f"GRU and LSTM VAEs load (presets: {sorted(OFFICIAL_PRESETS)})"
                    )
            hits = [p for p in OFFICIAL_PRESETS for name in names if name.startswith(p)]
            preset = hits[0] if hits else "expressions_gru"
        check_choice(preset, "preset", tuple(OFFICIAL_PRESETS))
        if not path.is_file():
            raise FileNotFoundError(f"checkpoint {str(path)!r} does not exist")
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:
            raise ValueError(
                f"checkpoint {str(path)!r} is not a readable weights-only state dict: {err}"
            ) from err
        if not isinstance(state, dict) or not all(
            isinstance(v, torch.Tensor) for v in state.values()
        ):
            raise ValueError(f"checkpoint {str(path)!r} is not a state dict of tensors")
        config = {
            "logvar_activation": "softplus",
            **OFFICIAL_PRESETS[preset],
            **overrides,
        }
        model = cls(**config)
        state = {k: v for k, v in state.items() if not k.startswith(_OFFICIAL_EXTRA)}
        check_state_dict(model, state, path)  # keys, shapes, finiteness, naming the file
        model.load_state_dict(state)
        return model.eval()
