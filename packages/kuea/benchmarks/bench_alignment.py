"""What a KUEA alignment step costs next to the two ways a user would otherwise adapt the
same image tower.

The same transformers ``CLIPModel`` (ViT 64x64, patch 8, width 256, 4 layers: 64 tokens)
and a random ``Dinov2Model`` teacher of the same size, ``steps`` optimizer steps on one
batch size, each run from a fresh copy of the model:

- ``KUEA (polynomial kernel)``: :func:`kuea.align`, fixed kernel parameters;
- ``feature-L2 distillation``: ``align(objective="feature_l2")`` (linear head onto the
  teacher's features; the same frozen copy and teacher forward);
- ``contrastive fine-tuning``: the CLIP loss on image-caption pairs, the image tower
  trained, the text tower frozen (text features under ``no_grad``), AdamW.

Ratios > 1: slower or larger than the reference (contrastive fine-tuning). Peak memory is
the growth of the process's resident set (CPU) or the CUDA allocator's peak.

Run: ``icml25 bench kuea`` (or ``--smoke``).
"""

from __future__ import annotations

import copy

import torch

from icml25_core import BenchReport, compare, make_report
from kuea import align, image_tower, make_shapes, text_embeddings
from kuea.synthetic import WordTokenizer, clip_contrastive_loss


def _models(width: int, layers: int, image: int):
    from transformers import CLIPConfig, CLIPModel, Dinov2Config, Dinov2Model

    common = {
        "hidden_size": width,
        "intermediate_size": 4 * width,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
    }
    tok = WordTokenizer()
    clip = CLIPModel(
        CLIPConfig(
            text_config={
                **common,
                "vocab_size": tok.vocab_size,
                "max_position_embeddings": 16,
                "eos_token_id": tok.EOS,
                "bos_token_id": tok.BOS,
                "pad_token_id": tok.PAD,
            },
            vision_config={**common, "image_size": image, "patch_size": 8},
            projection_dim=width // 2,
        )
    )
    teacher = Dinov2Model(Dinov2Config(**common, image_size=image, patch_size=8)).eval()
    return clip, teacher, tok


def _case(batch: int, steps: int, width: int, layers: int, image: int, repeats: int):
    torch.manual_seed(0)
    clip, teacher, tok = _models(width, layers, image)
    world = make_shapes(batch * steps, size=image, seed=0)
    tokens = tok(world.captions())
    kw = {"steps": steps, "batch_size": batch, "lr": 1e-5, "progress": False, "warmup": 1}

    def kuea():
        align(copy.deepcopy(clip), teacher, world.images, gamma=1e-2, c0=1.0, **kw)

    def distill():
        align(copy.deepcopy(clip), teacher, world.images, objective="feature_l2", **kw)

    def contrastive():
        model = copy.deepcopy(clip)
        params = [*model.vision_model.parameters(), *model.visual_projection.parameters()]
        opt = torch.optim.AdamW(params, lr=1e-5, weight_decay=1e-4)
        for s in range(steps):
            sl = slice(s * batch, (s + 1) * batch)
            with torch.no_grad():
                txt = text_embeddings(model, {k: v[sl] for k, v in tokens.items()}, normalize=False)
            img = image_tower(model).encode(world.images[sl])
            loss = clip_contrastive_loss(img, txt, model.logit_scale.detach())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    return compare(
        {
            "contrastive fine-tuning": contrastive,
            "feature-L2 distillation": distill,
            "KUEA (polynomial kernel)": kuea,
        },
        reference="contrastive fine-tuning",
        label=f"{steps} steps, batch {batch}, ViT {image}px width {width} x {layers} layers",
        size=batch,
        repeats=repeats,
    )


def run(smoke: bool = False) -> BenchReport:
    cases = [(16, 2, 64, 1, 32, 1)] if smoke else [(b, 5, 256, 4, 64, 3) for b in (32, 128)]
    comparisons = [_case(*c) for c in cases]
    notes = [
        "ratio > 1: slower / more memory than contrastive fine-tuning of the same tower",
        "KUEA and feature-L2 include align()'s set-up (a frozen copy of the tower) and a "
        "teacher forward per step; contrastive fine-tuning a frozen text forward per step",
    ]
    return make_report("kuea", comparisons, "kuea", "torch", "transformers", notes=notes)


if __name__ == "__main__":
    run().render()
