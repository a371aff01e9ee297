"""Where a transformers MoE architecture keeps its router, experts and shared expert, and
how it turns router logits into routing weights.

Transformers 5 MoE blocks hold their experts as one module with fused 3-D parameters,
``experts.gate_up_proj`` ``(E, 2 I, D)`` and ``experts.down_proj`` ``(E, D, I)``, and the
router as ``gate`` with a ``weight`` ``(E, D)``. A new architecture with the same layout is
supported by registering an :class:`MoEAdapter` for its ``config.model_type``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class MoEAdapter:
    """Attribute paths of one architecture, relative to the model or a decoder layer.

    Attributes
    ----------
    layers : str
        The decoder layers, from the causal-LM model (``"model.layers"``).
    block : str
        The MoE block inside a decoder layer (``"mlp"``); layers whose block lacks a router
        are dense and quantized as plain linear layers.
    router, experts : str
        Inside the block: the router (a module with ``weight`` ``(E, D)``) and the fused
        experts (``gate_up_proj`` ``(E, 2 I, D)``, ``down_proj`` ``(E, D, I)``, ``act_fn``).
    shared_expert, shared_gate : str or None
        Inside the block: an always-on expert MLP and the ``Linear(D, 1)`` whose sigmoid
        scales it (Qwen2-MoE), or ``None``.
    renormalize : str or bool
        Whether the top-k routing probabilities are renormalised to sum to 1: a bool, or the
        name of a boolean config attribute (``"norm_topk_prob"``).
    top_k, num_experts : str
        Config attribute names.
    """

    layers: str = "model.layers"
    block: str = "mlp"
    router: str = "gate"
    experts: str = "experts"
    shared_expert: str | None = None
    shared_gate: str | None = None
    renormalize: str | bool = True
    top_k: str = "num_experts_per_tok"
    num_experts: str = "num_local_experts"

    def route(self, config, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Routing weights and expert indices ``(T, k)`` from router logits ``(T, E)``:
        softmax, top-k, optionally renormalised (what the architecture's router does)."""
        probs = torch.softmax(logits.float(), dim=-1)
        weights, indices = torch.topk(probs, getattr(config, self.top_k), dim=-1)
        renorm = self.renormalize
        if isinstance(renorm, str):
            renorm = bool(getattr(config, renorm))
        if renorm:
            weights = weights / weights.sum(-1, keepdim=True)
        return weights.to(logits.dtype), indices

    def n_experts(self, config) -> int:
        return int(getattr(config, self.num_experts))


ADAPTERS: dict[str, MoEAdapter] = {
    "mixtral": MoEAdapter(),
    "qwen2_moe": MoEAdapter(
        shared_expert="shared_expert",
        shared_gate="shared_expert_gate",
        renormalize="norm_topk_prob",
        num_experts="num_experts",
    ),
    "qwen3_moe": MoEAdapter(renormalize="norm_topk_prob", num_experts="num_experts"),
}


def register_adapter(model_type: str, adapter: MoEAdapter) -> None:
    """Support a new ``config.model_type`` (or override a built-in one)."""
    ADAPTERS[model_type] = adapter


def get(obj, path: str):
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def adapter_for(model: nn.Module) -> MoEAdapter:
    """The adapter of ``model.config.model_type``; a clear error for unknown architectures."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in ADAPTERS:
        raise ValueError(
            f"no MoE adapter for model_type {model_type!r}; known: {sorted(ADAPTERS)}. "
            "Register one with moequant.register_adapter(model_type, MoEAdapter(...)), or "
            "pass allow_dense=True to quantize a dense model with plain GPTQ"
        )
    return ADAPTERS[model_type]


def moe_block(adapter: MoEAdapter, layer: nn.Module):
    """The layer's MoE block, or ``None`` for a dense layer."""
    block = getattr(layer, adapter.block, None)
    if block is None or not hasattr(block, adapter.router) or not hasattr(block, adapter.experts):
        return None
    return block
