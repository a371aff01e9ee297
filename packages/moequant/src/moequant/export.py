"""Export a quantized model as a checkpoint inference engines load.

``export(model, path, format="compressed-tensors")`` writes moequant's integer codes in the
compressed-tensors ``pack-quantized`` format (what llm-compressor writes; transformers and
vLLM read it): per quantized matrix ``weight_packed`` (int32, dense cross-element packing
by compressed-tensors' own ``pack_to_int32``), ``weight_scale`` (rows, groups),
``weight_shape`` and, for asymmetric grids, ``weight_zero_point``. Codes are stored signed:
compressed-tensors dequantizes ``s (q - z)`` with ``q`` in ``[-2^(b-1), 2^(b-1))`` and, when
symmetric, ``z = 0``; moequant's codes ``c`` in ``[0, 2^b)`` with ``z_m`` map to
``q = c - 2^(b-1)``, ``z = z_m - 2^(b-1)`` (the same float weights).

Checkpoint names are the ones transformers itself writes for the architecture (per-expert
legacy names such as ``block_sparse_moe.experts.{e}.w1`` for Mixtral): the dequantized model
is saved by ``save_pretrained`` into the temporary folder and every saved matrix is matched
to the quantized matrix it equals. Routers are written in float and listed as ignored.

Measured on tiny random Mixtral and Qwen2-MoE (RTN 4-bit, group 16): symmetric exports load
with ``AutoModelForCausalLM.from_pretrained`` with max |logit diff| 1.0e-7 / 1.2e-7 and the
same greedy tokens; asymmetric ones fail in transformers 5.24's fused-experts conversion
(it drops ``weight_zero_point``), so ``export`` warns. The GPTQ format is not written yet.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from pathlib import Path

import torch
from torch import nn

from icml25_core.hub import atomic_directory

from .io import TOKENIZER_FILES, WEIGHTS
from .layerwise import QuantConfig
from .modules import PackedWeight, QuantExperts, QuantLinear, QuantRouter
from .quantizer import unpack

FORMATS = ("compressed-tensors",)
EXPORT_CONTENTS = ("config.json", "generation_config.json", WEIGHTS, *TOKENIZER_FILES)


def _matrices(pw: PackedWeight, index: int | None = None):
    """(float matrix, codes, scales, zeros, g_idx) of one packed matrix."""
    idx = () if index is None else (index,)
    rows, cols = pw.shape[-2:]
    codes = unpack(pw.codes[idx], pw.bits, (rows, cols))
    return pw.dequantize(index), codes, pw.scales[idx], pw.zeros[idx], pw.g_idx[idx].long()


def _float_state(model: nn.Module) -> tuple[dict, list]:
    """The dequantized model's float state (module layout of the float architecture) and
    the quantized matrices ``(float, codes, scales, zeros, g_idx)`` it is made of."""
    state, quantized = {}, []
    for name, mod in model.named_modules():
        if isinstance(mod, QuantLinear):
            parts = _matrices(mod.weight_q)
            state[f"{name}.weight"] = parts[0]
            if mod.bias is not None:
                state[f"{name}.bias"] = mod.bias.data
            quantized.append(parts)
        elif isinstance(mod, QuantRouter):
            state[f"{name}.weight"] = mod.weight_q.dequantize()  # routers stay float
        elif isinstance(mod, QuantExperts):
            gate_up, down = [], []
            inter = mod.gate_up_q.shape[-2] // 2
            for e in range(mod.num_experts):
                w, c, s, z, g = _matrices(mod.gate_up_q, e)
                gate_up.append(w)
                quantized.append((w[:inter], c[:inter], s[:inter], z[:inter], g))
                quantized.append((w[inter:], c[inter:], s[inter:], z[inter:], g))
                parts = _matrices(mod.down_q, e)
                down.append(parts[0])
                quantized.append(parts)
            state[f"{name}.gate_up_proj"] = torch.stack(gate_up)
            state[f"{name}.down_proj"] = torch.stack(down)
    for key, value in model.state_dict().items():
        if ".weight_q." not in key and ".gate_up_q." not in key and ".down_q." not in key:
            state.setdefault(key, value)
    return state, quantized


def export(
    model: nn.Module,
    path: str | os.PathLike,
    *,
    format: str = "compressed-tensors",
    tokenizer=None,
    overwrite: bool = False,
) -> Path:
    """Write a model quantized by :func:`moequant.quantize` in ``format`` to ``path``.

    Parameters
    ----------
    model : quantized transformers causal LM
    path : folder, written atomically; an existing non-empty folder is refused unless
        ``overwrite=True`` and it holds a previous export.
    format : {"compressed-tensors"}
    tokenizer : optional, saved beside the weights.

    Returns
    -------
    Path
    """
    from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM

    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    cfg = getattr(model, "quant_config", None)
    if not isinstance(cfg, QuantConfig):
        raise ValueError("model has no quant_config: quantize it with moequant.quantize first")
    if cfg.act_order:
        raise ValueError(
            "act_order=True scatters the column groups (g_idx); the pack-quantized export "
            "holds contiguous groups only: quantize with act_order=False"
        )
    if not cfg.sym:
        warnings.warn(
            "asymmetric MoE checkpoints do not load in transformers 5.24 (its fused-experts "
            "conversion drops weight_zero_point); quantize with sym=True to serve the export",
            stacklevel=2,
        )
    state, quantized = _float_state(model)
    bits, offset = cfg.bits, 2 ** (cfg.bits - 1)
    with atomic_directory(path, overwrite=overwrite, contents=EXPORT_CONTENTS) as tmp:
        with tempfile.TemporaryDirectory(dir=tmp.parent) as scratch:
            template = AutoModelForCausalLM.from_config(model.config)
            template.load_state_dict(state)
            template.save_pretrained(scratch)
            saved = load_file(str(Path(scratch) / "model.safetensors"))
            config = json.loads((Path(scratch) / "config.json").read_text())
            generation = Path(scratch) / "generation_config.json"
            if generation.is_file():
                (tmp / generation.name).write_text(generation.read_text())
        out, ignore = {}, []
        for key, value in saved.items():
            hit = None
            if key.endswith(".weight") and value.ndim == 2:
                for w, c, s, z, _g in quantized:
                    if w.shape == value.shape and torch.equal(w, value):
                        hit = (c, s, z)
                        break
            if hit is None:
                out[key] = value
                if key.endswith(".weight") and value.ndim == 2 and "embed" not in key:
                    ignore.append(key[: -len(".weight")])
                continue
            c, s, z = hit
            base = key[: -len(".weight")]
            out[f"{base}.weight_packed"] = pack_to_int32((c - offset).to(torch.int8), bits)
            out[f"{base}.weight_scale"] = s.to(value.dtype).contiguous()
            out[f"{base}.weight_shape"] = torch.tensor(list(value.shape), dtype=torch.int32)
            if not cfg.sym:
                zp = (z - offset).to(torch.int8)
                out[f"{base}.weight_zero_point"] = pack_to_int32(zp, bits, packed_dim=0)
        save_file(out, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        weights = {
            "num_bits": bits,
            "type": "int",
            "symmetric": bool(cfg.sym),
            "strategy": "channel" if cfg.group_size == -1 else "group",
            "group_size": None if cfg.group_size == -1 else cfg.group_size,
            "dynamic": False,
            "actorder": None,
        }
        config["quantization_config"] = {
            "quant_method": "compressed-tensors",
            "format": "pack-quantized",
            "quantization_status": "compressed",
            "config_groups": {
                "group_0": {
                    "targets": ["Linear"],
                    "weights": weights,
                    "input_activations": None,
                    "output_activations": None,
                    "format": "pack-quantized",
                }
            },
            "ignore": sorted(ignore),
        }
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
    return Path(path)
