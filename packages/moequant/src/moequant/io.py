"""Saving and loading quantized models: ``config.json`` + ``quant_config.json`` +
``model.safetensors`` (packed codes, grids, group indices and the float tensors left
unquantized), plus the tokenizer when given. Nothing is unpickled."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import torch
from safetensors.torch import save_model
from torch import nn

from icml25_core.guards import load_state_dict_file
from icml25_core.hub import atomic_directory

from .adapters import MoEAdapter, adapter_for, get
from .layerwise import QuantConfig, _set
from .modules import QuantExperts, QuantLinear, QuantRouter

WEIGHTS, QUANT_CONFIG = "model.safetensors", "quant_config.json"


#: what a save of :func:`save_quantized` holds (an existing folder is replaced only when
#: every entry matches one of these)
#: what ``tokenizer.save_pretrained`` writes
TOKENIZER_FILES = (
    "tokenizer*",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab*",
    "merges.txt",
    "chat_template*",
)
SAVE_CONTENTS = ("config.json", "generation_config.json", QUANT_CONFIG, WEIGHTS, *TOKENIZER_FILES)


def save_quantized(
    model: nn.Module, path: str | Path, tokenizer=None, *, overwrite: bool = False
) -> Path:
    """Write a model returned by :func:`moequant.quantize` to the folder ``path``.

    The folder is written atomically (a temporary folder, then a rename); an existing
    non-empty folder is refused unless ``overwrite=True`` and it holds a previous save.
    """
    cfg = getattr(model, "quant_config", None)
    if not isinstance(cfg, QuantConfig):
        raise ValueError("model has no quant_config: quantize it with moequant.quantize first")
    with atomic_directory(path, overwrite=overwrite, contents=SAVE_CONTENTS) as tmp:
        model.config.save_pretrained(tmp)
        (tmp / QUANT_CONFIG).write_text(json.dumps(cfg.to_dict(), indent=2))
        save_model(model, str(tmp / WEIGHTS))
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
    return Path(path)


def _groups(cols: int, group_size: int) -> int:
    return 1 if group_size == -1 else cols // group_size


def load_quantized(path: str | Path, device: str | torch.device = "cpu") -> nn.Module:
    """Rebuild a quantized model saved by :func:`save_quantized` (on ``device``)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    path = Path(path)
    for name in ("config.json", QUANT_CONFIG, WEIGHTS):
        if not (path / name).is_file():
            raise FileNotFoundError(f"{path} has no {name}: not a folder written by save_quantized")
    try:
        cfg = QuantConfig(**json.loads((path / QUANT_CONFIG).read_text()))
    except (json.JSONDecodeError, UnicodeDecodeError, TypeError) as err:
        raise ValueError(f"{path / QUANT_CONFIG} is not a moequant quant config: {err}") from None
    config = AutoConfig.from_pretrained(path)
    model = AutoModelForCausalLM.from_config(config)
    try:
        adapter = adapter_for(model)
    except ValueError:
        adapter = MoEAdapter()
    for name, kind in cfg.modules.items():
        old = get(model, name)
        if kind == "linear":
            new = QuantLinear(
                old.in_features,
                old.out_features,
                _groups(old.in_features, cfg.group_size),
                cfg.bits,
                old.bias is not None,
            )
        elif kind == "router":
            e, d = old.weight.shape
            route = functools.partial(adapter.route, config)
            new = QuantRouter(e, d, _groups(d, cfg.group_size), cfg.bits, route)
        elif kind == "experts":
            e, two_i, d = old.gate_up_proj.shape
            i = two_i // 2
            new = QuantExperts(
                e,
                d,
                i,
                (_groups(d, cfg.group_size), _groups(i, cfg.group_size)),
                cfg.bits,
                old.act_fn,
            )
        else:
            raise ValueError(f"{QUANT_CONFIG}: unknown module kind {kind!r} for {name}")
        _set(model, name, new)
    load_state_dict_file(model, path / WEIGHTS, map_location=device)
    model.quant_config = cfg
    return model.to(device).eval()
