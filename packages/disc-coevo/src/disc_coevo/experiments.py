"""The paper's claim at laptop scale: ``two-task-coevolution``.

Two :class:`~disc_coevo.experts.TinyResNet` experts pretrain on half of scikit-learn's
digits: expert A on digit identity (10 classes), expert B on parity (2 classes). The
other half carries a new task, the digit modulo 3, with labels for 10 % of its training
images (:mod:`disc_coevo.data`). Every row starts from fresh copies of the two
pretrained experts and trains on the same labelled images with the same recipe (AdamW,
cosine decay):

- new task, baselines: A alone (fine-tuned with a new head), B alone, A + frozen B with
  concatenated pooled features, A + frozen B with a fixed 0.5/0.5 mean of them;
- new task, DISC ablations: hierarchical collaboration only; full DISC (hierarchical and
  selective collaboration), A main and B auxiliary;
- existing tasks: A keeps learning identity on its own upstream images for a few more
  epochs, alone or with B as DISC auxiliary (its own head kept); B likewise on parity
  with A's help.

Metric: test accuracy. The claim (Socialized Coevolution, ICML 2025): DISC improves the
new task and does not hurt the existing ones. Here it holds when DISC's mean new-task
accuracy is at least the best baseline's and, for both experts, DISC's existing-task
accuracy is within one point of training alone.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch
from torch import nn

from icml25_core import Experiment, Row, Verdict, grouped_bars, mean_metric

from .data import TASKS, digits_split
from .experts import TinyResNet
from .socialized import Socialized
from .training import accuracy, train

PROFILES = {
    "smoke": {"pretrain_epochs": 1, "epochs": 2, "existing_epochs": 1, "widths": (8, 16, 16)},
    "quick": {"pretrain_epochs": 15, "epochs": 60, "existing_epochs": 5, "widths": (16, 32, 64)},
    "full": {"pretrain_epochs": 30, "epochs": 100, "existing_epochs": 10, "widths": (32, 64, 128)},
}
"""Epochs of upstream pretraining, of new-task training and of continued existing-task
training, and the experts' widths."""
INPUT = (1, 8, 8)
NEW, A_TASK, B_TASK = "mod3", "identity", "parity"
BASELINES = ("A alone", "B alone", "concat (A + B)", "fixed 0.5 fusion (A + B)")
ABLATION, DISC = "hierarchical only (A + B)", "DISC (A + B)"
RECIPE = {"batch_size": 32, "lr": 1e-3, "weight_decay": 1e-4}
EXISTING_MARGIN = 0.01


def _pretrain(task: str, X, digits, config, seed) -> TinyResNet:
    fn, k = TASKS[task]
    torch.manual_seed(seed)
    model = TinyResNet(k, widths=config["widths"])
    train(model, X, fn(digits), epochs=config["pretrain_epochs"], seed=seed, **RECIPE)
    return model


def _with_head(expert: TinyResNet, k: int) -> TinyResNet:
    model = copy.deepcopy(expert)
    model.head = nn.Linear(model.head.in_features, k)
    return model


def _new_task_models(a, b, k) -> dict[str, nn.Module]:
    def pair(**kw):
        return Socialized(copy.deepcopy(a), copy.deepcopy(b), k, INPUT, **kw)

    return {
        "A alone": _with_head(a, k),
        "B alone": _with_head(b, k),
        "concat (A + B)": pair(stages=(), fusion="concat"),
        "fixed 0.5 fusion (A + B)": pair(stages=(), fusion="mean"),
        ABLATION: pair(fusion="none"),
        DISC: pair(),
    }


def _run(config: dict[str, Any], seed: int, out_dir: Path) -> list[Row]:
    split = digits_split(seed)
    (x_up, d_up), (x_lab, d_lab), (x_test, d_test) = split.upstream, split.labelled, split.test
    a = _pretrain(A_TASK, x_up, d_up, config, seed)
    b = _pretrain(B_TASK, x_up, d_up, config, seed + 1)
    rows = []
    fn, k = TASKS[NEW]
    for name, model in _new_task_models(a, b, k).items():
        torch.manual_seed(seed)
        train(model, x_lab, fn(d_lab), epochs=config["epochs"], seed=seed, **RECIPE)
        metrics = {"accuracy": accuracy(model, x_test, fn(d_test))}
        if isinstance(model, Socialized) and model.fusion == "disc":
            with torch.no_grad():
                metrics["aux_weight"] = float(model.outputs(x_test)["weights"][:, 1].mean())
        rows.append(Row(name, seed, metrics, {"task": f"{NEW} (new)"}, baseline=name in BASELINES))
    for expert, helper, task in ((a, b, A_TASK), (b, a, B_TASK)):
        fn, k = TASKS[task]
        upstream_acc = accuracy(expert, x_test, fn(d_test))
        alone = copy.deepcopy(expert)
        own = copy.deepcopy(expert)
        pair = Socialized(own, copy.deepcopy(helper), k, INPUT, head=own.head)
        for name, model in ((f"{task}: alone", alone), (f"{task}: DISC", pair)):
            torch.manual_seed(seed)
            train(model, x_up, fn(d_up), epochs=config["existing_epochs"], seed=seed, **RECIPE)
            metrics = {"accuracy": accuracy(model, x_test, fn(d_test)), "before": upstream_acc}
            rows.append(
                Row(name, seed, metrics, {"task": f"{task} (existing)"}, baseline="alone" in name)
            )
    return rows


def _judge(rows: list[Row]) -> Verdict:
    def acc(method: str) -> float:
        return mean_metric(rows, "accuracy", method)

    best = max(BASELINES, key=acc)
    new_ok = acc(DISC) >= acc(best)
    keeps = {t: acc(f"{t}: DISC") >= acc(f"{t}: alone") - EXISTING_MARGIN for t in (A_TASK, B_TASK)}
    held = new_ok and all(keeps.values())
    text = (
        f"{'held' if held else 'did not hold'}: new task ({NEW}, 10 % labels) DISC "
        f"{acc(DISC):.3f} vs best baseline {best} {acc(best):.3f} (A alone {acc('A alone'):.3f}, "
        f"hierarchical only {acc(ABLATION):.3f}); existing tasks with DISC vs alone: "
        f"{A_TASK} {acc(f'{A_TASK}: DISC'):.3f} vs {acc(f'{A_TASK}: alone'):.3f}, {B_TASK} "
        f"{acc(f'{B_TASK}: DISC'):.3f} vs {acc(f'{B_TASK}: alone'):.3f} (holds when DISC >= the best "
        f"baseline on the new task and within {EXISTING_MARGIN:.0%} of alone on both existing ones)"
    )
    return Verdict(held, text)


def _plot(rows: list[Row], out_dir: Path) -> list[Path]:
    new = (*BASELINES, ABLATION, DISC)
    values = {m: [mean_metric(rows, "accuracy", m)] for m in new}
    existing = {
        "alone": [mean_metric(rows, "accuracy", f"{t}: alone") for t in (A_TASK, B_TASK)],
        "DISC": [mean_metric(rows, "accuracy", f"{t}: DISC") for t in (A_TASK, B_TASK)],
    }
    return [
        grouped_bars(
            values,
            [f"{NEW} (new task)"],
            out_dir / "new-task.png",
            ylabel="test accuracy",
            ylim=(0, 1),
        ),
        grouped_bars(
            existing,
            [A_TASK, B_TASK],
            out_dir / "existing-tasks.png",
            ylabel="test accuracy",
            ylim=(0, 1),
        ),
    ]


TWO_TASK_COEVOLUTION = Experiment(
    name="two-task-coevolution",
    claim=(
        "DISC lets an expert learn a new task better with another task's expert than alone, "
        "by concatenation or by a fixed fusion, and keeps both experts' existing tasks"
    ),
    run=_run,
    judge=_judge,
    profiles=PROFILES,
    plot=_plot,
    default_seeds=3,
)
