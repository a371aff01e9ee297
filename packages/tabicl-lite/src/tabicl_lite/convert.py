"""Convert the official TabICL checkpoints (``soda-inria/tabicl``, v1 and v2 classifiers)
into this package's :class:`~tabicl_lite.model.TabICL`.

The official network computes the same function as ours; the checkpoint differs by names
and packing only:

* each attention block packs ``q``, ``k``, ``v`` in one ``in_proj_weight`` (ours: ``q`` and
  a packed ``kv``) and applies ONE LayerNorm (``norm1``) to queries and keys/values alike
  (ours: ``norm_q`` and ``norm_kv``, both set to ``norm1``);
* the label encoders are ``Linear(one_hot(y))`` (ours: an embedding, row ``c`` = column
  ``c`` of the weight plus the bias);
* the official network does not standardise the table (its classifier does): the
  converted model has ``standardize=False``.

Which generation a checkpoint is comes from its contents: a ``config`` with any of the
``tabicl`` 2.x keys (``col_affine``, ``col_feature_group``, ``col_target_aware``,
``col_ssmax``, ``icl_ssmax``, ``row_rope_interleaved``, ...) was written by 2.x, and the
keys it omits take the 2.x constructor's defaults; a config without them (``tabicl``
0.1.x) takes the 0.1.x defaults; the tensors must then be exactly the ones that network
has. v1 checkpoints (``tabicl-classifier-v1-20250208.ckpt``,
``tabicl-classifier-v1.1-20250506.ckpt``) and the v2 classifier
(``tabicl-classifier-v2-20260212.ckpt``: no affine column output, feature groups of 3,
target-aware columns, query-aware scalable softmax, half-split RoPE) load. Refused, naming
the setting: regression checkpoints (``max_classes=0``, e.g. ``tabicl-regressor-v2``),
LayerNorms without bias, post-norm blocks, other activations than GELU, the "valid"
feature grouping and the scalable softmaxes other than ``qassmax-mlp-elementwise``
(none of them in a released classifier). Files are read with
``torch.load(weights_only=True)``: tensors and plain containers only, never an arbitrary
pickle.

Command line: ``python -m tabicl_lite.convert IN.ckpt OUT_DIR`` writes ``config.json`` and
``model.safetensors`` (a folder :class:`~tabicl_lite.TabICLClassifier` loads with
``model_path=OUT_DIR``).
"""

from __future__ import annotations

import argparse
import os
import pickle
import zipfile
from collections.abc import Mapping
from pathlib import Path

import torch

from icml25_core.guards import check_state_dict

from .layers import SSMAX_TYPES
from .model import FEATURE_GROUPS, TabICL, TabICLConfig

#: official config key -> ours
_CONFIG_KEYS = {
    "max_classes": "max_classes",
    "embed_dim": "embed_dim",
    "col_num_blocks": "col_blocks",
    "col_nhead": "col_heads",
    "col_num_inds": "n_inducing",
    "row_num_blocks": "row_blocks",
    "row_nhead": "row_heads",
    "row_num_cls": "n_cls",
    "row_rope_base": "rope_base",
    "icl_num_blocks": "icl_blocks",
    "icl_nhead": "icl_heads",
    "ff_factor": "ff_factor",
    "col_affine": "col_affine",
    "col_feature_group": "feature_group",
    "col_feature_group_size": "feature_group_size",
    "col_target_aware": "target_aware",
    "col_ssmax": "col_ssmax",
    "icl_ssmax": "icl_ssmax",
    "row_rope_interleaved": "rope_interleaved",
}
#: the keys only ``tabicl`` 2.x writes: their presence makes a config a 2.x one
_V2_KEYS = {
    "col_affine",
    "col_feature_group",
    "col_feature_group_size",
    "col_target_aware",
    "col_ssmax",
    "icl_ssmax",
    "row_rope_interleaved",
    "bias_free_ln",
    "norm_first",
    "activation",
    "num_quantiles",
    "zero_init",
}
#: the official constructors' defaults for keys a config omits: 0.1.x (v1) and 2.x
_DEFAULTS_V1 = {
    "max_classes": 10,
    "embed_dim": 128,
    "col_num_blocks": 3,
    "col_nhead": 4,
    "col_num_inds": 128,
    "row_num_blocks": 3,
    "row_nhead": 8,
    "row_num_cls": 4,
    "row_rope_base": 100000,
    "icl_num_blocks": 12,
    "icl_nhead": 4,
    "ff_factor": 2,
    "col_affine": True,
    "col_feature_group": False,
    "col_feature_group_size": 3,
    "col_target_aware": False,
    "col_ssmax": False,
    "icl_ssmax": False,
    "row_rope_interleaved": True,
    "bias_free_ln": False,
    "norm_first": True,
    "activation": "gelu",
}
_DEFAULTS_V2 = {
    **_DEFAULTS_V1,
    "col_nhead": 8,
    "icl_nhead": 8,
    "col_affine": False,
    "col_feature_group": "same",
    "col_target_aware": True,
    "col_ssmax": "qassmax-mlp-elementwise",
    "icl_ssmax": "qassmax-mlp-elementwise",
}
#: settings no released classifier uses and this package does not implement
_UNSUPPORTED = {
    "bias_free_ln": ((False,), "LayerNorms without bias (the v2 regressor's)"),
    "norm_first": ((True,), "post-norm blocks"),
    "activation": (("gelu",), "another activation than GELU"),
}
#: official keys that carry no weights of ours (dropout rate is irrelevant at inference;
#: zero_init/recompute only affect training; quantiles only regression)
_IGNORED_CONFIG = {"dropout", "zero_init", "recompute", "num_quantiles"}


def _implemented(key: str, value, on: str, implemented: tuple[str, ...], what: str) -> str:
    """The official ``key``'s ``value`` as ours (``False`` / ``None`` is "none", ``True`` is
    ``on``), refused unless in ``implemented``."""
    ours = {False: "none", None: "none", True: on}.get(value, value)
    if ours not in implemented:
        raise ValueError(
            f"the official checkpoint has {key}={value!r}: {what} this converter does not "
            f"implement (only {implemented}, the v2 classifier's)"
        )
    return ours


def config_from_official(config: Mapping) -> TabICLConfig:
    """Our :class:`TabICLConfig` for an official checkpoint's ``config`` dict (v1 or v2).

    Raises
    ------
    ValueError
        A regression head (``max_classes=0``), a setting this package does not implement,
        or an unknown key, named.
    """
    config = dict(config)
    if config.get("max_classes", 10) == 0:
        raise ValueError(
            "the official checkpoint is a regression model (max_classes=0); only the "
            "classification checkpoints are supported"
        )
    unknown = sorted(set(config) - set(_CONFIG_KEYS) - _V2_KEYS - _IGNORED_CONFIG)
    if unknown:
        raise ValueError(f"the official checkpoint's config has unknown keys {unknown}")
    full = {**(_DEFAULTS_V2 if _V2_KEYS & set(config) else _DEFAULTS_V1), **config}
    for key, (accepted, what) in _UNSUPPORTED.items():
        if full[key] not in accepted:
            raise ValueError(
                f"the official checkpoint has {key}={full[key]!r}: {what}, which this "
                f"converter does not implement (it needs {key} in {accepted})"
            )
    ours = {mine: full[theirs] for theirs, mine in _CONFIG_KEYS.items()}
    ours["rope_base"] = float(ours["rope_base"])
    ours["feature_group"] = _implemented(
        "col_feature_group", ours["feature_group"], "same", FEATURE_GROUPS, "a feature grouping"
    )
    for key in ("col_ssmax", "icl_ssmax"):
        ours[key] = _implemented(key, ours[key], SSMAX_TYPES[1], SSMAX_TYPES, "a scalable softmax")
    for key in ("col_affine", "target_aware", "rope_interleaved"):
        ours[key] = bool(ours[key])
    return TabICLConfig(**ours, standardize=False)


def _split_block(state: dict, src: str, dst: str) -> dict:
    """One official pre-LN block ``src`` (norm1, attn.in_proj, attn.out_proj, norm2,
    linear1, linear2, and v2's attn.ssmax_layer) as our :class:`~tabicl_lite.layers.Block`
    ``dst``."""
    w = state.pop(f"{src}.attn.in_proj_weight")
    b = state.pop(f"{src}.attn.in_proj_bias")
    d = w.shape[1]
    norm_w, norm_b = state.pop(f"{src}.norm1.weight"), state.pop(f"{src}.norm1.bias")
    ssmax = f"{src}.attn.ssmax_layer."  # v2's query scaling: same modules, renamed
    scaling = {
        f"{dst}.attn.ssmax.{key[len(ssmax) :]}": state.pop(key)
        for key in [k for k in state if k.startswith(ssmax)]
    }
    return {
        **scaling,
        f"{dst}.norm_q.weight": norm_w,
        f"{dst}.norm_q.bias": norm_b,
        f"{dst}.norm_kv.weight": norm_w.clone(),
        f"{dst}.norm_kv.bias": norm_b.clone(),
        f"{dst}.attn.q.weight": w[:d],
        f"{dst}.attn.q.bias": b[:d],
        f"{dst}.attn.kv.weight": w[d:],
        f"{dst}.attn.kv.bias": b[d:],
        f"{dst}.attn.out.weight": state.pop(f"{src}.attn.out_proj.weight"),
        f"{dst}.attn.out.bias": state.pop(f"{src}.attn.out_proj.bias"),
        f"{dst}.norm_ff.weight": state.pop(f"{src}.norm2.weight"),
        f"{dst}.norm_ff.bias": state.pop(f"{src}.norm2.bias"),
        f"{dst}.ff.0.weight": state.pop(f"{src}.linear1.weight"),
        f"{dst}.ff.0.bias": state.pop(f"{src}.linear1.bias"),
        f"{dst}.ff.2.weight": state.pop(f"{src}.linear2.weight"),
        f"{dst}.ff.2.bias": state.pop(f"{src}.linear2.bias"),
    }


def convert_state_dict(state: Mapping[str, torch.Tensor], config: TabICLConfig) -> dict:
    """Our state dict for an official ``state_dict`` of the network ``config`` describes.

    Raises
    ------
    ValueError
        A tensor that official network has is missing, a tensor is left over (another
        architecture), or the stored RoPE frequencies differ from ours.
    """
    state = dict(state)
    out: dict[str, torch.Tensor] = {}
    try:
        out["col.inp.weight"] = state.pop("col_embedder.in_linear.weight")
        out["col.inp.bias"] = state.pop("col_embedder.in_linear.bias")
        if config.target_aware:
            out["col.label.weight"] = _label_embedding(state, "col_embedder.y_encoder")
        for i in range(config.col_blocks):
            src, dst = f"col_embedder.tf_col.blocks.{i}", f"col.blocks.{i}"
            out[f"{dst}.inducing"] = state.pop(f"{src}.ind_vectors")
            out.update(_split_block(state, f"{src}.multihead_attn1", f"{dst}.read"))
            out.update(_split_block(state, f"{src}.multihead_attn2", f"{dst}.write"))
        for side in ("w", "b") if config.col_affine else ():
            out[f"col.out_{side}.0.weight"] = state.pop(f"col_embedder.out_{side}.weight")
            out[f"col.out_{side}.0.bias"] = state.pop(f"col_embedder.out_{side}.bias")
            out[f"col.out_{side}.1.weight"] = state.pop(f"col_embedder.ln_{side}.weight")
            out[f"col.out_{side}.1.bias"] = state.pop(f"col_embedder.ln_{side}.bias")
        out["row.cls"] = state.pop("row_interactor.cls_tokens")
        for i in range(config.row_blocks):
            out.update(_split_block(state, f"row_interactor.tf_row.blocks.{i}", f"row.blocks.{i}"))
        out["row.norm.weight"] = state.pop("row_interactor.out_ln.weight")
        out["row.norm.bias"] = state.pop("row_interactor.out_ln.bias")
        freqs = state.pop("row_interactor.tf_row.rope.freqs", None)
        out["icl.label.weight"] = _label_embedding(state, "icl_predictor.y_encoder")
        for i in range(config.icl_blocks):
            out.update(_split_block(state, f"icl_predictor.tf_icl.blocks.{i}", f"icl.blocks.{i}"))
        out["icl.norm.weight"] = state.pop("icl_predictor.ln.weight")
        out["icl.norm.bias"] = state.pop("icl_predictor.ln.bias")
        for j in (0, 2):
            out[f"icl.decoder.{j}.weight"] = state.pop(f"icl_predictor.decoder.{j}.weight")
            out[f"icl.decoder.{j}.bias"] = state.pop(f"icl_predictor.decoder.{j}.bias")
    except KeyError as err:
        raise ValueError(
            f"the official checkpoint has no tensor {err.args[0]!r}: not the TabICL "
            f"v{config.generation} network its config states"
        ) from None
    if state:
        raise ValueError(
            f"the official checkpoint has tensors the TabICL v{config.generation} network its "
            f"config states does not have: {sorted(state)[:8]}"
        )
    if freqs is not None:
        head_dim = config.embed_dim // config.row_heads
        ours = config.rope_base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        if freqs.shape != ours.shape:
            raise ValueError(
                "the official checkpoint's tensors do not match its config: "
                f"row_interactor.tf_row.rope.freqs has shape {tuple(freqs.shape)}, embed_dim="
                f"{config.embed_dim} with row_nhead={config.row_heads} needs {tuple(ours.shape)}"
            )
        # the official stores the RoPE frequencies per head dimension pair, as ours computes
        if not torch.allclose(freqs.double(), ours, rtol=1e-5):
            raise ValueError(
                "the official checkpoint's RoPE frequencies differ from base ** (-2i / d) "
                f"with base={config.rope_base}: {freqs.tolist()[:4]}..."
            )
    return out


def _label_embedding(state: dict, name: str) -> torch.Tensor:
    """The official ``Linear(one_hot(y))`` label encoder ``name`` as an embedding table:
    ``one_hot(c) @ W.T + b = W[:, c] + b``, row ``c``."""
    weight = state.pop(f"{name}.weight")  # (dim, max_classes)
    return weight.T + state.pop(f"{name}.bias")


def read_official_checkpoint(path: str | os.PathLike) -> dict:
    """The ``{"config", "state_dict"}`` dict of an official checkpoint file, read with
    ``torch.load(weights_only=True)`` (no arbitrary unpickling).

    Raises
    ------
    ValueError
        The file is not a torch checkpoint, holds objects other than tensors and plain
        containers, or lacks ``config`` / ``state_dict``; the message names the file.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no official checkpoint file {str(path)!r}")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, zipfile.BadZipFile, OSError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(
            f"{path} is not a readable torch checkpoint of tensors (torch.load with "
            f"weights_only=True refused it: {first})"
        ) from None
    return _check_checkpoint(ckpt, path)


def _check_checkpoint(ckpt, source) -> dict:
    if not isinstance(ckpt, Mapping) or not {"config", "state_dict"} <= set(ckpt):
        keys = sorted(ckpt)[:8] if isinstance(ckpt, Mapping) else type(ckpt).__name__
        raise ValueError(
            f"{source} is not an official TabICL checkpoint: it needs 'config' and "
            f"'state_dict' entries, got {keys}"
        )
    if not isinstance(ckpt["config"], Mapping) or not isinstance(ckpt["state_dict"], Mapping):
        raise ValueError(f"{source}: 'config' and 'state_dict' must be dicts")
    return dict(ckpt)


def from_official_checkpoint(
    checkpoint: str | os.PathLike | Mapping, *, map_location: str | torch.device = "cpu"
) -> TabICL:
    """A :class:`TabICL` with the weights of an official TabICL checkpoint (v1 or v2).

    Parameters
    ----------
    checkpoint : path or dict
        An official ``.ckpt`` file (``tabicl-classifier-v1-20250208.ckpt``,
        ``tabicl-classifier-v1.1-20250506.ckpt`` or ``tabicl-classifier-v2-20260212.ckpt``
        from the ``jingang/TabICL`` hub repository, downloaded by the user) or the dict it
        holds (``config`` + ``state_dict``).
    map_location : str or torch.device
        Where the model lives.

    Returns
    -------
    TabICL
        In eval mode, with ``config.standardize=False`` (``config.generation`` says v1 or
        v2); run it through
        ``TabICLClassifier(model_path=..., preprocessing="official")`` (the default for
        such a model) to get the official classifier's predictions.
    """
    if isinstance(checkpoint, Mapping):
        source = "the checkpoint dict"
        ckpt = _check_checkpoint(checkpoint, source)
    else:
        source = str(checkpoint)
        ckpt = read_official_checkpoint(checkpoint)
    config = config_from_official(ckpt["config"])
    state = convert_state_dict(ckpt["state_dict"], config)
    model = TabICL(config)
    check_state_dict(model, state, source)
    model.load_state_dict(state)
    return model.to(map_location).eval()


def main(argv: list[str] | None = None) -> None:
    """``python -m tabicl_lite.convert IN.ckpt OUT_DIR``."""
    parser = argparse.ArgumentParser(
        prog="python -m tabicl_lite.convert",
        description="Convert an official TabICL checkpoint (v1 or v2) into a tabicl-lite folder "
        "(config.json + model.safetensors).",
    )
    parser.add_argument("checkpoint", help="official .ckpt file")
    parser.add_argument("out_dir", help="folder to write (must not exist, or be a previous save)")
    args = parser.parse_args(argv)
    model = from_official_checkpoint(args.checkpoint)
    model.save_pretrained(args.out_dir)
    print(
        f"wrote {args.out_dir} (TabICL v{model.config.generation}, {model.n_params:,} "
        "parameters, standardize=False)"
    )


if __name__ == "__main__":
    main()
