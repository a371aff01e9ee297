"""A generated image world with coarse captions and fine attributes, a tiny CLIP for it,
and a teacher that sees the fine attributes: the laptop-scale stand-in for
CLIP (trained on coarse web captions) and DINOv2 (fine-grained visual structure).

Each 32x32 RGB image shows ``count`` (1-3) copies of one ``shape`` (circle, square,
triangle) in one of eight colours (with jitter) inside one half of the
image (``position``: left or right) on a noisy grey background. Captions name the colour
only ("a photo of a red object"), so contrastive training has no reason to keep count,
position or shape; the teacher (:class:`PixelStatsTeacher`) encodes count and position
(and colour), not shape, which is a control: aligning to it should not teach shape.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from icml25_core import check_scalar

from .towers import _embedding

__all__ = [
    "ATTRIBUTES",
    "COLOURS",
    "SHAPES",
    "PixelStatsTeacher",
    "ShapeWorld",
    "WordTokenizer",
    "clip_contrastive_loss",
    "make_shapes",
    "prompt",
    "tiny_clip",
    "train_clip",
]

SHAPES = ("circle", "square", "triangle")
COLOURS = {
    "red": (0.9, 0.15, 0.1),
    "orange": (0.95, 0.55, 0.1),
    "yellow": (0.9, 0.85, 0.1),
    "green": (0.1, 0.8, 0.2),
    "cyan": (0.1, 0.8, 0.85),
    "blue": (0.15, 0.3, 0.95),
    "purple": (0.6, 0.2, 0.85),
    "pink": (0.95, 0.5, 0.75),
}
POSITIONS = ("left", "right")
COUNTS = (1, 2, 3)
COARSE = "colour"
"""The attribute the captions name."""
ATTRIBUTES = ("count", "position", "shape")
"""The fine attributes (what the captions do not say)."""


@dataclass
class ShapeWorld:
    """Generated images (n, 3, size, size), values in [-0.5, 0.5], and their labels.

    Attributes
    ----------
    images : Tensor
    shape, colour, count, position : ndarray of int, shape (n,)
        Class indices (``count`` is 0, 1, 2 for 1, 2, 3 objects).
    """

    images: Tensor
    shape: np.ndarray
    colour: np.ndarray
    count: np.ndarray
    position: np.ndarray

    def __len__(self) -> int:
        return len(self.images)

    def captions(self) -> list[str]:
        """The coarse captions, one per image: "a photo of a <colour> object"."""
        return [prompt(c) for c in self.colour]


def prompt(colour: int) -> str:
    """The caption of colour index ``colour``."""
    return f"a photo of a {list(COLOURS)[colour]} object"


def _mask(kind: int, cy: float, cx: float, r: float, yy: np.ndarray, xx: np.ndarray):
    if kind == 0:
        return (yy - cy) ** 2 + (xx - cx) ** 2 <= r**2
    if kind == 1:
        return (np.abs(yy - cy) <= r * 0.85) & (np.abs(xx - cx) <= r * 0.85)
    # upward triangle: apex at top, base at cy + r
    t = (yy - (cy - r)) / (2 * r)
    return (t >= 0) & (t <= 1) & (np.abs(xx - cx) <= t * r)


def make_shapes(n: int, *, size: int = 32, seed: int = 0, noise: float = 0.06) -> ShapeWorld:
    """``n`` images of the shape world (see the module docstring), reproducible by ``seed``."""
    check_scalar(n, "n", low=1, integer=True)
    check_scalar(size, "size", low=16, integer=True)
    rng = np.random.default_rng(seed)
    shape = rng.integers(len(SHAPES), size=n)
    colour = rng.integers(len(COLOURS), size=n)
    count = rng.integers(len(COUNTS), size=n)
    position = rng.integers(len(POSITIONS), size=n)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    palette = np.array(list(COLOURS.values()))
    images = np.empty((n, 3, size, size), dtype=np.float32)
    r_lo, r_hi = size / 10, size / 7
    for i in range(n):
        img = 0.35 + noise * rng.standard_normal((3, size, size))
        rgb = np.clip(palette[colour[i]] + 0.06 * rng.standard_normal(3), 0, 1)
        x_lo = 0 if position[i] == 0 else size / 2
        placed: list[tuple[float, float]] = []
        for _ in range(COUNTS[count[i]]):
            r = rng.uniform(r_lo, r_hi)
            for _attempt in range(50):  # keep copies apart so the count stays visible
                cy = rng.uniform(r + 1, size - r - 1)
                cx = rng.uniform(x_lo + r + 1, x_lo + size / 2 - r - 1)
                if all((cy - py) ** 2 + (cx - px) ** 2 > (2.2 * r_hi) ** 2 for py, px in placed):
                    break
            placed.append((cy, cx))
            m = _mask(int(shape[i]), cy, cx, r, yy, xx)
            img[:, m] = rgb[:, None]
        images[i] = np.clip(img, 0, 1) - 0.5
    return ShapeWorld(torch.from_numpy(images), shape, colour, count, position)


class WordTokenizer:
    """A word-level tokenizer for the shape world's captions, returning what a
    transformers tokenizer returns (``input_ids``, ``attention_mask``)."""

    WORDS = ("a", "photo", "of", "object", *SHAPES, *COLOURS, *POSITIONS, "one", "two", "three")
    PAD, BOS = 0, 1
    EOS = len(WORDS) + 2
    """The end token has the largest id, as in CLIP's tokenizer (CLIP pools the text at the
    first end token)."""

    def __init__(self, max_length: int = 8) -> None:
        self.vocab = {w: i + 2 for i, w in enumerate(self.WORDS)}
        self.max_length = max_length

    @property
    def vocab_size(self) -> int:
        return self.EOS + 1

    def __call__(self, texts: list[str]) -> dict[str, Tensor]:
        ids = torch.full((len(texts), self.max_length), self.PAD, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, text in enumerate(texts):
            try:
                toks = [self.BOS, *(self.vocab[w] for w in text.lower().split()), self.EOS]
            except KeyError as err:
                raise ValueError(f"unknown word {err.args[0]!r} in {text!r}") from None
            if len(toks) > self.max_length:
                raise ValueError(f"{text!r} is longer than max_length={self.max_length} tokens")
            ids[i, : len(toks)] = torch.tensor(toks)
            mask[i, : len(toks)] = 1
        return {"input_ids": ids, "attention_mask": mask}


def tiny_clip(
    *,
    image_size: int = 32,
    patch_size: int = 8,
    hidden: int = 64,
    layers: int = 2,
    projection_dim: int = 32,
    vocab_size: int | None = None,
    seed: int = 0,
):
    """A small transformers ``CLIPModel`` for the shape world (random initialisation)."""
    from transformers import CLIPConfig, CLIPModel

    vocab = WordTokenizer().vocab_size if vocab_size is None else vocab_size
    common = {
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
    }
    config = CLIPConfig(
        text_config={
            **common,
            "vocab_size": vocab,
            "max_position_embeddings": 16,
            "pad_token_id": WordTokenizer.PAD,
            "bos_token_id": WordTokenizer.BOS,
            "eos_token_id": WordTokenizer.EOS,
        },
        vision_config={**common, "image_size": image_size, "patch_size": patch_size},
        projection_dim=projection_dim,
    )
    torch.manual_seed(seed)
    return CLIPModel(config).eval()


def clip_contrastive_loss(
    image_features: Tensor, text_features: Tensor, logit_scale: Tensor, groups: Tensor | None = None
) -> Tensor:
    """The symmetric CLIP loss of paired (n, d) features. With ``groups`` (n,), pairs with
    the same group id (the same caption) all count as matches (uniform soft targets)."""
    a = torch.nn.functional.normalize(image_features, dim=-1)
    b = torch.nn.functional.normalize(text_features, dim=-1)
    logits = logit_scale.exp() * a @ b.T
    if groups is None:
        target = torch.eye(len(a), device=a.device)
    else:
        target = (groups[:, None] == groups[None, :]).float()
    target = target / target.sum(dim=1, keepdim=True)
    loss_i = -(target * logits.log_softmax(dim=1)).sum(dim=1).mean()
    loss_t = -(target.T * logits.T.log_softmax(dim=1)).sum(dim=1).mean()
    return (loss_i + loss_t) / 2


def train_clip(
    model,
    world: ShapeWorld,
    tokenizer: WordTokenizer,
    *,
    steps: int = 600,
    batch_size: int = 128,
    lr: float = 1e-3,
    seed: int = 0,
) -> list[float]:
    """Contrastive training of both towers on the world's coarse captions (AdamW, cosine);
    images with the same caption all count as matches. Returns the loss per step."""
    g = torch.Generator().manual_seed(seed)
    tokens = tokenizer(world.captions())
    groups = torch.as_tensor(world.colour)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    model.train()
    losses = []
    for _ in range(steps):
        idx = torch.randint(len(world), (batch_size,), generator=g)
        img = _embedding(model.get_image_features(pixel_values=world.images[idx]))
        txt = _embedding(
            model.get_text_features(
                input_ids=tokens["input_ids"][idx], attention_mask=tokens["attention_mask"][idx]
            )
        )
        loss = clip_contrastive_loss(img, txt, model.logit_scale, groups[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


class PixelStatsTeacher(nn.Module):
    """A documented oracle teacher for the shape world: fixed pixel statistics that encode
    the fine attributes (the stand-in for DINOv2's fine-grained features).

    Features per image: the mean colour of each cell of a ``grid`` x ``grid`` partition
    (3 grid^2 values: where the colour is, hence position, colour and roughly count), the
    foreground's mean colour (3) and its area fraction (1), standardized with statistics
    set by :meth:`fit`. No parameters are learned.
    """

    def __init__(self, grid: int = 4, threshold: float = 0.2) -> None:
        super().__init__()
        self.grid, self.threshold = grid, threshold
        dim = 3 * grid * grid + 4
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("std", torch.ones(dim))

    def _raw(self, x: Tensor) -> Tensor:
        cells = torch.nn.functional.adaptive_avg_pool2d(x, self.grid).flatten(1)
        fg = ((x + 0.5 - 0.35).abs().amax(dim=1, keepdim=True) > self.threshold).float()
        area = fg.mean(dim=(1, 2, 3))
        colour = (x * fg).sum(dim=(2, 3)) / fg.sum(dim=(2, 3)).clamp_min(1.0)
        return torch.cat([cells, colour, area[:, None]], dim=1)

    @torch.no_grad()
    def fit(self, images: Tensor) -> PixelStatsTeacher:
        """Set the standardization from ``images`` (n, 3, H, W)."""
        raw = self._raw(images)
        self.mean.copy_(raw.mean(dim=0))
        self.std.copy_(raw.std(dim=0).clamp_min(1e-6))
        return self

    def forward(self, x: Tensor) -> Tensor:
        """Features (n, 3 grid^2 + 4) of images (n, 3, H, W)."""
        return (self._raw(x) - self.mean) / self.std
