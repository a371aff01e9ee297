"""The paper's claim at laptop scale: ``fine-grained-alignment``.

A tiny transformers ``CLIPModel`` (ViT 32x32, patch 8, width 64, 2 layers; 32-d
embeddings) is trained contrastively on the shape world's coarse captions ("a photo of a
red object": colour only), so it has no reason to keep the fine attributes (count 1-3,
position left/right, shape). The teacher is :class:`~kuea.synthetic.PixelStatsTeacher`, a
documented oracle that encodes count and position (and colour) through pixel statistics,
but not shape. Each row then fine-tunes the image tower on unlabelled images of the same
world (no captions), from the same CLIP:

- ``CLIP (no alignment)``: the contrastive model as it is (the baseline);
- ``regulariser only``: ``objective="none"`` (what the regulariser alone does);
- ``feature-L2 distillation``: a linear head onto the teacher's features;
- ``KUEA polynomial / gaussian / cosine``: kernel alignment, fitted kernel parameters
  (teacher and student use the same kind of kernel);
- ``KUEA polynomial, learned kernel``: the kernel parameters learned with the tower;
- ``KUEA polynomial, paper weights``: ``w_reg = 1`` as in the paper.

Measured on held-out images: a logistic-regression probe on the frozen embeddings for
count, position (the fine attributes) and shape (the control the teacher does not know),
and zero-shot colour accuracy with the frozen text tower.

The claim (Gong et al., ICML 2025): kernel alignment improves the fine-grained linear probe
while zero-shot accuracy with the frozen text tower is kept. Here it holds when, for
``KUEA polynomial`` (the paper's recommended kernel), the mean fine probe (count and
position) beats the un-aligned CLIP by at least ``MARGIN`` on the seed mean and on every
seed, and its zero-shot accuracy is within ``ZERO_SHOT_TOL`` of the un-aligned model's on
every seed.

Choices for the tiny scale (documented in the README): lr 1e-3 instead of 1e-5, and
``w_reg = 1e-3`` instead of 1 for every row but the last: the regulariser is in absolute
embedding units, and this model's embeddings have squared norm ~60, so at ``w_reg = 1``
the tower barely moves (that row measures it).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np

from icml25_core import Experiment, Row, Verdict, grouped_bars, mean_metric

PROFILES = {
    "smoke": {
        "clip_images": 256,
        "clip_steps": 10,
        "align_images": 128,
        "align_steps": 4,
        "eval_images": 200,
        "batch_size": 32,
        "rows": None,
    },
    "quick": {
        "clip_images": 3000,
        "clip_steps": 300,
        "align_images": 2000,
        "align_steps": 200,
        "eval_images": 2000,
        "batch_size": 64,
        "rows": None,
    },
    "full": {
        "clip_images": 6000,
        "clip_steps": 600,
        "align_images": 4000,
        "align_steps": 1000,
        "eval_images": 4000,
        "batch_size": 64,
        "rows": None,
    },
}
"""Images and steps of the contrastive pretraining and of each alignment, held-out images
(half fit the probes, half test them), alignment batch size, and which of :data:`ROWS` to
run (None: all)."""

LR = 1e-3
W_REG = 1e-3
MARGIN = 0.02
ZERO_SHOT_TOL = 0.02
BASELINE = "CLIP (no alignment)"
MAIN = "KUEA polynomial"
FINE = ("count", "position")
ROWS: dict[str, dict[str, Any]] = {
    "regulariser only": {"objective": "none"},
    "feature-L2 distillation": {"objective": "feature_l2"},
    "KUEA polynomial": {},
    "KUEA gaussian": {"kernel": "gaussian", "teacher_kernel_kind": "gaussian"},
    "KUEA cosine": {"kernel": "cosine", "teacher_kernel_kind": "cosine"},
    "KUEA polynomial, learned kernel": {"learn_kernel_params": True},
    "KUEA polynomial, paper weights": {"w_reg": 1.0},
}
"""The alignment rows: :func:`kuea.align` keyword arguments over the shared settings."""


def _evaluate(model, world, prompts) -> dict[str, float]:
    from .evaluation import image_embeddings, linear_probe, zero_shot_accuracy

    f = image_embeddings(model, world.images)
    half = len(world) // 2
    out = {}
    for attr in (*FINE, "shape"):
        y = getattr(world, attr)
        out[f"probe_{attr}"] = linear_probe(f[:half], y[:half], f[half:], y[half:])
    out["probe_fine"] = float(np.mean([out[f"probe_{a}"] for a in FINE]))
    out["zero_shot"] = zero_shot_accuracy(model, world.images[half:], world.colour[half:], prompts)
    return out


def _run(config: dict[str, Any], seed: int, out_dir: Path) -> list[Row]:
    import torch

    from .alignment import align
    from .synthetic import (
        COLOURS,
        PixelStatsTeacher,
        WordTokenizer,
        make_shapes,
        prompt,
        tiny_clip,
        train_clip,
    )

    base = 1000 * seed
    train = make_shapes(config["clip_images"], seed=base + 1)
    unlabelled = make_shapes(config["align_images"], seed=base + 2)
    held_out = make_shapes(config["eval_images"], seed=base + 3)
    tok = WordTokenizer()
    prompts = tok([prompt(c) for c in range(len(COLOURS))])
    clip = tiny_clip(seed=seed)
    losses = train_clip(clip, train, tok, steps=config["clip_steps"], seed=seed)
    teacher = PixelStatsTeacher().fit(train.images)
    metrics = _evaluate(clip, held_out, prompts)
    rows = [Row(BASELINE, seed, metrics, {}, baseline=True, curves={"clip_loss": losses})]
    names = list(ROWS) if config["rows"] is None else list(config["rows"])
    unknown = set(names) - set(ROWS)
    if unknown:
        raise ValueError(f"rows must name entries of ROWS {list(ROWS)}, got {sorted(unknown)}")
    for name in names:
        kwargs = ROWS[name]
        model = copy.deepcopy(clip)
        settings = {"lr": LR, "w_reg": W_REG, **kwargs}
        torch.manual_seed(seed)
        result = align(
            model,
            teacher,
            unlabelled.images,
            steps=config["align_steps"],
            batch_size=config["batch_size"],
            seed=seed,
            progress=False,
            **settings,
        )
        m = _evaluate(model, held_out, prompts)
        h = result.history
        m["align_start"], m["align_end"], m["reg_end"] = h["align"][0], h["align"][-1], h["reg"][-1]
        if result.kernel is not None:
            m.update({f"kernel_{k}": v for k, v in result.kernel.params().items()})
        curves = {"align": h["align"], "reg": h["reg"]}
        rows.append(Row(name, seed, m, {}, curves=curves))
    return rows


def _judge(rows: list[Row]) -> Verdict:
    seeds = sorted({r.seed for r in rows})

    def value(method, metric, seed=None):
        if seed is None:
            return mean_metric(rows, metric, method)
        (r,) = [r for r in rows if r.method == method and r.seed == seed]
        return r.metrics[metric]

    gain = {s: value(MAIN, "probe_fine", s) - value(BASELINE, "probe_fine", s) for s in seeds}
    drop = {s: value(BASELINE, "zero_shot", s) - value(MAIN, "zero_shot", s) for s in seeds}
    mean_gain = value(MAIN, "probe_fine") - value(BASELINE, "probe_fine")
    probe_ok = mean_gain >= MARGIN and all(g >= MARGIN for g in gain.values())
    zs_ok = all(d <= ZERO_SHOT_TOL for d in drop.values())
    present = {r.method for r in rows}
    methods = [m for m in (BASELINE, *ROWS) if m in present]
    table = "; ".join(
        f"{m}: fine probe {value(m, 'probe_fine'):.3f} (count {value(m, 'probe_count'):.3f}, "
        f"position {value(m, 'probe_position'):.3f}), shape {value(m, 'probe_shape'):.3f}, "
        f"zero-shot {value(m, 'zero_shot'):.3f}"
        for m in methods
    )
    l2 = "feature-L2 distillation"
    vs_l2 = value(MAIN, "probe_fine") - value(l2, "probe_fine") if l2 in present else np.nan
    text = (
        f"{MAIN} vs {BASELINE}: fine probe {mean_gain:+.3f} (seeds "
        f"{'/'.join(f'{g:+.3f}' for g in gain.values())}; needs >= {MARGIN}), zero-shot drop "
        f"{'/'.join(f'{d:+.3f}' for d in drop.values())} (needs <= {ZERO_SHOT_TOL}); "
        f"fine probe vs feature-L2 distillation {vs_l2:+.3f}. " + table
    )
    return Verdict(probe_ok and zs_ok, text)


def _plot(rows: list[Row], out_dir: Path) -> list[Path]:
    present = {r.method for r in rows}
    methods = [m for m in (BASELINE, *ROWS) if m in present]
    metrics = ["probe_count", "probe_position", "probe_shape", "zero_shot"]
    values = {m: [mean_metric(rows, k, m) for k in metrics] for m in methods}
    return [grouped_bars(values, metrics, out_dir / "probes.png", ylabel="accuracy", ylim=(0, 1))]


FINE_GRAINED_ALIGNMENT = Experiment(
    name="fine-grained-alignment",
    claim=(
        "aligning CLIP's image embeddings to a vision-centric teacher's kernel improves the "
        "linear probe on fine attributes the captions never name, while zero-shot accuracy "
        "with the frozen text tower is kept (within 2 points)"
    ),
    run=_run,
    judge=_judge,
    profiles=PROFILES,
    plot=_plot,
    default_seeds=3,
)
