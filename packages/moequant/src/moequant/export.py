"""Export a quantized model as a checkpoint inference engines load.

``export(model, path, format=...)`` writes moequant's integer codes, unchanged, in one of
two formats:

``"compressed-tensors"`` (``pack-quantized``; what llm-compressor writes, read by
transformers and vLLM)
    Per quantized matrix ``weight_packed`` (int32, packed by compressed-tensors' own
    ``pack_to_int32``), ``weight_scale`` ``(rows, groups)``, ``weight_shape`` and, for
    asymmetric grids, ``weight_zero_point``. Codes are stored signed: compressed-tensors
    dequantizes ``s (q - z)`` with ``q`` in ``[-2^(b-1), 2^(b-1))`` and ``z = 0`` when
    symmetric; moequant's codes ``c`` in ``[0, 2^b)`` with zero ``z_m`` map to
    ``q = c - 2^(b-1)``, ``z = z_m - 2^(b-1)`` (the same float weights). Names are the ones
    transformers itself writes for the architecture (per-expert legacy names such as
    ``block_sparse_moe.experts.{e}.w1`` for Mixtral): the dequantized model is saved by
    ``save_pretrained`` into a scratch folder and every saved matrix is matched to the
    quantized matrix it equals. Contiguous groups only (no act-order).

``"gptq"`` (GPTQ v1 checkpoint format: AutoGPTQ, GPTQModel, vLLM, exllama)
    Per quantized matrix ``W`` ``(out, in)``: ``qweight`` ``(in b / 32, out)`` int32 (the
    codes of each output column as a little-endian bit stream along the input dimension,
    which for 3 bits is the 32-codes-in-three-words layout), ``qzeros`` ``(groups,
    out b / 32)`` int32 (zero points minus one, the v1 convention, packed alike along the
    output dimension), ``scales`` ``(groups, out)`` and ``g_idx`` ``(in,)`` int32 (the
    group of every input column, so act-order models export as they are, with
    ``desc_act``). Experts are written one module each, under the names GPTQModel
    builds: ``mlp.experts.{e}.gate_proj|up_proj|down_proj``. The dequantized weight is
    ``scales[g_idx] (q - (qzeros + 1)[g_idx])``: moequant's ``s (c - z)``.

Routers are written in float (dequantized; compressed-tensors lists them as ignored). The
folder is written atomically.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from icml25_core.hub import atomic_directory

from .io import TOKENIZER_FILES, WEIGHTS
from .layerwise import QuantConfig
from .modules import PackedWeight, QuantExperts, QuantLinear, QuantRouter
from .quantizer import unpack

FORMATS = ("compressed-tensors", "gptq")
GPTQ_CONFIG = "quantize_config.json"
GPTQ_BITS = (2, 3, 4, 8)
EXPORT_CONTENTS = (
    "config.json",
    "generation_config.json",
    GPTQ_CONFIG,
    WEIGHTS,
    *TOKENIZER_FILES,
)
#: the per-expert module names of a fused ``gate_up_proj`` (gate rows first) and ``down_proj``
EXPERT_PARTS = ("gate_proj", "up_proj", "down_proj")


@dataclass
class Matrix:
    """One quantized matrix ``(rows, cols)`` as moequant holds it."""

    weight: torch.Tensor  # float, dequantized
    codes: torch.Tensor  # int64 in [0, 2^b)
    scales: torch.Tensor  # (rows, groups)
    zeros: torch.Tensor  # (rows, groups)
    g_idx: torch.Tensor  # (cols,) int64


def _matrix(pw: PackedWeight, index: int | None = None) -> Matrix:
    idx = () if index is None else (index,)
    rows, cols = pw.shape[-2:]
    codes = unpack(pw.codes[idx], pw.bits, (rows, cols))
    return Matrix(pw.dequantize(index), codes, pw.scales[idx], pw.zeros[idx], pw.g_idx[idx].long())


def _rows(m: Matrix, sl: slice) -> Matrix:
    return Matrix(m.weight[sl], m.codes[sl], m.scales[sl], m.zeros[sl], m.g_idx)


def quantized_state(model: nn.Module) -> tuple[dict[str, torch.Tensor], dict[str, Matrix]]:
    """The model split into float tensors (routers dequantized) and quantized matrices.

    Returns
    -------
    floats : dict
        Runtime state-dict names (``model.layers.0.mlp.gate.weight``) to float tensors.
    matrices : dict
        Module names to :class:`Matrix`, the fused experts split one module per expert and
        projection (``model.layers.0.mlp.experts.3.up_proj``).
    """
    floats, matrices = {}, {}
    packed = (".weight_q.", ".gate_up_q.", ".down_q.")
    for key, value in model.state_dict().items():
        if not any(p in key for p in packed):
            floats[key] = value
    for name, mod in model.named_modules():
        if isinstance(mod, QuantLinear):
            matrices[name] = _matrix(mod.weight_q)
        elif isinstance(mod, QuantRouter):
            floats[f"{name}.weight"] = mod.weight_q.dequantize()
        elif isinstance(mod, QuantExperts):
            inter = mod.gate_up_q.shape[-2] // 2
            for e in range(mod.num_experts):
                gate_up = _matrix(mod.gate_up_q, e)
                matrices[f"{name}.{e}.gate_proj"] = _rows(gate_up, slice(None, inter))
                matrices[f"{name}.{e}.up_proj"] = _rows(gate_up, slice(inter, None))
                matrices[f"{name}.{e}.down_proj"] = _matrix(mod.down_q, e)
    return floats, matrices


def _fused_float_state(model: nn.Module, floats: dict, matrices: dict) -> dict:
    """The dequantized model's state in the float architecture's layout (fused experts)."""
    state = dict(floats)
    for name, mod in model.named_modules():
        if isinstance(mod, QuantLinear):
            state[f"{name}.weight"] = matrices[name].weight
        elif isinstance(mod, QuantExperts):
            experts = range(mod.num_experts)
            weights = [[matrices[f"{name}.{e}.{p}"].weight for p in EXPERT_PARTS] for e in experts]
            state[f"{name}.gate_up_proj"] = torch.stack([torch.cat(w[:2]) for w in weights])
            state[f"{name}.down_proj"] = torch.stack([w[2] for w in weights])
    return state


def _fingerprint(w: torch.Tensor) -> tuple:
    data = w.detach().cpu().contiguous().numpy().tobytes()
    return tuple(w.shape), hashlib.blake2b(data, digest_size=16).digest()


def _write_compressed_tensors(model, cfg: QuantConfig, floats, matrices, out: Path) -> dict:
    """Write the weights (and generation config) to ``out``; return the ``config.json``."""
    from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM

    with tempfile.TemporaryDirectory(dir=out.parent) as scratch:
        template = AutoModelForCausalLM.from_config(model.config)
        template.load_state_dict(_fused_float_state(model, floats, matrices))
        template.save_pretrained(scratch)
        saved = load_file(str(Path(scratch) / WEIGHTS))
        config = json.loads((Path(scratch) / "config.json").read_text())
        generation = Path(scratch) / "generation_config.json"
        if generation.is_file():
            (out / generation.name).write_text(generation.read_text())
    by_value = {_fingerprint(m.weight): m for m in matrices.values()}
    bits, offset = cfg.bits, 2 ** (cfg.bits - 1)
    tensors, ignore = {}, []
    for key, value in saved.items():
        is_matrix = key.endswith(".weight") and value.ndim == 2
        m = by_value.get(_fingerprint(value)) if is_matrix else None
        if m is None or not torch.equal(m.weight, value):
            tensors[key] = value
            if is_matrix and "embed" not in key:
                ignore.append(key[: -len(".weight")])
            continue
        base = key[: -len(".weight")]
        tensors[f"{base}.weight_packed"] = pack_to_int32((m.codes - offset).to(torch.int8), bits)
        tensors[f"{base}.weight_scale"] = m.scales.to(value.dtype).contiguous()
        tensors[f"{base}.weight_shape"] = torch.tensor(list(value.shape), dtype=torch.int32)
        if not cfg.sym:
            zp = (m.zeros.round().long() - offset).to(torch.int8)
            tensors[f"{base}.weight_zero_point"] = pack_to_int32(zp, bits, packed_dim=0)
    save_file(tensors, str(out / WEIGHTS), metadata={"format": "pt"})
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
    return config


def pack_gptq(values: torch.Tensor, bits: int) -> torch.Tensor:
    """Pack integers ``(n, m)`` in ``[0, 2^bits)`` along dim 0 into int32 ``(n bits / 32, m)``.

    Each column becomes a little-endian bit stream cut into 32-bit words: value ``i`` of a
    column occupies bits ``[i b, (i + 1) b)`` of its stream. For 2, 4 and 8 bits this is
    GPTQ's ``word |= value[w pf + j] << (b j)`` (``pf = 32 / b``); for 3 bits it is GPTQ's
    layout of 32 values in three words (value 10 straddles words 0 and 1, value 21 words 1
    and 2).
    """
    n, m = values.shape
    if (n * bits) % 32:
        raise ValueError(f"{n} values of {bits} bits do not fill whole 32-bit words")
    shifts = torch.arange(bits, device=values.device)
    stream = ((values.long()[:, None, :] >> shifts[None, :, None]) & 1).reshape(-1, 32, m)
    words = (stream << torch.arange(32, device=values.device)[None, :, None]).sum(1)
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def _check_gptq(cfg: QuantConfig, matrices: dict[str, Matrix]) -> None:
    if cfg.bits not in GPTQ_BITS:
        raise ValueError(
            f"the GPTQ format holds {GPTQ_BITS}-bit weights, the model has bits={cfg.bits}"
        )
    multiple = 32 // math.gcd(32, cfg.bits)
    for name, m in matrices.items():
        if any(n % multiple for n in m.weight.shape):
            raise ValueError(
                f"{name} has shape {tuple(m.weight.shape)}: the GPTQ format packs {cfg.bits}-bit "
                f"values into 32-bit words along both dimensions, so both must be multiples "
                f"of {multiple}"
            )
        if not cfg.sym and bool((m.zeros.round() < 1).any()):
            raise ValueError(
                f"{name} has an asymmetric zero point 0, which the GPTQ v1 format (zero points "
                "stored minus one) cannot hold: quantize with sym=True"
            )


def _write_gptq(model, cfg: QuantConfig, floats, matrices, out: Path) -> dict:
    """Write the weights (and generation config) to ``out``; return the ``config.json``."""
    from safetensors.torch import save_file

    from . import __version__

    dtype = getattr(model, "dtype", torch.float32)
    tensors = {k: v.contiguous() for k, v in floats.items()}
    for name, m in matrices.items():
        zeros = m.zeros.round().long() - 1  # v1: zero points minus one
        tensors[f"{name}.qweight"] = pack_gptq(m.codes.T, cfg.bits)
        tensors[f"{name}.qzeros"] = pack_gptq(zeros, cfg.bits).T.contiguous()
        tensors[f"{name}.scales"] = m.scales.T.to(dtype).contiguous()
        tensors[f"{name}.g_idx"] = m.g_idx.to(torch.int32)
    save_file(tensors, str(out / WEIGHTS), metadata={"format": "pt"})
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.save_pretrained(out)
    quant = {
        "quant_method": "gptq",
        "checkpoint_format": "gptq",
        "bits": cfg.bits,
        "group_size": cfg.group_size,
        "desc_act": bool(cfg.act_order),
        "sym": bool(cfg.sym),
        "lm_head": False,
        "pack_dtype": "int32",
        "meta": {"quantizer": [f"moequant:{__version__}"]},
    }
    (out / GPTQ_CONFIG).write_text(json.dumps(quant, indent=2) + "\n")
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    config["quantization_config"] = quant
    return config


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
    format : {"compressed-tensors", "gptq"}
        ``"compressed-tensors"`` needs contiguous groups (``act_order=False``); its
        asymmetric MoE checkpoints do not load in transformers 5.24 (a warning says so).
        ``"gptq"`` holds act-order ``g_idx``; its v1 zero points cannot hold an asymmetric
        zero point of 0, and both dimensions of every matrix must fill 32-bit words.
    tokenizer : optional, saved beside the weights.

    Returns
    -------
    Path
    """
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    cfg = getattr(model, "quant_config", None)
    if not isinstance(cfg, QuantConfig):
        raise ValueError("model has no quant_config: quantize it with moequant.quantize first")
    floats, matrices = quantized_state(model)
    if format == "gptq":
        _check_gptq(cfg, matrices)
        write = _write_gptq
    else:
        if cfg.act_order:
            raise ValueError(
                "act_order=True scatters the column groups (g_idx); the compressed-tensors "
                "export holds contiguous groups only: quantize with act_order=False or export "
                'format="gptq"'
            )
        if not cfg.sym:
            warnings.warn(
                "asymmetric MoE checkpoints do not load in transformers 5.24 (its fused-experts "
                "conversion drops weight_zero_point); quantize with sym=True to serve the export",
                stacklevel=2,
            )
        write = _write_compressed_tensors
    with atomic_directory(path, overwrite=overwrite, contents=EXPORT_CONTENTS) as tmp:
        config = write(model, cfg, floats, matrices, tmp)
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
    return Path(path)
