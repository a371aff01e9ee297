"""What running twice costs: greedy generation latency of JuICE against plain decoding,
JUNE (run once) and CAD (two sequences), with and without KV caches; and the same single
forward edit through juice-lm's hooks against nnsight, the official code's tool.

A random Llama-architecture model (no download; latency does not depend on the weights),
batch 1, a prompt of ``T`` tokens, 16 new tokens. Without caches every step recomputes the
whole sequence, as the official code does.

Run: ``icml25 bench juice-lm`` (or ``--smoke``).
"""

from __future__ import annotations

import contextlib

import torch

from icml25_core import BenchReport, compare, make_report
from juice_lm import CAD, JUNE, JuICE, plain
from juice_lm.toy import small_llama


def _model(hidden: int, layers: int, heads: int):
    return small_llama(2048, hidden=hidden, layers=layers, heads=heads, max_positions=1024)


def _selection(layers: int, heads: int):
    """Five enhance and five suppress heads spread over the layers (as the paper's K=5)."""
    spread = [(i % layers, (3 * i) % heads) for i in range(10)]
    return spread[:5], spread[5:]


def _generation(model, length: int, new: int, repeats: int, label: str):
    ids = torch.randint(3, 2048, (1, length), generator=torch.Generator().manual_seed(1))
    question = ids[:, -8:]
    sel = _selection(model.config.num_hidden_layers, model.config.num_attention_heads)
    juice, june, base = JuICE(model, sel, 2.0, 1.0), JUNE(model, sel, 2.0, 1.0), plain(model)
    cad = CAD(model)

    candidates = {
        "plain (KV cache)": lambda: base.generate(ids, max_new_tokens=new),
        "JuICE (KV cache)": lambda: juice.generate(ids, max_new_tokens=new),
        "JUNE (KV cache)": lambda: june.generate(ids, max_new_tokens=new),
        "CAD (KV cache)": lambda: cad.generate(ids, question, new),
        "plain (no cache)": lambda: base.generate(ids, max_new_tokens=new, use_cache=False),
        "JuICE (no cache, official)": lambda: juice.generate(
            ids, max_new_tokens=new, use_cache=False
        ),
    }
    return compare(
        candidates, reference="plain (KV cache)", label=label, size=length, repeats=repeats
    )


def _nnsight(model, length: int, repeats: int, label: str):
    from nnsight import NNsight

    ids = torch.randint(3, 2048, (1, length), generator=torch.Generator().manual_seed(2))
    wrapped = NNsight(model)
    layer, head, alpha = model.config.num_hidden_layers - 1, 1, 2.0
    d = model.config.hidden_size // model.config.num_attention_heads
    june = JUNE(model, ([(layer, head)], []), alpha, 0.0)

    def through_nnsight():
        with torch.no_grad(), wrapped.trace(ids):
            proj = wrapped.model.layers[layer].self_attn.o_proj
            z = proj.input[..., head * d : (head + 1) * d]
            proj.output[:] = proj.output + alpha * (z @ proj.weight[:, head * d : (head + 1) * d].T)
            out = wrapped.output.logits.save()
        return out

    candidates = {
        "nnsight edit": through_nnsight,
        "juice-lm hook edit": lambda: june.logits(ids),
        "plain forward": lambda: plain(model).logits(ids),
    }
    return compare(candidates, reference="nnsight edit", label=label, size=length, repeats=repeats)


def run(smoke: bool = False) -> BenchReport:
    if smoke:
        model = _model(64, 2, 4)
        comparisons = [_generation(model, 16, 4, 1, "smoke, T=16")]
    else:
        model = _model(256, 6, 8)
        comparisons = [_generation(model, t, 16, 3, f"T={t}") for t in (64, 256)]
    with contextlib.suppress(ImportError):  # nnsight is a dev dependency
        comparisons.append(_nnsight(model, 16 if smoke else 128, 1 if smoke else 5, "one forward"))
    notes = [
        "random LlamaForCausalLM (hidden 256, 6 layers, 8 heads, vocab 2048), CPU, batch 1, "
        "16 greedy tokens; 10 edited heads for JuICE/JUNE",
        "ratio > 1: slower than plain KV-cached decoding (generation) or than nnsight (edit)",
        "JuICE runs the model twice per step: about 2x plain is the method's price",
    ]
    return make_report(
        "juice-lm generation latency", comparisons, "juice-lm", "torch", "nnsight", notes=notes
    )


if __name__ == "__main__":
    run().render()
