"""Attention heads of a Hugging Face causal LM, seen at the input of the output projection.

Multi-head attention ends with ``o = W_O [z_1; ...; z_H] + b``: head ``j`` writes
``h_j = W_O[:, j] z_j`` into the residual stream and ``sum_j h_j + b = o``. Every
intervention of this package is an additive edit of ``o`` by a weighted sum of head outputs,

.. math:: o' = o + \\sum_j c_j \\, W_O[:, j] \\, z_j^{\\text{src}},

where ``z^src`` is either the projection's own input in the same forward ("run once") or
an input captured from an earlier clean forward ("run twice"). ``c_j = -1`` zero-ablates
head ``j``. The edit is a forward hook on the projection module: no model file is patched,
and every attention implementation (eager, SDPA, flash) is covered because the hook sees
only the projection's input.

Where the projection lives is an architecture's business: :data:`ADAPTERS` maps a
``config.model_type`` to a :class:`HeadAdapter`, and :func:`register_adapter` adds one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import torch
from torch import nn

Head = tuple[int, int]
"""A head as ``(layer, head)``, both zero-based."""


@dataclass(frozen=True)
class HeadAdapter:
    """Where one architecture keeps its attention output projections.

    Attributes
    ----------
    layers : str
        Dotted path from the ``*ForCausalLM`` model to its list of decoder layers.
    projection : str
        Dotted path from a decoder layer to the attention output projection.
    transposed : bool
        ``True`` for GPT-2's ``Conv1D`` (weight of shape ``(in, out)``, ``y = x W + b``);
        ``False`` for ``nn.Linear`` (weight ``(out, in)``).
    """

    layers: str
    projection: str
    transposed: bool = False


_LLAMA_LIKE = HeadAdapter("model.layers", "self_attn.o_proj")
ADAPTERS: dict[str, HeadAdapter] = {
    "llama": _LLAMA_LIKE,
    "qwen2": _LLAMA_LIKE,
    "qwen3": _LLAMA_LIKE,
    "mistral": _LLAMA_LIKE,
    "gemma": _LLAMA_LIKE,
    "gemma2": _LLAMA_LIKE,
    "gemma3_text": _LLAMA_LIKE,
    "olmo": _LLAMA_LIKE,
    "olmo2": _LLAMA_LIKE,
    "phi3": _LLAMA_LIKE,
    "phi": HeadAdapter("model.layers", "self_attn.dense"),
    "gpt_neox": HeadAdapter("gpt_neox.layers", "attention.dense"),
    "gpt2": HeadAdapter("transformer.h", "attn.c_proj", transposed=True),
}
"""``config.model_type`` -> :class:`HeadAdapter` for the supported architectures."""


def register_adapter(model_type: str, adapter: HeadAdapter) -> None:
    """Teach the package where ``model_type``'s attention output projections are."""
    if not isinstance(adapter, HeadAdapter):
        raise TypeError(f"adapter must be a HeadAdapter, got {type(adapter).__name__}")
    ADAPTERS[str(model_type)] = adapter


def _get(obj: object, path: str) -> object:
    for part in path.split("."):
        obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
    return obj


def _num_heads(config) -> int:
    for key in ("num_attention_heads", "n_head"):
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    raise ValueError("model.config has neither num_attention_heads nor n_head")


class AttentionHeads:
    """Per-head capture and additive edits on a causal LM, through forward hooks.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM whose ``config.model_type`` is in :data:`ADAPTERS`.

    Attributes
    ----------
    num_layers, num_heads, head_dim : int
        The attention geometry (``head_dim`` read from the projection's input width, so
        Gemma's ``head_dim * heads != hidden_size`` is handled).
    projections : list of nn.Module
        The output projection of each layer.
    """

    def __init__(self, model: nn.Module):
        config = getattr(model, "config", None)
        model_type = getattr(config, "model_type", None)
        if model_type not in ADAPTERS:
            raise ValueError(
                f"model has model_type {model_type!r}, which juice_lm has no adapter for; "
                f"supported: {sorted(ADAPTERS)} (add one with register_adapter)"
            )
        self.model = model
        self.adapter = ADAPTERS[model_type]
        try:
            layers = _get(model, self.adapter.layers)
            self.projections = [_get(layer, self.adapter.projection) for layer in layers]
        except (AttributeError, IndexError, TypeError) as exc:
            raise ValueError(
                f"model of type {model_type!r} does not have the layout its adapter expects "
                f"({self.adapter}); pass the *ForCausalLM model"
            ) from exc
        self.num_layers = len(self.projections)
        self.num_heads = _num_heads(config)
        width = self._weight(0).shape[1]
        if width % self.num_heads:
            raise ValueError(
                f"the projection's input width {width} is not a multiple of {self.num_heads} heads"
            )
        self.head_dim = width // self.num_heads

    # -- geometry ------------------------------------------------------------------------
    def _weight(self, layer: int) -> torch.Tensor:
        """The projection weight of ``layer`` as ``(out, in)``."""
        w = self.projections[layer].weight
        return w.T if self.adapter.transposed else w

    def check_heads(self, heads, name: str = "heads") -> list[Head]:
        """``heads`` as a list of ``(layer, head)`` int pairs, every one in range."""
        out = []
        for h in heads:
            try:
                layer, head = (int(v) for v in h)
            except (TypeError, ValueError):
                raise ValueError(f"{name} must hold (layer, head) pairs, got {h!r}") from None
            if not (0 <= layer < self.num_layers and 0 <= head < self.num_heads):
                raise ValueError(
                    f"{name} holds head {(layer, head)}, out of range for {self.num_layers} "
                    f"layers x {self.num_heads} heads"
                )
            out.append((layer, head))
        return out

    def coefficient_tensors(
        self, coefficients: Mapping[Head, float], batch: int | None = None
    ) -> dict[int, torch.Tensor]:
        """``{(layer, head): c}`` as ``{layer: tensor (num_heads,)}`` (zeros elsewhere)."""
        heads = self.check_heads(coefficients, "coefficients")
        out: dict[int, torch.Tensor] = {}
        for (layer, head), c in zip(heads, coefficients.values(), strict=True):
            value = float(c)
            if value != value or value in (float("inf"), float("-inf")):
                raise ValueError(f"coefficient of head {(layer, head)} must be finite, got {c}")
            row = out.setdefault(layer, torch.zeros(self.num_heads))
            row[head] += value
        return {k: v for k, v in out.items() if bool(v.any())}

    def head_outputs(self, layer: int, z: torch.Tensor) -> torch.Tensor:
        """Each head's write into the residual stream.

        Parameters
        ----------
        layer : int
        z : tensor (..., num_heads * head_dim)
            The projection's input.

        Returns
        -------
        tensor (..., num_heads, d_model)
            ``h_j``; their sum over heads plus the projection's bias is its output.
        """
        w = self._weight(layer)  # (d_model, H * D)
        zh = z.unflatten(-1, (self.num_heads, self.head_dim))
        wh = w.unflatten(1, (self.num_heads, self.head_dim))  # (d_model, H, D)
        return torch.einsum("...hd,ohd->...ho", zh, wh.to(zh.dtype))

    def delta(self, layer: int, z: torch.Tensor, coef: torch.Tensor) -> torch.Tensor:
        """``sum_j coef_j h_j``: the edit of ``layer``'s output for per-head weights ``coef``.

        Parameters
        ----------
        z : tensor (B, T, num_heads * head_dim)
        coef : tensor (num_heads,) or (B, num_heads)

        Returns
        -------
        tensor (B, T, d_model)
        """
        coef = coef.to(device=z.device, dtype=z.dtype)
        scale = coef[:, None, :, None] if coef.dim() == 2 else coef[:, None]
        masked = (z.unflatten(-1, (self.num_heads, self.head_dim)) * scale).flatten(-2)
        w = self._weight(layer)
        return nn.functional.linear(masked, w.to(masked.dtype))

    # -- hooks -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def capture(self, layers=None) -> Iterator[dict[int, torch.Tensor]]:
        """Record the projection input of ``layers`` (default: all) during the block.

        Yields a dict ``{layer: tensor (B, T, H * D)}`` filled by each forward (the last
        forward inside the block wins).
        """
        layers = range(self.num_layers) if layers is None else sorted(set(layers))
        store: dict[int, torch.Tensor] = {}
        handles = []

        def make(layer):
            def hook(module, args):
                store[layer] = args[0].detach()

            return hook

        try:
            for layer in layers:
                handles.append(self.projections[layer].register_forward_pre_hook(make(layer)))
            yield store
        finally:
            for h in handles:
                h.remove()

    @contextlib.contextmanager
    def edit(
        self,
        coefficients: Mapping[int, torch.Tensor],
        source: Mapping[int, torch.Tensor] | None = None,
    ) -> Iterator[None]:
        """Add ``sum_j c_j h_j`` to each edited layer's projection output during the block.

        Parameters
        ----------
        coefficients : dict of int to tensor (num_heads,) or (B, num_heads)
            Per-layer head weights (:meth:`coefficient_tensors`).
        source : dict of int to tensor (B, T, H * D), optional
            Projection inputs captured from a clean forward of the same tokens ("run
            twice"); by default each layer's own input in this forward ("run once").
        """
        handles = []

        def make(layer, coef):
            def hook(module, args, output):
                z = args[0] if source is None else source[layer]
                if z.shape != args[0].shape:
                    raise ValueError(
                        f"captured input of layer {layer} has shape {tuple(z.shape)}, but this "
                        f"forward's is {tuple(args[0].shape)}: capture and edit must see the "
                        "same tokens"
                    )
                return output + self.delta(layer, z, coef)

            return hook

        try:
            for layer, coef in coefficients.items():
                if source is not None and layer not in source:
                    raise ValueError(f"source has no captured input for layer {layer}")
                handles.append(self.projections[layer].register_forward_hook(make(layer, coef)))
            yield
        finally:
            for h in handles:
                h.remove()
