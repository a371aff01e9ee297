"""Data: captioned synthetic images in several rendering styles (domains), a client
partitioner, and a loader for a user's own image folders per client.

Every image shows one shape (the class) in one colour, drawn in one style; its caption
reads ``"a red circle in sketch style"``. Styles differ the way photo / sketch / cartoon /
painting domains do: textured versus plain backgrounds, filled versus outlined shapes,
flat versus noisy colour, sharp versus blocky rendering.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFilter

SHAPES = ("circle", "square", "triangle", "cross", "star", "ring")
COLOURS = {
    "red": (220, 40, 40),
    "green": (40, 170, 60),
    "blue": (40, 80, 220),
    "yellow": (230, 210, 40),
    "purple": (150, 60, 190),
    "orange": (240, 140, 30),
}
STYLES = ("photo", "sketch", "cartoon", "mosaic")
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def pixel_values(images: torch.Tensor, device: torch.device | str = "cpu") -> torch.Tensor:
    """CLIP's input normalisation of images ``(N, 3, H, W)`` in [0, 1] (already at the
    vision tower's resolution), on ``device``."""
    mean = torch.tensor(CLIP_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(CLIP_STD).view(1, 3, 1, 1)
    return ((images - mean) / std).to(device)


@dataclass
class ImageSet:
    """Images ``(N, 3, H, W)`` float in [0, 1], class indices ``(N,)``, captions, styles."""

    images: torch.Tensor
    labels: torch.Tensor
    captions: list[str]
    styles: list[str]
    classnames: list[str]

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, index) -> ImageSet:
        index = torch.as_tensor(index, dtype=torch.long)
        return ImageSet(
            self.images[index],
            self.labels[index],
            [self.captions[i] for i in index.tolist()],
            [self.styles[i] for i in index.tolist()],
            self.classnames,
        )


def _shape_points(shape: str, cx: float, cy: float, r: float, angle: float):
    if shape == "triangle":
        a = angle + np.array([0, 2, 4]) * np.pi / 3
    elif shape == "square":
        a = angle + np.array([1, 3, 5, 7]) * np.pi / 4
    elif shape == "star":
        a = angle + np.arange(10) * np.pi / 5
        rr = np.where(np.arange(10) % 2 == 0, r, r * 0.45)
        return list(zip(cx + rr * np.cos(a), cy + rr * np.sin(a), strict=True))
    else:
        raise ValueError(shape)
    return list(zip(cx + r * np.cos(a), cy + r * np.sin(a), strict=True))


def _draw(draw: ImageDraw.ImageDraw, shape: str, cx, cy, r, angle, fill, outline, width):
    if shape in ("circle", "ring"):
        box = [cx - r, cy - r, cx + r, cy + r]
        if shape == "ring":
            draw.ellipse(box, fill=None, outline=fill or outline, width=max(2, int(r / 2.5)))
        else:
            draw.ellipse(box, fill=fill, outline=outline, width=width)
    elif shape == "cross":
        t = r / 3
        for box in ([cx - r, cy - t, cx + r, cy + t], [cx - t, cy - r, cx + t, cy + r]):
            draw.rectangle(box, fill=fill, outline=outline, width=width)
    else:
        draw.polygon(
            _shape_points(shape, cx, cy, r, angle), fill=fill, outline=outline, width=width
        )


def render_image(
    shape: str, colour: str, style: str, size: int, rng: np.random.Generator
) -> np.ndarray:
    """One ``(size, size, 3)`` uint8 image."""
    if shape not in SHAPES or colour not in COLOURS or style not in STYLES:
        raise ValueError(f"unknown shape/colour/style {shape!r}/{colour!r}/{style!r}")
    rgb = np.array(COLOURS[colour])
    cx, cy = rng.uniform(0.35, 0.65, 2) * size
    r = rng.uniform(0.18, 0.3) * size
    angle = rng.uniform(0, 2 * np.pi)
    big = size * 4  # draw large, then downsample (anti-aliasing)
    s = 4
    if style == "photo":
        base = rng.uniform(60, 200, 3)
        grad = np.linspace(0.7, 1.3, big)[:, None, None] * base
        bg = np.clip(grad + rng.normal(0, 12, (big, big, 3)), 0, 255).astype(np.uint8)
        img = Image.fromarray(np.broadcast_to(bg, (big, big, 3)).copy())
        fill = tuple(int(v) for v in np.clip(rgb + rng.normal(0, 15, 3), 0, 255))
        _draw(ImageDraw.Draw(img), shape, cx * s, cy * s, r * s, angle, fill, None, 0)
        img = img.filter(ImageFilter.GaussianBlur(2))
    elif style == "sketch":
        img = Image.new("RGB", (big, big), (245, 245, 240))
        ink = tuple(int(v) for v in (rgb * 0.6))
        _draw(ImageDraw.Draw(img), shape, cx * s, cy * s, r * s, angle, None, ink, 5)
    elif style == "cartoon":
        pastel = tuple(int(v) for v in rng.uniform(180, 255, 3))
        img = Image.new("RGB", (big, big), pastel)
        _draw(
            ImageDraw.Draw(img),
            shape,
            cx * s,
            cy * s,
            r * s,
            angle,
            tuple(int(v) for v in rgb),
            (0, 0, 0),
            7,
        )
    else:  # mosaic: blocky, noisy
        img = Image.new("RGB", (big, big), tuple(int(v) for v in rng.uniform(0, 90, 3)))
        _draw(
            ImageDraw.Draw(img),
            shape,
            cx * s,
            cy * s,
            r * s,
            angle,
            tuple(int(v) for v in rgb),
            None,
            0,
        )
        img = img.resize((size // 4, size // 4), Image.BILINEAR).resize((big, big), Image.NEAREST)
    arr = np.asarray(img.resize((size, size), Image.LANCZOS), dtype=np.float64)
    if style == "mosaic":
        arr = arr + rng.normal(0, 20, arr.shape)
    return np.clip(arr, 0, 255).astype(np.uint8)


def synthetic_images(
    n: int,
    size: int = 32,
    styles: Sequence[str] = STYLES,
    shapes: Sequence[str] = SHAPES,
    seed: int = 0,
) -> ImageSet:
    """``n`` images with uniformly drawn shape (the label), colour and style."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    rng = np.random.default_rng(seed)
    colours = list(COLOURS)
    imgs, labels, captions, used = [], [], [], []
    for _ in range(n):
        k = int(rng.integers(len(shapes)))
        colour = colours[int(rng.integers(len(colours)))]
        style = styles[int(rng.integers(len(styles)))]
        imgs.append(render_image(shapes[k], colour, style, size, rng))
        labels.append(k)
        captions.append(f"a {colour} {shapes[k]} in {style} style")
        used.append(style)
    images = torch.from_numpy(np.stack(imgs)).permute(0, 3, 1, 2).float() / 255
    return ImageSet(images, torch.tensor(labels), captions, used, list(shapes))


def caption_words() -> list[str]:
    """Every word a caption or a FedDDA prompt uses (for :func:`feddda.text.word_tokenizer`)."""
    return sorted({"a", "in", "style", "with", "of", *SHAPES, *COLOURS, *STYLES})


def partition(
    data: ImageSet,
    n_clients: int,
    shots: int | None = None,
    alpha: float | None = None,
    by_style: bool = True,
    seed: int = 0,
) -> list[ImageSet]:
    """Split ``data`` over clients.

    ``by_style``: client ``i`` gets only the images of style ``i``
    (``n_clients <= number of styles``). ``alpha``: Dirichlet(alpha) label skew inside each
    client (class proportions drawn per client and kept exactly, up to rounding, by
    taking as many images as the scarcest class relative to its share allows). ``shots``:
    keep at most ``shots`` images per class and client (few-shot).
    """
    rng = np.random.default_rng(seed)
    styles = sorted(set(data.styles), key=list(STYLES).index) if by_style else []
    if by_style and n_clients > len(styles):
        raise ValueError(f"n_clients ({n_clients}) exceeds the number of styles ({len(styles)})")
    idx_all = np.arange(len(data))
    if by_style:
        pools = [idx_all[np.array(data.styles) == s] for s in styles[:n_clients]]
    else:
        pools = np.array_split(rng.permutation(idx_all), n_clients)
    n_cls = len(data.classnames)
    labels = data.labels.numpy()
    clients = []
    for pool in pools:
        keep = []
        take = None
        if alpha is not None:
            # class proportions ~ Dirichlet(alpha), as many images as the rarest needed
            # class allows, so the drawn proportions are kept rather than capped
            props = rng.dirichlet([alpha] * n_cls)
            have = np.bincount(labels[pool], minlength=n_cls)
            total = min(have[c] / props[c] for c in range(n_cls) if props[c] > 0)
            take = np.floor(props * total).astype(int)
        for c in range(n_cls):
            members = rng.permutation(pool[labels[pool] == c])
            if take is not None:
                members = members[: take[c]]
            if shots is not None:
                members = members[:shots]
            keep.extend(members.tolist())
        if not keep:
            raise ValueError("a client received no data; raise n or alpha, or lower n_clients")
        clients.append(data.subset(sorted(keep)))
    return clients


def image_folder(
    root: str | Path, classnames: Sequence[str] | None = None, size: int = 224
) -> ImageSet:
    """Images in ``root/<class name>/*.{png,jpg,jpeg}``, resized to ``size``.

    ``classnames`` fixes the class order (and refuses folders not in it); by default the
    sorted folder names.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder")
    folders = sorted(p for p in root.iterdir() if p.is_dir())
    names = list(classnames) if classnames is not None else [p.name for p in folders]
    unknown = [p.name for p in folders if p.name not in names]
    if unknown:
        raise ValueError(f"folders {unknown} under {root} are not among the class names {names}")
    imgs, labels = [], []
    for p in folders:
        for f in sorted(p.iterdir()):
            if f.suffix.lower() in (".png", ".jpg", ".jpeg"):
                with Image.open(f) as im:
                    imgs.append(np.asarray(im.convert("RGB").resize((size, size), Image.BICUBIC)))
                labels.append(names.index(p.name))
    if not imgs:
        raise ValueError(f"no images found under {root}")
    images = torch.from_numpy(np.stack(imgs)).permute(0, 3, 1, 2).float() / 255
    captions = [f"a {names[k]}" for k in labels]
    return ImageSet(images, torch.tensor(labels), captions, [root.name] * len(labels), names)
