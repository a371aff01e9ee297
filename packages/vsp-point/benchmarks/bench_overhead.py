"""What the 2-D semantic prompts cost: forward and training-step time and memory of
VSP + HAA against DAPT alone, and against peft's LoRA on the 3-D transformer's fused qkv
with the same number of trainable parameters (the library a user would otherwise pick
for parameter-efficient fine-tuning).

Random weights (no download; cost does not depend on them), CPU, batch 8. The full size is
the paper's 3-D model (Point-MAE: width 384, 12 blocks, 6 heads, 1024 points in 64 patches
of 32) with a ViT-S/16-sized 2-D encoder at 224x224 (12 blocks of width 384; the paper's
ViT-B is twice as wide); the smoke size is tiny.

Run: ``icml25 bench vsp-point`` (or ``--smoke``).
"""

from __future__ import annotations

import torch
import transformers
from torch import nn

from icml25_core import BenchReport, compare, make_report
from vsp_point import PointMAEConfig, PointTransformer, attach


class _LoRAClassifier(nn.Module):
    """peft LoRA on every block's qkv; class token and max-pooled patches into a head."""

    def __init__(self, backbone: PointTransformer, rank: int, num_classes: int) -> None:
        super().__init__()
        from peft import LoraConfig, get_peft_model

        self.body = get_peft_model(backbone, LoraConfig(r=rank, target_modules=["qkv"]))
        c = backbone.config.trans_dim
        self.head = nn.Sequential(nn.Linear(2 * c, 256), nn.ReLU(), nn.Linear(256, num_classes))

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        x = self.body.base_model.model(points)
        return self.head(torch.cat([x[:, 0], x[:, 1:].max(1).values], dim=-1))


def _trainable(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _case(size: str, repeats: int):
    if size == "smoke":
        cfg = PointMAEConfig(
            trans_dim=32, depth=2, num_heads=4, encoder_dims=32, num_group=16, group_size=16
        )
        vit_cfg = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, image_size=32)
        points, batch = 256, 4
    else:
        cfg = PointMAEConfig(num_group=64, group_size=32)
        vit_cfg = dict(hidden_size=384, num_hidden_layers=12, num_attention_heads=6, image_size=224)
        points, batch = 1024, 8
    torch.manual_seed(0)
    vit = transformers.ViTModel(
        transformers.ViTConfig(
            **vit_cfg, intermediate_size=4 * vit_cfg["hidden_size"], patch_size=16
        ),
        add_pooling_layer=False,
    )
    x = torch.randn(batch, points, 3)
    y = torch.randint(0, 15, (batch,))
    dapt = attach(PointTransformer(cfg), num_classes=15, adapter="dapt")
    vsp = attach(PointTransformer(cfg), vit, num_classes=15, adapter="vsp")
    # LoRA rank with the same trainable count as VSP + HAA (head and class token aside)
    haa_counts = vsp.trainable_parameters()
    budget = haa_counts["total"] - haa_counts["head"] - haa_counts["class token"]
    rank = max(1, round(budget / (cfg.depth * 4 * cfg.trans_dim)))
    lora = _LoRAClassifier(PointTransformer(cfg), rank, 15)
    models = {"DAPT": dapt, "VSP + HAA": vsp, f"peft LoRA r={rank} (qkv)": lora}

    def forward(model):
        def run():
            model.eval()
            with torch.no_grad():
                model(x)

        return run

    def step(model):
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)

        def run():
            model.train()
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        return run

    extra = {
        name: {
            "trainable": _trainable(m),
            "adapter params": _trainable(m)
            - sum(p.numel() for p in m.head.parameters() if p.requires_grad),
        }
        for name, m in models.items()
    }
    return [
        compare(
            {name: forward(m) for name, m in models.items()},
            reference="DAPT",
            label=f"forward, {size}",
            repeats=repeats,
            extra=extra,
        ),
        compare(
            {name: step(m) for name, m in models.items()},
            reference="DAPT",
            label=f"training step, {size}",
            repeats=repeats,
            extra=extra,
        ),
    ]


def run(smoke: bool = False) -> BenchReport:
    comparisons = _case("smoke", 1) if smoke else _case("paper", 3)
    notes = [
        "ratio > 1: slower than DAPT alone; VSP + HAA pays for three 2-D ViT passes per cloud",
        "peft LoRA is matched to VSP + HAA's trainable count without head and class token",
        "CPU, batch 8 (smoke: 4), random weights; memory is the resident-set growth",
    ]
    return make_report(
        "vsp-point adapter overhead", comparisons, "vsp-point", "torch", "peft", notes=notes
    )


if __name__ == "__main__":
    run().render()
