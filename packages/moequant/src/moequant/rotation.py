"""Rotation of the residual stream before quantization (QuaRot's offline ``R1``, the
rotation MoEQuant++ runs on).

With every RMSNorm gain folded into the linear layers that read its output, an orthogonal
``Q`` ``(D, D)`` can rotate the residual stream, ``x -> x Q``, without changing what the
model computes: RMSNorm is invariant to it (``||x Q|| = ||x||``), every layer that reads the
residual (attention ``q/k/v``, the router, the experts' ``gate_up``, a shared expert and
its gate, dense MLP inputs, ``lm_head``) takes ``W -> W Q``, every layer that writes to it
(attention ``o``, the experts' and MLPs' ``down``) takes ``W -> Q^T W``, and the embeddings
``E -> E Q``. A random Hadamard ``Q`` spreads a few large residual channels over all of
them, so per-channel grids lose less to outliers. QuaRot's online Hadamard rotations inside
attention and before ``down_proj`` (which need a kernel at run time) are not done.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .adapters import adapter_for, get, moe_block
from .modules import QuantExperts, QuantLinear, QuantRouter

ROTATIONS = ("hadamard", "orthogonal")
#: writers to the residual stream, by module name; every other ``Linear`` of a decoder
#: layer whose input width is the hidden size reads from it
WRITERS = ("o_proj", "down_proj")


def random_hadamard(size: int, generator: torch.Generator) -> torch.Tensor:
    """``H diag(s) / sqrt(size)`` ``(size, size)`` float64: Sylvester's Hadamard matrix
    with random column signs ``s``, orthogonal; ``size`` a power of 2."""
    if size < 1 or size & (size - 1):
        raise ValueError(
            f"a Hadamard rotation needs a hidden size that is a power of 2, got {size}; "
            'use kind="orthogonal"'
        )
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < size:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)])
    signs = torch.randint(0, 2, (size,), generator=generator).double() * 2 - 1
    return h * signs / math.sqrt(size)


def random_orthogonal(size: int, generator: torch.Generator) -> torch.Tensor:
    """A Haar-random orthogonal ``(size, size)`` float64 matrix (QR of a Gaussian, signs
    fixed by the diagonal of ``R``)."""
    q, r = torch.linalg.qr(torch.randn(size, size, generator=generator, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r))


def _norm_gain(norm: nn.Module, name: str) -> torch.Tensor:
    if getattr(norm, "bias", None) is not None:
        raise ValueError(
            f"{name} has a bias: a LayerNorm is not invariant to rotation (only RMSNorm is)"
        )
    weight = getattr(norm, "weight", None)
    if weight is None:
        raise ValueError(f"{name} has no weight: not an RMSNorm this rotation knows")
    return weight.detach().double()


def _set(param: nn.Parameter, value: torch.Tensor) -> None:
    param.data = value.to(param.dtype).contiguous()


def _rotate_linears(module: nn.Module, gain: torch.Tensor, Q: torch.Tensor, hidden: int):
    """Fold ``gain`` into and rotate every reader, rotate every writer inside ``module``."""
    for name, child in module.named_modules():
        if not isinstance(child, nn.Linear):
            continue
        w = child.weight.detach().double()
        if name.rsplit(".", 1)[-1] in WRITERS:
            _set(child.weight, Q.T @ w)
            if child.bias is not None:
                _set(child.bias, child.bias.detach().double() @ Q)
        elif child.in_features == hidden:
            _set(child.weight, (w * gain) @ Q)


@torch.no_grad()
def rotate(model: nn.Module, kind: str = "hadamard", seed: int = 0) -> nn.Module:
    """Rotate ``model``'s residual stream in place (module doc); it computes the same
    function (to float rounding) and is then quantized as usual.

    Parameters
    ----------
    model : transformers MoE causal LM (Mixtral, Qwen2-MoE, Qwen3-MoE or a registered
        adapter with ``input_layernorm`` / ``self_attn`` / ``post_attention_layernorm`` /
        RMSNorm ``model.norm``), not yet quantized
    kind : {"hadamard", "orthogonal"}
        A random Hadamard matrix (hidden size a power of 2) or a random orthogonal one.
    seed : int
        Seeds the signs / the matrix.

    Returns
    -------
    model
        Norm gains set to 1, ``lm_head`` untied from the embeddings (``config.
        tie_word_embeddings = False``), ``model.rotation_`` = ``{"kind", "seed"}``.
    """
    if kind not in ROTATIONS:
        raise ValueError(f"kind must be one of {ROTATIONS}, got {kind!r}")
    if any(isinstance(m, (QuantLinear, QuantExperts, QuantRouter)) for m in model.modules()):
        raise ValueError("model is already quantized: rotate the full-precision model first")
    adapter = adapter_for(model)
    hidden = int(model.config.hidden_size)
    g = torch.Generator().manual_seed(seed)
    Q = (random_hadamard if kind == "hadamard" else random_orthogonal)(hidden, g)
    layers = get(model, adapter.layers)
    body = get(model, adapter.layers.rsplit(".", 1)[0])
    for i, layer in enumerate(layers):
        for part in ("input_layernorm", "self_attn", "post_attention_layernorm"):
            if not hasattr(layer, part):
                raise ValueError(f"decoder layer {i} has no {part}: cannot rotate this model")
    final = _norm_gain(body.norm, "model.norm")
    gains = [
        (_norm_gain(layer.input_layernorm, f"layer {i} input_layernorm"),
         _norm_gain(layer.post_attention_layernorm, f"layer {i} post_attention_layernorm"))
        for i, layer in enumerate(layers)
    ]  # fmt: skip
    head = model.get_output_embeddings()
    embed = model.get_input_embeddings()
    if head.weight is embed.weight:  # tied: lm_head gets the final gain, embeddings do not
        head.weight = nn.Parameter(head.weight.detach().clone())
        model.config.tie_word_embeddings = False
    _set(embed.weight, embed.weight.detach().double() @ Q)
    for layer, (attn_gain, mlp_gain) in zip(layers, gains, strict=True):
        _rotate_linears(layer.self_attn, attn_gain, Q, hidden)
        block = moe_block(adapter, layer)
        mlp = getattr(layer, adapter.block)
        _rotate_linears(mlp, mlp_gain, Q, hidden)  # router, shared expert, dense MLP
        if block is not None:
            router = get(block, adapter.router)
            if not isinstance(router, nn.Linear):  # a router module with its own weight
                _set(router.weight, (router.weight.detach().double() * mlp_gain) @ Q)
            experts = get(block, adapter.experts)
            gate_up = experts.gate_up_proj.detach().double()  # (E, 2I, D): readers
            _set(experts.gate_up_proj, (gate_up * mlp_gain) @ Q)
            _set(experts.down_proj, Q.T @ experts.down_proj.detach().double())  # (E, D, I)
        layer.input_layernorm.weight.fill_(1.0)
        layer.post_attention_layernorm.weight.fill_(1.0)
    _set(head.weight, (head.weight.detach().double() * final) @ Q)
    body.norm.weight.fill_(1.0)
    model.rotation_ = {"kind": kind, "seed": seed}
    return model
