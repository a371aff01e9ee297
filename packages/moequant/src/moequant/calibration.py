"""Calibration sets: expert-balanced self-sampling (EBSS), plain self-generation, random
tokens; and the routing statistics that say how evenly a set covers the experts.

EBSS (MoEQuant) builds each sequence with the model itself by beam search from BOS and one
random token. Every step expands each of the ``w`` beams by its ``topk`` most likely next
tokens and keeps the ``w`` candidates with the lowest

    score = -(cumulative log-prob / generated length) + sigma(parent) / tau,

where ``sigma`` is the mean over MoE layers of the standard deviation of the parent
sequence's per-expert routing frequencies (top-k counts normalised per layer): sequences
that keep routing to the same few experts are pushed out. ``tau -> inf`` is plain
length-normalised beam search. EOS is barred (its log-prob set to -inf, not renormalised,
as transformers' ``min_new_tokens`` does) so every sequence reaches ``seq_len``.
"""

from __future__ import annotations

import contextlib
import math

import torch
from torch import nn

from icml25_core import track

from .adapters import adapter_for, get, moe_block
from .token_ids import check_token_ids


def _routers(model: nn.Module) -> list[nn.Module]:
    adapter = adapter_for(model)
    blocks = [moe_block(adapter, layer) for layer in get(model, adapter.layers)]
    routers = [get(b, adapter.router) for b in blocks if b is not None]
    if not routers:
        raise ValueError("model has no MoE block: routing statistics need a router")
    return routers


@contextlib.contextmanager
def _recording(routers: list[nn.Module]):
    """Collects every router call's expert indices ``(tokens, k)`` while active."""
    found: list[torch.Tensor] = []
    handles = [r.register_forward_hook(lambda m, a, o: found.append(o[2])) for r in routers]
    try:
        yield found
    finally:
        for h in handles:
            h.remove()


def routing_counts(model: nn.Module, input_ids: torch.Tensor, batch_size: int = 16) -> torch.Tensor:
    """Top-k routing counts per sequence, MoE layer and expert: ``(n, layers, experts)``."""
    input_ids = check_token_ids(input_ids, model, "input_ids")
    adapter = adapter_for(model)
    n_exp = adapter.n_experts(model.config)
    routers = _routers(model)
    device = next(model.parameters()).device
    out = []
    for i in range(0, len(input_ids), batch_size):
        ids = input_ids[i : i + batch_size].to(device)
        with torch.no_grad(), _recording(routers) as found:
            model(ids, use_cache=False)
        b = ids.shape[0]
        per_layer = [
            torch.nn.functional.one_hot(idx.reshape(b, -1), n_exp).sum(1) for idx in found
        ]  # each (b, experts)
        out.append(torch.stack(per_layer, 1))
    return torch.cat(out).cpu()


def imbalance(counts: torch.Tensor) -> torch.Tensor:
    """``sigma``: mean over layers of the std over experts of routing frequencies;
    ``counts`` ``(..., layers, experts)`` -> ``(...)``."""
    freq = counts.float() / counts.float().sum(-1, keepdim=True).clamp(min=1)
    return freq.std(-1, unbiased=False).mean(-1)


def expert_balance(model: nn.Module, input_ids: torch.Tensor) -> dict:
    """How a calibration set spreads over the experts.

    Returns
    -------
    dict
        ``counts`` ``(layers, experts)`` tokens routed to each expert (top-k counted once per
        slot); ``std`` per layer of the frequencies; ``mean_std``; ``min_count`` the fewest
        tokens any expert got; ``coverage`` the share of (layer, expert) pairs with a token.
    """
    counts = routing_counts(model, input_ids).sum(0)
    freq = counts.float() / counts.sum(-1, keepdim=True)
    std = freq.std(-1, unbiased=False)
    return {
        "counts": counts,
        "std": std,
        "mean_std": float(std.mean()),
        "min_count": int(counts.min()),
        "coverage": float((counts > 0).float().mean()),
    }


def _special(tokenizer, model):
    bos = getattr(tokenizer, "bos_token_id", None)
    eos = getattr(tokenizer, "eos_token_id", None)
    if eos is None:
        eos = getattr(model.config, "eos_token_id", None)
    eos = [] if eos is None else ([eos] if isinstance(eos, int) else list(eos))
    special = set(getattr(tokenizer, "all_special_ids", []) or []) | set(eos)
    if bos is not None:
        special.add(bos)
    return bos, eos, special


def _starts(tokenizer, model, n_samples: int, generator: torch.Generator) -> torch.Tensor:
    """``(n, 1 or 2)``: BOS (when the tokenizer has one) and one random non-special token."""
    bos, _, special = _special(tokenizer, model)
    vocab = model.config.vocab_size
    allowed = torch.tensor([t for t in range(vocab) if t not in special])
    first = allowed[torch.randint(len(allowed), (n_samples,), generator=generator)]
    cols = [first[:, None]]
    if bos is not None:
        cols.insert(0, torch.full((n_samples, 1), bos))
    return torch.cat(cols, 1)


def _check(n_samples: int, seq_len: int, prefix: int) -> None:
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    if seq_len <= prefix:
        raise ValueError(f"seq_len must exceed the {prefix}-token start, got {seq_len}")


def random_tokens(
    model: nn.Module, tokenizer, n_samples: int, seq_len: int, seed: int = 0
) -> torch.Tensor:
    """Uniformly random non-special tokens after BOS: ``(n_samples, seq_len)``."""
    g = torch.Generator().manual_seed(seed)
    start = _starts(tokenizer, model, n_samples, g)
    _check(n_samples, seq_len, start.shape[1])
    _, _, special = _special(tokenizer, model)
    allowed = torch.tensor([t for t in range(model.config.vocab_size) if t not in special])
    rest = allowed[torch.randint(len(allowed), (n_samples, seq_len - start.shape[1]), generator=g)]
    return torch.cat([start, rest], 1)


@torch.no_grad()
def self_generate(
    model: nn.Module,
    tokenizer,
    n_samples: int,
    seq_len: int,
    seed: int = 0,
    temperature: float = 1.0,
    batch_size: int = 16,
) -> torch.Tensor:
    """Plain self-generation: sampling from BOS + one random token (EOS suppressed)."""
    g = torch.Generator().manual_seed(seed)
    start = _starts(tokenizer, model, n_samples, g)
    _check(n_samples, seq_len, start.shape[1])
    _, eos, _ = _special(tokenizer, model)
    device = next(model.parameters()).device
    torch.manual_seed(seed)  # generate() samples with the global generator
    out = []
    for i in range(0, n_samples, batch_size):
        ids = start[i : i + batch_size].to(device)
        new = seq_len - ids.shape[1]
        out.append(
            model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                do_sample=True,
                top_k=0,
                top_p=1.0,
                temperature=temperature,
                max_new_tokens=new,
                min_new_tokens=new,
                eos_token_id=eos or None,
                pad_token_id=eos[0] if eos else 0,
            ).cpu()
        )
    return torch.cat(out)


@torch.no_grad()
def ebss(
    model: nn.Module,
    tokenizer,
    n_samples: int,
    seq_len: int,
    beam_width: int = 4,
    tau: float = 1.2,
    topk: int | None = None,
    seed: int = 0,
    show_progress: bool = False,
) -> torch.Tensor:
    """Expert-balanced self-sampling: ``(n_samples, seq_len)`` token ids (see module doc).

    Parameters
    ----------
    model : transformers MoE causal LM
    tokenizer : its tokenizer (for BOS / EOS / special tokens)
    beam_width : int
        ``w``, beams kept per sample.
    tau : float
        Temperature of the balance term; ``math.inf`` turns it off.
    topk : int, optional
        Children per beam; defaults to ``beam_width`` (which keeps every candidate plain
        beam search would keep).
    """
    if beam_width < 1:
        raise ValueError(f"beam_width must be >= 1, got {beam_width}")
    if not tau > 0:
        raise ValueError(f"tau must be > 0 (math.inf disables the balance term), got {tau}")
    topk = beam_width if topk is None else topk
    if topk < 1:
        raise ValueError(f"topk must be >= 1, got {topk}")
    g = torch.Generator().manual_seed(seed)
    start = _starts(tokenizer, model, n_samples, g)
    _check(n_samples, seq_len, start.shape[1])
    _, eos, _ = _special(tokenizer, model)
    adapter = adapter_for(model)
    n_exp = adapter.n_experts(model.config)
    routers = _routers(model)
    device = next(model.parameters()).device
    n, w, prefix = n_samples, beam_width, start.shape[1]

    beams = start[:, None, :].expand(n, 1, prefix).to(device)  # (n, beams, len)
    cum = torch.zeros(n, 1, dtype=torch.float64, device=device)
    steps = range(seq_len - prefix)
    for step in track(steps, "ebss") if show_progress else steps:
        b = beams.shape[1]
        flat = beams.reshape(n * b, -1)
        with _recording(routers) as found:
            logits = model(flat, use_cache=False).logits[:, -1].double()
        logp = torch.log_softmax(logits, -1)  # the model's own log-probs; EOS then barred
        if eos:
            logp[:, eos] = -math.inf
        logp = logp.view(n, b, -1)
        counts = torch.stack(
            [torch.nn.functional.one_hot(idx.reshape(n * b, -1), n_exp).sum(1) for idx in found], 1
        )  # (n*b, layers, experts)
        sigma = imbalance(counts).view(n, b).double()
        k = min(topk, logp.shape[-1])
        top_lp, top_tok = logp.topk(k, dim=-1)  # (n, b, k)
        cand_cum = cum[:, :, None] + top_lp
        length = step + 1
        penalty = sigma[:, :, None] / tau if math.isfinite(tau) else 0.0
        score = -(cand_cum / length) + penalty
        keep = min(w, b * k)
        best = score.reshape(n, -1).topk(keep, dim=-1, largest=False).indices  # (n, keep)
        parent, child = best // k, best % k
        rows = torch.arange(n, device=device)[:, None]
        next_tok = top_tok[rows, parent, child]
        beams = torch.cat([beams[rows, parent], next_tok[..., None]], -1)
        cum = cand_cum[rows, parent, child]
    # the final beams have equal length; return the best by the same score (balance of the
    # finished sequence itself)
    flat = beams.reshape(n * beams.shape[1], -1)
    if math.isfinite(tau):
        sigma = imbalance(routing_counts(model, flat.cpu())).view(n, -1).to(cum)
        final = -(cum / (seq_len - prefix)) + sigma / tau
    else:
        final = -cum
    return beams[torch.arange(n), final.argmin(-1)].cpu()
