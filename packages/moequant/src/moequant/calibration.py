"""Calibration sets: expert-balanced self-sampling (EBSS), plain self-generation, random
tokens; and the routing statistics that say how evenly a set covers the experts.

EBSS (MoEQuant) builds each sequence with the model itself by beam search from BOS and one
random token. Every step expands each of the ``w`` beams by its ``topk`` most likely next
tokens and keeps the ``w`` candidates with the lowest

    score = -(cumulative log-prob / generated length) + sigma(candidate) / tau,

where ``sigma`` is the mean over MoE layers of the standard deviation of the candidate
sequence's per-expert routing frequencies (top-k counts normalised per layer), the new
token's routing included (the paper's Algorithm 1, line 14): a candidate that sends its
new token to the experts its sequence already over-uses is pushed out. ``sigma_on="parent"``
measures the parent instead (moequant <= 0.4), ``balance="count"`` the raw counts.
``tau -> inf`` is plain length-normalised beam search. EOS is barred (its log-prob set to
-inf, not renormalised, as transformers' ``min_new_tokens`` does) so every sequence reaches
``seq_len``.
"""

from __future__ import annotations

import contextlib
import inspect
import math

import torch
import torch.nn.functional as F
from torch import nn

from icml25_core import check_scalar, track

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
        out.append(_counts(found, ids.shape[0], n_exp))
    return torch.cat(out).cpu()


def _counts(found: list[torch.Tensor], rows: int, n_exp: int) -> torch.Tensor:
    """The expert indices recorded by :func:`_recording` for ``rows`` sequences as top-k
    counts per sequence, MoE layer and expert ``(rows, layers, experts)``."""
    return torch.stack([F.one_hot(idx.reshape(rows, -1), n_exp).sum(1) for idx in found], 1)


SIGMA_ON = ("candidate", "parent")
BALANCES = ("frequency", "count")


def imbalance(counts: torch.Tensor, balance: str = "frequency") -> torch.Tensor:
    """``sigma``: mean over layers of the std over experts of the routing frequencies
    (counts normalised per layer, in float32) or, with ``balance="count"``, of the raw
    counts (in float64); ``counts`` ``(..., layers, experts)`` -> ``(...)``."""
    if balance not in BALANCES:
        raise ValueError(f"balance must be one of {BALANCES}, got {balance!r}")
    if balance == "count":
        return counts.double().std(-1, unbiased=False).mean(-1)
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
    sigma_on: str = "candidate",
    balance: str = "frequency",
    no_repeat_ngram_size: int = 0,
    sample: bool = False,
    batch_size: int = 16,
    show_progress: bool = False,
) -> torch.Tensor:
    """Expert-balanced self-sampling: ``(n_samples, seq_len)`` token ids (see module doc).

    Every candidate is run through the model (one new token on the parent's key-value
    cache), which gives its own routing for the balance term and its next-token logits
    should it be kept.

    Parameters
    ----------
    model : transformers MoE causal LM
    tokenizer : its tokenizer (for BOS / EOS / special tokens)
    n_samples, seq_len : int
        Sequences to return and their length, the 1-2 start tokens included.
    beam_width : int
        ``w``, beams kept per sample.
    tau : float
        Temperature of the balance term; ``math.inf`` turns it off.
    topk : int, optional
        Children per beam; defaults to ``beam_width`` (which keeps every candidate plain
        beam search would keep).
    seed : int
        Seeds the start tokens (and the children with ``sample=True``).
    sigma_on : {"candidate", "parent"}
        Whose routing ``sigma`` measures: the candidate sequence, new token included (the
        paper's Algorithm 1, line 14), or its parent (moequant <= 0.4, an ablation: the same
        term for every child of a beam, so it can never block a repeated token).
    balance : {"frequency", "count"}
        ``sigma`` over per-expert routing frequencies (counts normalised per layer; in
        [0, 0.5) whatever the length) or raw counts (grows with the length, so the balance
        term gains weight as the sequence grows). The paper leaves it open.
    no_repeat_ngram_size : int
        With ``N > 0``, a token that would repeat an ``N``-gram already in the beam is
        barred (as transformers' option of that name). 0: off.
    sample : bool
        Draw each beam's children from the model's distribution (Gumbel top-k, without
        replacement) instead of taking its most likely tokens.
    batch_size : int
        Samples generated together (each has ``beam_width x topk`` candidates in the
        key-value cache); the result does not depend on it beyond float rounding.
    """
    check_scalar(beam_width, "beam_width", low=1, integer=True)
    if not tau > 0:
        raise ValueError(f"tau must be > 0 (math.inf disables the balance term), got {tau}")
    topk = beam_width if topk is None else topk
    check_scalar(topk, "topk", low=1, integer=True)
    check_scalar(no_repeat_ngram_size, "no_repeat_ngram_size", low=0, integer=True)
    check_scalar(batch_size, "batch_size", low=1, integer=True)
    if sigma_on not in SIGMA_ON:
        raise ValueError(f"sigma_on must be one of {SIGMA_ON}, got {sigma_on!r}")
    if balance not in BALANCES:
        raise ValueError(f"balance must be one of {BALANCES}, got {balance!r}")
    g = torch.Generator().manual_seed(seed)
    start = _starts(tokenizer, model, n_samples, g)
    _check(n_samples, seq_len, start.shape[1])
    _, eos, _ = _special(tokenizer, model)
    search = _BeamSearch(model, beam_width, tau, topk, sigma_on, balance, no_repeat_ngram_size, eos)
    sampler = torch.Generator().manual_seed(seed + 1) if sample else None
    steps = seq_len - start.shape[1]
    out = []
    for i in range(0, n_samples, batch_size):
        part = start[i : i + batch_size]
        label = f"ebss samples {i + 1}-{i + len(part)} of {n_samples}" if show_progress else None
        out.append(search.run(part, steps, sampler, label))
    return torch.cat(out)


class _BeamSearch:
    """The EBSS beam search over one batch of samples, on the model's key-value cache."""

    def __init__(self, model, width, tau, topk, sigma_on, balance, no_repeat, eos):
        self.model, self.width, self.tau, self.topk = model, width, tau, topk
        self.sigma_on, self.balance, self.no_repeat, self.eos = sigma_on, balance, no_repeat, eos
        self.n_exp = adapter_for(model).n_experts(model.config)
        self.routers = _routers(model)
        self.device = next(model.parameters()).device
        # transformers renamed past_key_values to cache (5.24 warns at the old name)
        forward = inspect.signature(model.forward).parameters
        self.cache_arg = "cache" if "cache" in forward else "past_key_values"

    def _forward(self, ids, cache=None):
        """Logits of the last position ``(rows, vocab)``, the cache and the routing counts
        of the tokens ``ids`` ``(rows, t)`` fed ``(rows, layers, experts)``."""
        with _recording(self.routers) as found:
            out = self.model(ids, use_cache=True, **{self.cache_arg: cache})
        counts = _counts(found, ids.shape[0], self.n_exp)
        cache = out.cache if hasattr(out, "cache") else out.past_key_values
        return out.logits[:, -1].double(), cache, counts.double()

    def _bar_repeats(self, logp, beams):
        """Bar tokens that would repeat an ``N``-gram of their beam (in place)."""
        size = self.no_repeat
        if size < 1 or beams.shape[1] < size:
            return
        grams = beams.unfold(1, size, 1)  # (rows, windows, N)
        if size == 1:
            match = torch.ones(grams.shape[:2], dtype=torch.bool, device=beams.device)
        else:
            match = (grams[:, :, :-1] == beams[:, None, 1 - size :]).all(-1)
        rows, at = match.nonzero(as_tuple=True)
        logp[rows, grams[rows, at, -1]] = -math.inf

    def run(self, start, steps, sampler, label):
        n, w, k = start.shape[0], self.width, self.topk
        ids = start.to(self.device)
        logits, cache, counts = self._forward(ids)
        beams, cum = ids[:, None, :], torch.zeros(n, 1, dtype=torch.float64, device=self.device)
        counts = counts[:, None]  # (n, beams, layers, experts)
        rows = torch.arange(n, device=self.device)[:, None]
        for step in track(range(steps), label) if label else range(steps):
            b = beams.shape[1]
            logp = torch.log_softmax(logits, -1)  # the model's own log-probs; EOS then barred
            if self.eos:
                logp[:, self.eos] = -math.inf
            self._bar_repeats(logp, beams.reshape(n * b, -1))
            logp = logp.view(n, b, -1)
            kk = min(k, logp.shape[-1])
            if sampler is None:
                top_lp, top_tok = logp.topk(kk, dim=-1)  # (n, b, k)
            else:
                u = torch.rand(logp.shape, generator=sampler, dtype=torch.float64)
                keys = logp - torch.log(-torch.log(u.clamp_min(1e-300))).to(logp)
                top_tok = keys.topk(kk, dim=-1).indices
                top_lp = logp.gather(-1, top_tok)
            cand_cum = cum[:, :, None] + top_lp
            cache.batch_repeat_interleave(kk)  # row (sample, parent, child), child fastest
            logits, cache, new = self._forward(top_tok.reshape(n * b * kk, 1), cache)
            cand_counts = counts[:, :, None] + new.view(n, b, kk, *new.shape[1:])
            score = -(cand_cum / (step + 1))
            if math.isfinite(self.tau):
                judged = cand_counts if self.sigma_on == "candidate" else counts[:, :, None]
                score = score + imbalance(judged, self.balance).double() / self.tau
            keep = min(w, b * kk)
            best = score.reshape(n, -1).topk(keep, dim=-1, largest=False).indices  # (n, keep)
            parent, child = best // kk, best % kk
            flat = ((rows * b + parent) * kk + child).reshape(-1)
            cache.batch_select_indices(flat)
            logits = logits[flat]
            beams = torch.cat([beams[rows, parent], top_tok[rows, parent, child][..., None]], -1)
            cum, counts = cand_cum[rows, parent, child], cand_counts[rows, parent, child]
        # the final beams have equal length: the best by the same score, on each finished
        # sequence's own routing
        final = -cum
        if math.isfinite(self.tau):
            final = final / steps + imbalance(counts, self.balance).double() / self.tau
        return beams[torch.arange(n), final.argmin(-1)].cpu()
