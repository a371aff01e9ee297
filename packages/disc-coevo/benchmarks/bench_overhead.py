"""What collaboration costs: one training step and one inference pass of DISC against the
main expert alone (the floor) and against feature distillation from the same frozen
auxiliary expert (a common alternative: the auxiliary's pooled feature as an MSE target).

Two random TinyResNets per width (the cost does not depend on training), a batch of 64
single-channel 32x32 images, AdamW, CPU. Run: ``icml25 bench disc-coevo`` (or ``--smoke``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from disc_coevo import Socialized, TinyResNet
from icml25_core import BenchReport, compare, make_report


def _case(widths, batch: int, size: int, repeats: int):
    torch.manual_seed(0)
    x = torch.rand(batch, 1, size, size)
    y = torch.randint(0, 10, (batch,))
    alone = TinyResNet(10, widths=widths)
    disc = Socialized(
        TinyResNet(10, widths=widths), TinyResNet(10, widths=widths), 10, (1, size, size)
    )
    student, teacher = TinyResNet(10, widths=widths), TinyResNet(10, widths=widths).eval()
    opts = {
        "alone": torch.optim.AdamW(alone.parameters(), 1e-3),
        "DISC": torch.optim.AdamW([p for p in disc.parameters() if p.requires_grad], 1e-3),
        "distillation": torch.optim.AdamW(student.parameters(), 1e-3),
    }

    def step(name, loss_fn):
        def run():
            loss = loss_fn()
            opts[name].zero_grad()
            loss.backward()
            opts[name].step()

        return run

    def distill():
        feats = student.features(x)
        with torch.no_grad():
            target = teacher.features(x)["pooled"]
        return F.cross_entropy(student.head(feats["pooled"]), y) + F.mse_loss(
            feats["pooled"], target
        )

    alone.train(), disc.train(), student.train()
    training = compare(
        {
            "main expert alone (train step)": step("alone", lambda: F.cross_entropy(alone(x), y)),
            "DISC (train step)": step("DISC", lambda: disc.loss(x, y)[0]),
            "feature distillation (train step)": step("distillation", distill),
        },
        reference="main expert alone (train step)",
        label=f"train, widths {widths}",
        size=widths[-1],
        repeats=repeats,
    )
    alone.eval(), disc.eval()
    with torch.no_grad():
        inference = compare(
            {
                "main expert alone (inference)": lambda: alone(x),
                "DISC (inference)": lambda: disc(x),
            },
            reference="main expert alone (inference)",
            label=f"inference, widths {widths}",
            size=widths[-1],
            repeats=repeats,
        )
    return [training, inference]


def run(smoke: bool = False) -> BenchReport:
    grid = [(4, 8, 8)] if smoke else [(16, 32, 64), (32, 64, 128), (64, 128, 256)]
    size, repeats = (8, 1) if smoke else (32, 5)
    comparisons = [c for widths in grid for c in _case(widths, 64, size, repeats)]
    notes = [
        f"two random TinyResNets per width, batch 64 of 1x{size}x{size} images, AdamW, CPU",
        "ratio > 1: slower than the main expert alone; DISC adds the auxiliary expert's "
        "forward pass, the stage transforms, two confidence networks and a probe head",
        "feature distillation: CE + MSE to the frozen auxiliary expert's pooled feature",
    ]
    return make_report("disc-coevo overhead", comparisons, "disc-coevo", "torch", notes=notes)


if __name__ == "__main__":
    run().render()
