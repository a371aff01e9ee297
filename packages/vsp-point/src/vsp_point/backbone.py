"""The 3-D backbone: a Point-MAE-style point-cloud transformer, its masked-point
pretraining, and loading of official Point-MAE checkpoints.

A cloud is cut into G patches (farthest point sampling + k nearest neighbours, pure torch:
:mod:`vsp_point.ops`), each patch becomes a token through a mini-PointNet, and a
pre-norm ViT encoder (positions of the patch centres added before every block, as
Point-MAE) mixes them with a class token. Module and parameter names follow the official
Point-MAE code, so a checkpoint's state dict maps onto :class:`PointTransformer` by
stripping prefixes (:func:`convert_point_mae_state_dict`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from icml25_core import check_scalar, check_state_dict
from icml25_core.hub import PretrainedModelMixin

from .ops import chamfer_distance, group_points

__all__ = [
    "Block",
    "PointMAE",
    "PointMAEConfig",
    "PointTransformer",
    "convert_point_mae_state_dict",
]


def _as_model_dtype(points: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Float clouds in the model's dtype (float64 clouds into a float32 model are
    converted explicitly; anything else is left for :func:`check_points` to refuse)."""
    if isinstance(points, torch.Tensor) and points.is_floating_point():
        return points.to(reference.dtype)
    return points


@dataclasses.dataclass
class PointMAEConfig:
    """Sizes of a Point-MAE-style backbone (defaults: the official 22M model).

    Attributes
    ----------
    trans_dim : int
        Token width C.
    depth : int
        Transformer blocks.
    num_heads : int
        Attention heads (``trans_dim`` must divide by it).
    mlp_ratio : float
        FFN hidden width / C.
    encoder_dims : int
        Width of the mini-PointNet output (Point-MAE: equal to ``trans_dim``).
    num_group, group_size : int
        Patches per cloud and points per patch (Point-MAE pretraining: 64 and 32;
        ScanObjectNN fine-tuning: 128 and 32).
    qkv_bias : bool
        Bias of the fused qkv projection (Point-MAE: none).
    pointnet_widths : tuple of int
        Hidden widths (a, b, c) of the mini-PointNet: ``3 -> a -> b``, max-pool and concat
        (2b), ``-> c -> encoder_dims`` (Point-MAE: 128, 256, 512).
    """

    trans_dim: int = 384
    depth: int = 12
    num_heads: int = 6
    mlp_ratio: float = 4.0
    encoder_dims: int = 384
    num_group: int = 64
    group_size: int = 32
    qkv_bias: bool = False
    pointnet_widths: tuple[int, int, int] = (128, 256, 512)

    def __post_init__(self) -> None:
        self.pointnet_widths = tuple(self.pointnet_widths)  # JSON gives a list
        if len(self.pointnet_widths) != 3:
            raise ValueError(f"pointnet_widths must be 3 widths, got {self.pointnet_widths}")
        for w in self.pointnet_widths:
            check_scalar(w, "pointnet_widths", low=1, integer=True)
        for name in ("trans_dim", "depth", "num_heads", "encoder_dims", "num_group", "group_size"):
            check_scalar(getattr(self, name), name, low=1, integer=True)
        check_scalar(self.mlp_ratio, "mlp_ratio", low=0, low_inclusive=False)
        if self.trans_dim % self.num_heads:
            raise ValueError(
                f"trans_dim ({self.trans_dim}) must be divisible by num_heads ({self.num_heads})"
            )


class Encoder(nn.Module):
    """Mini-PointNet: (B, G, M, 3) patches -> (B, G, encoder_dims) tokens (Point-MAE's)."""

    def __init__(self, encoder_channel: int, widths: tuple[int, int, int] = (128, 256, 512)):
        super().__init__()
        a, b, c = widths
        self.encoder_channel = encoder_channel
        self.first_conv = nn.Sequential(
            nn.Conv1d(3, a, 1), nn.BatchNorm1d(a), nn.ReLU(inplace=True), nn.Conv1d(a, b, 1)
        )
        self.second_conv = nn.Sequential(
            nn.Conv1d(2 * b, c, 1),
            nn.BatchNorm1d(c),
            nn.ReLU(inplace=True),
            nn.Conv1d(c, encoder_channel, 1),
        )

    def forward(self, groups: torch.Tensor) -> torch.Tensor:
        b, g, m, _ = groups.shape
        x = self.first_conv(groups.reshape(b * g, m, 3).transpose(2, 1))  # BG 256 M
        pooled = x.max(dim=2, keepdim=True).values
        x = self.second_conv(torch.cat([pooled.expand(-1, -1, m), x], dim=1))
        return x.max(dim=2).values.reshape(b, g, self.encoder_channel)


class Attention(nn.Module):
    """Multi-head self-attention with one fused qkv projection (Point-MAE's layout)."""

    def __init__(self, dim: int, num_heads: int, qkv_bias: bool = False) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, c // self.num_heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(b, n, c))


class Mlp(nn.Module):
    """The block's FFN: fc1 -> GELU -> fc2."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(norm1(x))``, then ``+ mlp(norm2(.))``."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float, qkv_bias: bool) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, num_heads, qkv_bias)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TransformerEncoder(nn.Module):
    """Blocks with the positions re-added before each (Point-MAE's ``blocks.blocks``)."""

    def __init__(self, dim: int, depth: int, num_heads: int, mlp_ratio: float, qkv_bias: bool):
        super().__init__()
        self.blocks = nn.ModuleList(
            [Block(dim, num_heads, mlp_ratio, qkv_bias) for _ in range(depth)]
        )

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x + pos)
        return x


def _init_weights(m: nn.Module) -> None:
    if isinstance(m, nn.Linear | nn.Conv1d):
        nn.init.trunc_normal_(m.weight, std=0.02)
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif isinstance(m, nn.LayerNorm):
        nn.init.ones_(m.weight)
        nn.init.zeros_(m.bias)


class PointTransformer(nn.Module, PretrainedModelMixin):
    """A Point-MAE-style point-cloud transformer (the frozen 3-D backbone).

    Parameters
    ----------
    config : PointMAEConfig

    Notes
    -----
    ``forward(points)`` returns the normed tokens ``(B, 1 + G, C)`` (class token first);
    :meth:`embed` returns what the blocks start from, so an adapter can run the blocks
    itself.
    """

    def __init__(self, config: PointMAEConfig | None = None) -> None:
        super().__init__()
        self.config = config = config if config is not None else PointMAEConfig()
        c = config.trans_dim
        self.encoder = Encoder(config.encoder_dims, config.pointnet_widths)
        self.reduce_dim = (
            nn.Linear(config.encoder_dims, c) if config.encoder_dims != c else nn.Identity()
        )
        self.cls_token = nn.Parameter(torch.zeros(1, 1, c))
        self.cls_pos = nn.Parameter(torch.zeros(1, 1, c))
        self.pos_embed = nn.Sequential(nn.Linear(3, 128), nn.GELU(), nn.Linear(128, c))
        self.blocks = TransformerEncoder(
            c, config.depth, config.num_heads, config.mlp_ratio, config.qkv_bias
        )
        self.norm = nn.LayerNorm(c)
        self.apply(_init_weights)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        nn.init.trunc_normal_(self.cls_pos, std=0.02)

    def embed(self, points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Patch tokens with the class token, and their positions.

        Parameters
        ----------
        points : Tensor, shape (B, N, 3)

        Returns
        -------
        x, pos : Tensor, shape (B, 1 + G, C)
        center : Tensor, shape (B, G, 3)
        """
        cfg = self.config
        points = _as_model_dtype(points, self.cls_token)
        neighborhood, center = group_points(points, cfg.num_group, cfg.group_size)  # checks
        tokens = self.reduce_dim(self.encoder(neighborhood))
        b = points.shape[0]
        x = torch.cat([self.cls_token.expand(b, -1, -1), tokens], dim=1)
        pos = torch.cat([self.cls_pos.expand(b, -1, -1), self.pos_embed(center)], dim=1)
        return x, pos, center

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        x, pos, _ = self.embed(points)
        return self.norm(self.blocks(x, pos))

    @classmethod
    def from_point_mae(
        cls,
        checkpoint: str | Path | dict,
        *,
        num_heads: int = 6,
        num_group: int = 64,
        group_size: int = 32,
        strict: bool = True,
    ) -> PointTransformer:
        """Build from an official Point-MAE (or DAPT / IDPT / ReCon-style) checkpoint.

        Parameters
        ----------
        checkpoint : path or dict
            A ``.pth`` file (read with ``torch.load(weights_only=True)``: no pickle runs) or
            its loaded dict; the weights are under ``base_model`` or ``model`` or at the top.
        num_heads, num_group, group_size : int
            What a state dict cannot tell (the official configs: 6 heads; 64 patches of 32
            points in pretraining).
        strict : bool
            Refuse backbone tensors of unexpected shape or missing blocks. The class token
            and its position, absent from pretraining checkpoints, keep their fresh
            initialisation either way (they are trained downstream).

        Returns
        -------
        PointTransformer
            Sizes inferred from the tensors (width, depth, mini-PointNet width, qkv bias).
        """
        state = convert_point_mae_state_dict(checkpoint)
        width = state["pos_embed.2.weight"].shape[0]
        depth = 1 + max(int(k.split(".")[2]) for k in state if k.startswith("blocks.blocks."))
        config = PointMAEConfig(
            trans_dim=width,
            depth=depth,
            num_heads=num_heads,
            mlp_ratio=state["blocks.blocks.0.mlp.fc1.weight"].shape[0] / width,
            encoder_dims=state["encoder.second_conv.3.weight"].shape[0],
            num_group=num_group,
            group_size=group_size,
            qkv_bias="blocks.blocks.0.attn.qkv.bias" in state,
            pointnet_widths=(
                state["encoder.first_conv.0.weight"].shape[0],
                state["encoder.first_conv.3.weight"].shape[0],
                state["encoder.second_conv.0.weight"].shape[0],
            ),
        )
        model = cls(config)
        source = checkpoint if isinstance(checkpoint, str | Path) else "the checkpoint dict"
        check_state_dict(model, state, source, strict=False)  # shapes and finiteness
        missing, unexpected = model.load_state_dict(state, strict=False)
        optional = {"cls_token", "cls_pos"}
        hard_missing = sorted(set(missing) - optional)
        if strict and (hard_missing or unexpected):
            raise ValueError(
                f"checkpoint does not fit a Point-MAE backbone: missing {hard_missing}, "
                f"unexpected {sorted(unexpected)}"
            )
        return model


# prefixes the official training scripts put before the encoder's names
_PREFIXES = ("module.", "MAE_encoder.", "ACT_encoder.", "transformer_k.", "base_model.")
# parts of a pretraining or fine-tuning checkpoint that are not the encoder
_NOT_ENCODER = (
    "MAE_decoder.",
    "decoder_pos_embed.",
    "mask_token",
    "increase_dim.",
    "cls_head_finetune.",
    "loss_func",
)


def convert_point_mae_state_dict(checkpoint: str | Path | dict) -> dict[str, torch.Tensor]:
    """An official Point-MAE checkpoint's encoder as :class:`PointTransformer` names.

    Strips ``module.`` / ``MAE_encoder.`` / ``base_model.`` (and the ACT / ReCon teacher
    prefixes, as the official ``load_model_from_ckpt``) and drops the decoder, the mask
    token, the reconstruction head and any classification head.

    Parameters
    ----------
    checkpoint : path or dict
        See :meth:`PointTransformer.from_point_mae`.

    Returns
    -------
    dict of str to Tensor
    """
    if isinstance(checkpoint, str | Path):
        path = Path(checkpoint)
        if not path.is_file():
            raise FileNotFoundError(f"checkpoint {str(path)!r} does not exist")
        try:
            checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:  # pickle refused or a corrupt file: name it
            raise ValueError(f"cannot read checkpoint {str(path)!r}: {err}") from err
    if not isinstance(checkpoint, dict):
        raise TypeError(f"checkpoint must be a path or a dict, got {type(checkpoint)}")
    for key in ("base_model", "model", "state_dict"):
        if isinstance(checkpoint.get(key), dict):
            checkpoint = checkpoint[key]
            break
    out: dict[str, torch.Tensor] = {}
    for key, value in checkpoint.items():
        if not isinstance(value, torch.Tensor):
            continue
        name = key
        changed = True
        while changed:
            changed = False
            for prefix in _PREFIXES:
                if name.startswith(prefix):
                    name, changed = name[len(prefix) :], True
        if name.startswith(_NOT_ENCODER):
            continue
        out[name] = value
    if "pos_embed.2.weight" not in out:
        raise ValueError(
            "checkpoint holds no Point-MAE encoder (no 'pos_embed.2.weight' after removing "
            f"the prefixes {list(_PREFIXES)})"
        )
    return out


class PointMAE(nn.Module):
    """Masked point modelling (Point-MAE) around a :class:`PointTransformer`.

    A random ``mask_ratio`` of the patches is hidden; the encoder sees the visible ones,
    a light decoder gets mask tokens at the hidden centres, and a linear head rebuilds
    each hidden patch's ``group_size`` points; the loss is the squared-distance Chamfer
    distance to the true patch (``cdl2``).

    Parameters
    ----------
    config : PointMAEConfig
    mask_ratio : float
        Share of hidden patches (Point-MAE: 0.6).
    decoder_depth, decoder_num_heads : int
        Decoder size (Point-MAE: 4 and 6).

    Notes
    -----
    What pretraining is for is ``self.encoder``; save it with
    ``encoder.save_pretrained(dir)`` (the decoder is discarded, as Point-MAE's fine-tuning
    does).
    """

    def __init__(
        self,
        config: PointMAEConfig | None = None,
        mask_ratio: float = 0.6,
        decoder_depth: int = 4,
        decoder_num_heads: int = 6,
    ) -> None:
        super().__init__()
        self.config = config = config if config is not None else PointMAEConfig()
        check_scalar(
            mask_ratio, "mask_ratio", low=0, high=1, low_inclusive=False, high_inclusive=False
        )
        check_scalar(decoder_depth, "decoder_depth", low=1, integer=True)
        self.mask_ratio = mask_ratio
        c = config.trans_dim
        if c % decoder_num_heads:
            raise ValueError(f"trans_dim ({c}) must be divisible by decoder_num_heads")
        self.encoder = PointTransformer(config)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, c))
        self.decoder_pos_embed = nn.Sequential(nn.Linear(3, 128), nn.GELU(), nn.Linear(128, c))
        self.decoder = TransformerEncoder(c, decoder_depth, decoder_num_heads, 4.0, False)
        self.decoder_norm = nn.LayerNorm(c)
        self.increase_dim = nn.Conv1d(c, 3 * config.group_size, 1)
        for m in (self.decoder_pos_embed, self.decoder, self.decoder_norm, self.increase_dim):
            m.apply(_init_weights)
        nn.init.trunc_normal_(self.mask_token, std=0.02)

    def forward(self, points: torch.Tensor, generator: torch.Generator | None = None):
        """The reconstruction loss of a batch (a scalar tensor)."""
        cfg, enc = self.config, self.encoder
        points = _as_model_dtype(points, enc.cls_token)
        neighborhood, center = group_points(points, cfg.num_group, cfg.group_size)  # checks
        b, g = center.shape[:2]
        n_mask = int(self.mask_ratio * g)
        if not 0 < n_mask < g:
            raise ValueError(
                f"mask_ratio {self.mask_ratio} hides {n_mask} of {g} patches; it must hide "
                "at least one and leave one visible"
            )
        order = torch.rand(b, g, generator=generator, device=points.device).argsort(-1)
        vis_idx, mask_idx = order[:, n_mask:], order[:, :n_mask]

        def take(t, idx):
            return torch.gather(
                t, 1, idx.reshape(b, -1, *([1] * (t.ndim - 2))).expand(-1, -1, *t.shape[2:])
            )

        tokens = enc.reduce_dim(enc.encoder(take(neighborhood, vis_idx)))
        x_vis = enc.norm(enc.blocks(tokens, enc.pos_embed(take(center, vis_idx))))
        pos = self.decoder_pos_embed(torch.cat([take(center, vis_idx), take(center, mask_idx)], 1))
        x = torch.cat([x_vis, self.mask_token.expand(b, n_mask, -1)], dim=1)
        x = self.decoder_norm(self.decoder(x, pos)[:, -n_mask:])
        rebuilt = self.increase_dim(x.transpose(1, 2)).transpose(1, 2)
        rebuilt = rebuilt.reshape(b * n_mask, cfg.group_size, 3)
        target = take(neighborhood, mask_idx).reshape(b * n_mask, cfg.group_size, 3)
        return chamfer_distance(rebuilt, target)
