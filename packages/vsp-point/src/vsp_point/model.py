"""A frozen point-cloud transformer with trainable adapters: DAPT, VSP + HAA, or a head.

:func:`attach` builds a :class:`PointAdapterModel` around a frozen
:class:`~vsp_point.PointTransformer` (and, for VSP, a frozen 2-D ViT through
:class:`~vsp_point.SemanticPrompter`). It runs the backbone's own blocks, adding per block

- SSF scale/shift after both LayerNorms, on the fused qkv and the attention projection,
  on both FFN layers, on the patch tokens and on the final norm (DAPT's ``tfts``);
- beside the FFN, the adapter output: DAPT's :class:`~vsp_point.DynamicAdapter` on every
  token, or the :class:`~vsp_point.HybridAttentionAdapter` on every token but the class
  token, driven by that layer's semantic prompt;
- DAPT's internal prompt: ``SSF(mean over tokens of GELU(adapter output))`` inserted as a
  new token after the class token (one more token per block).

The head reads the class token, the mean of the internal prompts, the max over patch
tokens and (VSP) the last layer's semantic prompt, through DAPT's MLP head.
Trainable: adapters, SSF, internal-prompt SSF, class token and its position, prompt MLP,
head (:meth:`PointAdapterModel.trainable_parameters`).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from icml25_core import check_choice, check_scalar, check_state_dict
from icml25_core.hub import atomic_directory, recover_directory

from .adapters import SSF, DynamicAdapter, HybridAttentionAdapter
from .backbone import PointTransformer, _as_model_dtype
from .vision import SemanticPrompter

__all__ = ["ADAPTERS", "AdapterConfig", "PointAdapterModel", "attach"]

ADAPTERS = ("vsp", "dapt", "linear")
"""``vsp``: HAA with semantic prompts; ``dapt``: the 3-D baseline; ``linear``: head only."""

_ADAPTER_FILE, _CONFIG_FILE = "adapter.safetensors", "adapter_config.json"


@dataclasses.dataclass
class AdapterConfig:
    """What :func:`attach` adds (see its parameters)."""

    num_classes: int
    adapter: str = "vsp"
    rank: int = 64
    qk_rank: int = 18
    mod_rank: int = 16
    semantic: bool = True
    attention: bool = True
    concat_prompt: bool = True
    internal_prompt: bool = True
    ssf: bool = True
    ssf_init: str = "normal"
    adapter_dropout: float = 0.0
    head_hidden: int = 256
    head_dropout: float = 0.5
    prompt_hidden: int = 128
    tune_position_embedding: bool = False
    image_mean: float = 0.5
    image_std: float = 0.5

    def __post_init__(self) -> None:
        check_scalar(self.num_classes, "num_classes", low=2, integer=True)
        check_choice(self.adapter, "adapter", ADAPTERS)
        check_choice(self.ssf_init, "ssf_init", ("normal", "identity"))
        check_scalar(self.head_hidden, "head_hidden", low=1, integer=True)
        check_scalar(self.head_dropout, "head_dropout", low=0, high=1, high_inclusive=False)

    @property
    def uses_vision(self) -> bool:
        """Whether a 2-D model is needed."""
        vsp = self.adapter == "vsp" and (self.semantic or self.concat_prompt)
        return vsp or (self.adapter == "dapt" and self.concat_prompt)


class _BlockSSF(nn.Module):
    def __init__(self, dim: int, mlp_hidden: int, init: str) -> None:
        super().__init__()
        self.norm1, self.qkv, self.proj = SSF(dim, init), SSF(3 * dim, init), SSF(dim, init)
        self.norm2, self.fc1, self.fc2 = SSF(dim, init), SSF(mlp_hidden, init), SSF(dim, init)


class PointAdapterModel(nn.Module):
    """Frozen backbone(s) + trainable adapters + head; ``forward(points) -> logits``.

    Build it with :func:`attach`.

    Parameters
    ----------
    backbone : PointTransformer
    config : AdapterConfig
    vision_model : transformers vision model, optional
        Needed when ``config.uses_vision``.
    """

    def __init__(
        self, backbone: PointTransformer, config: AdapterConfig, vision_model: nn.Module | None
    ) -> None:
        super().__init__()
        if not isinstance(backbone, PointTransformer):
            raise TypeError(f"model3d must be a vsp_point.PointTransformer, got {type(backbone)}")
        self.config = cfg = config
        self.backbone = backbone.eval().requires_grad_(False)
        # trained downstream, as DAPT; copies, so the user's backbone stays untouched
        self.cls_token = nn.Parameter(backbone.cls_token.detach().clone())
        self.cls_pos = nn.Parameter(backbone.cls_pos.detach().clone())
        c, depth = backbone.config.trans_dim, backbone.config.depth
        mlp_hidden = backbone.blocks.blocks[0].mlp.fc1.out_features
        tuned = cfg.adapter != "linear"
        self.ssf = tuned and cfg.ssf
        self.internal = tuned and cfg.internal_prompt
        if cfg.uses_vision:
            if vision_model is None:
                raise ValueError(
                    f"adapter={cfg.adapter!r} with these options needs model2d (a frozen 2-D "
                    "ViT); pass semantic=False, concat_prompt=False for a 3-D-only model"
                )
            self.prompter: SemanticPrompter | None = SemanticPrompter(
                vision_model,
                depth,
                c,
                hidden=cfg.prompt_hidden,
                image_mean=cfg.image_mean,
                image_std=cfg.image_std,
                tune_position_embedding=cfg.tune_position_embedding,
            )
        else:
            self.prompter = None
        if self.ssf:
            self.block_ssf = nn.ModuleList(
                [_BlockSSF(c, mlp_hidden, cfg.ssf_init) for _ in range(depth)]
            )
            self.token_ssf, self.final_ssf = SSF(c, cfg.ssf_init), SSF(c, cfg.ssf_init)
        if self.internal:
            self.prompt_ssf = nn.ModuleList([SSF(c, cfg.ssf_init) for _ in range(depth)])
        if cfg.adapter == "dapt":
            self.adapters = nn.ModuleList(
                [DynamicAdapter(c, cfg.rank, cfg.adapter_dropout) for _ in range(depth)]
            )
        elif cfg.adapter == "vsp":
            self.adapters = nn.ModuleList(
                [
                    HybridAttentionAdapter(
                        c,
                        c,
                        rank=cfg.rank,
                        qk_rank=cfg.qk_rank,
                        mod_rank=cfg.mod_rank,
                        semantic=cfg.semantic,
                        attention=cfg.attention,
                        dropout=cfg.adapter_dropout,
                    )
                    for _ in range(depth)
                ]
            )
        parts = 2 + int(self.internal) + int(cfg.concat_prompt and self.prompter is not None)
        h = cfg.head_hidden
        self.head = nn.Sequential(
            nn.Linear(parts * c, h),
            nn.BatchNorm1d(h),
            nn.ReLU(inplace=True),
            nn.Dropout(cfg.head_dropout),
            nn.Linear(h, h),
            nn.BatchNorm1d(h),
            nn.ReLU(inplace=True),
            nn.Dropout(cfg.head_dropout),
            nn.Linear(h, cfg.num_classes),
        )

    # -- running ----------------------------------------------------------------------
    def train(self, mode: bool = True) -> PointAdapterModel:
        """Train mode for the trainable parts; the frozen backbones stay in eval mode."""
        super().train(mode)
        self.backbone.eval()
        if self.prompter is not None:
            self.prompter.vision_model.eval()
        return self

    def _attention(self, block, x: torch.Tensor, i: int) -> torch.Tensor:
        attn = block.attn
        b, n, c = x.shape
        qkv = attn.qkv(x)
        if self.ssf:
            qkv = self.block_ssf[i].qkv(qkv)
        q, k, v = qkv.reshape(b, n, 3, attn.num_heads, c // attn.num_heads).permute(2, 0, 3, 1, 4)
        out = attn.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, c))
        return self.block_ssf[i].proj(out) if self.ssf else out

    def _mlp(self, block, x: torch.Tensor, i: int) -> torch.Tensor:
        mlp = block.mlp
        h = mlp.fc1(x)
        if self.ssf:
            h = self.block_ssf[i].fc1(h)
        h = mlp.fc2(mlp.act(h))
        return self.block_ssf[i].fc2(h) if self.ssf else h

    def embed(self, points: torch.Tensor):
        """Tokens, positions and semantic prompts the blocks start from.

        Returns
        -------
        x, pos : Tensor, shape (B, 1 + G, C)
            Class token first (this model's trainable copy), then the patch tokens.
        prompts : Tensor, shape (B, L, C), or None without a 2-D model
        """
        points = _as_model_dtype(points, self.cls_token)
        x, pos, _ = self.backbone.embed(points)
        b = x.shape[0]
        tokens = self.token_ssf(x[:, 1:]) if self.ssf else x[:, 1:]
        x = torch.cat([self.cls_token.expand(b, -1, -1), tokens], dim=1)
        pos = torch.cat([self.cls_pos.expand(b, -1, -1), pos[:, 1:]], dim=1)
        prompts = self.prompter(points) if self.prompter is not None else None
        return x, pos, prompts

    def blocks(
        self, x: torch.Tensor, pos: torch.Tensor, prompts: torch.Tensor | None
    ) -> tuple[torch.Tensor, int]:
        """Run the frozen blocks with the adapters.

        Parameters
        ----------
        x, pos : Tensor, shape (B, 1 + G, C)
        prompts : Tensor, shape (B, L, C), optional

        Returns
        -------
        x : Tensor, shape (B, 1 + I + G, C)
            Class token, the I internal prompts (newest first), patch tokens; normed.
        I : int
        """
        semantic = self.config.adapter == "vsp" and self.config.semantic
        n_internal = 0
        for i, block in enumerate(self.backbone.blocks.blocks):
            if n_internal:  # internal prompts carry no position
                zeros = pos.new_zeros(pos.shape[0], n_internal, pos.shape[2])
                x = x + torch.cat([pos[:, :1], zeros, pos[:, 1:]], dim=1)
            else:
                x = x + pos
            z = block.norm1(x)
            h = x + self._attention(block, self.block_ssf[i].norm1(z) if self.ssf else z, i)
            z = block.norm2(h)
            if self.ssf:
                z = self.block_ssf[i].norm2(z)
            out = h + self._mlp(block, z, i)
            if self.config.adapter == "dapt":
                a = self.adapters[i](z)
                out = out + a
            elif self.config.adapter == "vsp":
                p = prompts[:, i] if semantic else None
                a = self.adapters[i](z[:, 1:], p)
                a = torch.cat([torch.zeros_like(a[:, :1]), a], dim=1)  # none on the class token
                out = out + a
            if self.internal:
                prompt = self.prompt_ssf[i](F.gelu(a).mean(dim=1, keepdim=True))
                out = torch.cat([out[:, :1], prompt, out[:, 1:]], dim=1)
                n_internal += 1
            x = out
        x = self.backbone.norm(x)
        return (self.final_ssf(x) if self.ssf else x), n_internal

    def features(self, points: torch.Tensor) -> torch.Tensor:
        """The head's input ``(B, parts * C)`` for clouds ``(B, N, 3)``: class token,
        mean internal prompt, max over patches, last semantic prompt (where present)."""
        x, pos, prompts = self.embed(points)
        x, n_internal = self.blocks(x, pos, prompts)
        parts = [x[:, 0]]
        if self.internal:
            parts.append(x[:, 1 : 1 + n_internal].mean(dim=1))
        parts.append(x[:, 1 + n_internal :].max(dim=1).values)
        if self.config.concat_prompt and prompts is not None:
            parts.append(prompts[:, -1])
        return torch.cat(parts, dim=-1)

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        """Class logits ``(B, num_classes)`` of clouds ``(B, N, 3)``."""
        return self.head(self.features(points))

    # -- what is trained ----------------------------------------------------------------
    def trainable_parameters(self) -> dict[str, int]:
        """Trainable parameter counts by part, with ``"total"`` and ``"frozen"``."""
        counts: dict[str, int] = {}
        frozen = 0
        for name, p in self.named_parameters():
            if not p.requires_grad:
                frozen += p.numel()
                continue
            part = name.split(".")[0]
            if part in ("cls_token", "cls_pos"):
                part = "class token"
            elif name.startswith("prompter.vision_model."):
                part = "2-D position embedding"
            counts[part] = counts.get(part, 0) + p.numel()
        counts["total"] = sum(counts.values())
        counts["frozen"] = frozen
        return counts

    def trainable_state_dict(self) -> dict[str, torch.Tensor]:
        """Every trainable tensor and the head's BatchNorm statistics (what a checkpoint
        holds; the frozen backbones are saved once, apart)."""
        names = {n for n, p in self.named_parameters() if p.requires_grad}
        return {
            k: v.detach().cpu().contiguous()
            for k, v in self.state_dict().items()
            if k in names or k.startswith("head.")
        }

    def save_adapter(self, path: str | Path, *, overwrite: bool = False) -> Path:
        """Write the trainable weights and the :class:`AdapterConfig` into the folder
        ``path`` atomically (``adapter.safetensors`` + ``adapter_config.json``)."""
        with atomic_directory(
            path, overwrite=overwrite, contents=(_ADAPTER_FILE, _CONFIG_FILE)
        ) as tmp:
            save_file(self.trainable_state_dict(), str(tmp / _ADAPTER_FILE))
            (tmp / _CONFIG_FILE).write_text(json.dumps(dataclasses.asdict(self.config), indent=2))
        return Path(path)

    @classmethod
    def load_adapter(
        cls, path: str | Path, model3d: PointTransformer, model2d: nn.Module | None = None
    ) -> PointAdapterModel:
        """Rebuild a model saved by :meth:`save_adapter` around the same backbones."""
        folder = Path(path)
        recover_directory(folder)
        cfg_file, weights = folder / _CONFIG_FILE, folder / _ADAPTER_FILE
        try:
            config = AdapterConfig(**json.loads(cfg_file.read_text()))
        except (OSError, ValueError, TypeError) as err:
            raise ValueError(f"cannot read adapter config {str(cfg_file)!r}: {err}") from err
        try:
            state = load_file(str(weights))
        except Exception as err:
            raise ValueError(f"cannot read adapter weights {str(weights)!r}: {err}") from err
        model = cls(model3d, config, model2d)
        expected = set(model.trainable_state_dict())
        if set(state) != expected:
            raise ValueError(
                f"adapter weights {str(weights)!r} do not fit these backbones: missing "
                f"{sorted(expected - set(state))}, unexpected {sorted(set(state) - expected)}"
            )
        check_state_dict(model, state, weights, strict=False)  # shapes and finiteness
        model.load_state_dict(state, strict=False)
        return model


def attach(
    model3d: PointTransformer,
    model2d: nn.Module | None = None,
    *,
    num_classes: int,
    adapter: str = "vsp",
    **options,
) -> PointAdapterModel:
    """Freeze the backbones and add trainable adapters and a head.

    Parameters
    ----------
    model3d : PointTransformer
        The 3-D backbone (e.g. :meth:`PointTransformer.from_point_mae`).
    model2d : transformers vision model, optional
        The 2-D ViT (``CLIPVisionModel``, ``Dinov2Model``, ``ViTModel``...), needed for
        ``adapter="vsp"`` and for ``concat_prompt=True``.
    num_classes : int
    adapter : {"vsp", "dapt", "linear"}
        VSP + Hybrid Attention Adapter, DAPT, or a head on frozen features.
    **options
        Fields of :class:`AdapterConfig`: ``rank`` (value / DAPT bottleneck, 64),
        ``qk_rank`` (18), ``mod_rank`` (16), ``semantic`` / ``attention`` (the HAA ablation
        switches), ``concat_prompt`` (the last semantic prompt into the head; default True
        for ``vsp``, False otherwise), ``internal_prompt`` and ``ssf`` (DAPT's parts, kept
        for ``vsp``), ``ssf_init`` ("normal" as DAPT, or "identity"), ``adapter_dropout``,
        ``head_hidden``, ``head_dropout``, ``prompt_hidden``, ``tune_position_embedding``,
        ``image_mean``, ``image_std``.

    Returns
    -------
    PointAdapterModel
        Its :meth:`~PointAdapterModel.trainable_parameters` reports what is trained.
    """
    options.setdefault("concat_prompt", adapter == "vsp")
    fields = {f.name for f in dataclasses.fields(AdapterConfig)} - {"num_classes", "adapter"}
    unknown = sorted(set(options) - fields)
    if unknown:
        raise TypeError(f"attach() got unknown options {unknown}; known: {sorted(fields)}")
    config = AdapterConfig(num_classes=num_classes, adapter=adapter, **options)
    return PointAdapterModel(model3d, config, model2d if config.uses_vision else None)
