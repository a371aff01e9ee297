"""Pretraining TabICL on the SCM prior, with a curriculum over table sizes.

Command line (one process, or data-parallel through ``torchrun``)::

    python -m tabicl_lite.pretrain --out runs/lite --curriculum lite --seed 0
    torchrun --nproc_per_node 2 -m tabicl_lite.pretrain --out runs/lite --curriculum lite
    python -m tabicl_lite.pretrain --out runs/lite --resume      # continue a run

Every step draws a fresh batch of prior tables from ``default_rng([seed, step, rank])``,
so a resumed run sees exactly the batches the uninterrupted run would have seen. The run
folder holds ``checkpoint.pt`` (model, optimizer, step; read back with
``torch.load(weights_only=True)``), ``log.jsonl`` (loss, accuracy, lr, table size per
logged step), and at the end ``model/`` (``config.json`` + ``model.safetensors``, the
format :class:`~tabicl_lite.TabICLClassifier` loads) and ``record.json`` (command, seed,
steps, wall time).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from icml25_core import select_device

from .model import TabICL, TabICLConfig
from .prior import PriorConfig, sample_batch


@dataclass(frozen=True)
class Stage:
    """One curriculum stage.

    Attributes
    ----------
    steps : int
        Optimizer steps in this stage.
    rows : tuple of int
        Log-uniform range of rows per table (training + test).
    features : tuple of int
        Log-uniform range of features per table.
    cells : int
        Budget of ``batch_size * rows * (features + 8)`` per step (sets the batch size).
    lr : float
        Peak learning rate (linear warm-up over 5 % of the stage, cosine to 10 %).
    freeze_embedding : bool
        Freeze the column and row stages (the paper's stage 3).
    max_batch : int
        Upper bound on tables per step.
    """

    steps: int
    rows: tuple[int, int]
    features: tuple[int, int]
    cells: int
    lr: float
    freeze_embedding: bool = False
    max_batch: int = 64


CURRICULA: dict[str, tuple[Stage, ...]] = {
    # the shipped lite model: short tables first, then longer ones with the embedding frozen
    "lite": (
        Stage(steps=10000, rows=(32, 384), features=(2, 64), cells=24_000, lr=1e-3, max_batch=16),
        Stage(steps=600, rows=(384, 1536), features=(2, 64), cells=60_000, lr=2e-4, max_batch=8),
    ),
    # the paper's three stages at v1 size (needs a GPU)
    "paper": (
        Stage(steps=100_000, rows=(64, 1024), features=(2, 100), cells=40_000_000, lr=1e-4),
        Stage(steps=2_000, rows=(1024, 40_000), features=(2, 100), cells=40_000_000, lr=2e-5),
        Stage(
            steps=50,
            rows=(40_000, 60_000),
            features=(2, 100),
            cells=40_000_000,
            lr=2e-6,
            freeze_embedding=True,
        ),
    ),
    # a few tiny steps, for tests
    "smoke": (
        Stage(steps=3, rows=(16, 48), features=(2, 6), cells=4000, lr=1e-3),
        Stage(steps=2, rows=(32, 64), features=(2, 6), cells=4000, lr=1e-4, freeze_embedding=True),
    ),
}

MODEL_SIZES = {"lite": TabICLConfig.lite, "paper": TabICLConfig}


def _log_uniform_int(rng: np.random.Generator, lo: int, hi: int) -> int:
    return round(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def draw_batch(
    stage: Stage, seed: int, step: int, rank: int, max_classes: int, prior: PriorConfig
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """The batch of global step ``step`` on process ``rank`` (a pure function of its args).

    Returns ``X`` (B, T, H), ``y`` (B, T) with -100 for ignored test rows, ``n_classes``
    (B,) and ``n_train``: the first ``n_train`` rows of each table are its training rows.
    """
    rng = np.random.default_rng([seed, step, rank])
    n_rows = _log_uniform_int(rng, *stage.rows)
    n_features = _log_uniform_int(rng, *stage.features)
    n_train = int(n_rows * rng.uniform(0.5, 0.9))
    batch = int(np.clip(stage.cells // (n_rows * (n_features + 8)), 1, stage.max_batch))
    X, y, k = sample_batch(rng, batch, n_rows, n_features, n_train, max_classes, prior)
    return torch.from_numpy(X), torch.from_numpy(y), torch.from_numpy(k), n_train


def _learning_rate(stage: Stage, step_in_stage: int) -> float:
    warm = max(1, stage.steps // 20)
    if step_in_stage < warm:
        return stage.lr * (step_in_stage + 1) / warm
    frac = (step_in_stage - warm) / max(1, stage.steps - warm)
    return stage.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


def _locate(stages: tuple[Stage, ...], step: int) -> tuple[int, int]:
    start = 0
    for i, stage in enumerate(stages):
        if step < start + stage.steps:
            return i, step - start
        start += stage.steps
    return len(stages), 0


def _set_frozen(model: TabICL, frozen: bool) -> None:
    for module in (model.col, model.row):
        for p in module.parameters():
            p.requires_grad_(not frozen)


def pretrain(
    out: str | Path,
    curriculum: str | tuple[Stage, ...] = "lite",
    model_config: TabICLConfig | None = None,
    prior: PriorConfig | None = None,
    seed: int = 0,
    resume: bool = False,
    log_every: int = 50,
    checkpoint_every: int = 500,
    device: str | None = None,
    progress: bool = True,
    command: str | None = None,
    stop_after: int | None = None,
) -> TabICL:
    """Pretrain a :class:`TabICL` on prior tables and save it under ``out``.

    Parameters
    ----------
    out : path
        Run folder (created). With ``resume=True`` it must hold ``checkpoint.pt``.
    curriculum : str or tuple of Stage
        A name in :data:`CURRICULA` or explicit stages.
    model_config : TabICLConfig, optional
        Model sizes (``TabICLConfig.lite()`` by default); ignored on resume, where the
        checkpoint's config is used.
    prior : PriorConfig, optional
    seed : int
        Seeds the model initialisation and every batch.
    resume : bool
        Continue from ``out/checkpoint.pt``; the continued run is identical to an
        uninterrupted one.
    log_every, checkpoint_every : int
        Steps between log lines and between checkpoints.
    device : str, optional
        ``cuda``/``mps``/``cpu``; the best available by default (under ``torchrun`` each
        process takes ``cuda:LOCAL_RANK``).
    progress : bool
        Print a line per log step to stderr (rank 0).
    command : str, optional
        The command line recorded in ``record.json``.
    stop_after : int, optional
        Stop once this many steps are done (a checkpoint is written), e.g. to split a run
        over several jobs; ``resume=True`` continues it.

    Returns
    -------
    TabICL
        The trained model (on CPU, eval mode).
    """
    if isinstance(curriculum, str) and curriculum not in CURRICULA:
        raise ValueError(f"curriculum must be one of {list(CURRICULA)}, got {curriculum!r}")
    stages = CURRICULA[curriculum] if isinstance(curriculum, str) else tuple(curriculum)
    out = Path(out)
    prior = prior or PriorConfig()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1 and not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() and device != "cpu" else "gloo"
        dist.init_process_group(backend)
    if world > 1 and torch.cuda.is_available() and device != "cpu":
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    else:
        dev = select_device(device)

    ckpt_path = out / "checkpoint.pt"
    step, wall_before = 0, 0.0
    if resume:
        if not ckpt_path.is_file():
            raise FileNotFoundError(f"resume=True but {ckpt_path} does not exist")
        state = torch.load(ckpt_path, map_location="cpu", weights_only=True)
        model_config = TabICLConfig(**state["config"])
        step, wall_before = int(state["step"]), float(state["wall_s"])
    else:
        if out.is_dir() and any(out.iterdir()):
            raise FileExistsError(
                f"out {str(out)!r} already holds files (an earlier run?): pass resume=True "
                "(--resume) to continue it, or choose a new folder; nothing was overwritten"
            )
        model_config = model_config or TabICLConfig.lite()
        state = None
        if rank == 0:
            out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    model = TabICL(model_config).to(dev)
    optimizer = torch.optim.AdamW(model.parameters(), lr=stages[0].lr, weight_decay=0.01)
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    total = sum(s.steps for s in stages)
    log_path = out / "log.jsonl"
    if rank == 0 and not resume:
        log_path.write_text("")

    def save_checkpoint(wall: float) -> None:
        if rank != 0:
            return
        tmp = out / "checkpoint.pt.tmp"
        torch.save(
            {
                "model": {k: v.cpu() for k, v in model.state_dict().items()},
                "optimizer": optimizer.state_dict(),
                "step": step,
                "wall_s": wall,
                "config": dataclasses.asdict(model_config),
            },
            tmp,
        )
        tmp.replace(ckpt_path)

    start = time.perf_counter()
    current_stage, wrapped = None, None
    running = []
    end = total if stop_after is None else min(total, stop_after)
    while step < end:
        index, in_stage = _locate(stages, step)
        stage = stages[index]
        if index != current_stage:
            _set_frozen(model, stage.freeze_embedding)
            wrapped = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
            current_stage = index
        lr = _learning_rate(stage, in_stage)
        for group in optimizer.param_groups:
            group["lr"] = lr
        X, y, k, n_train = draw_batch(stage, seed, step, rank, model_config.max_classes, prior)
        X, y, k = X.to(dev), y.to(dev), k.to(dev)
        model.train()
        logits = wrapped(X, y[:, :n_train], n_classes=k)
        target = y[:, n_train:]
        loss = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=-100)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"non-finite loss at step {step}; lower the stage lr")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        step += 1
        with torch.no_grad():
            valid = target >= 0
            acc = ((logits.argmax(-1) == target) & valid).sum() / valid.sum().clamp_min(1)
        running.append((loss.item(), acc.item()))
        if step % log_every == 0 or step == total:
            wall = wall_before + time.perf_counter() - start
            losses, accs = zip(*running, strict=True)
            line = {
                "step": step,
                "stage": index + 1,
                "loss": float(np.mean(losses)),
                "acc": float(np.mean(accs)),
                "lr": lr,
                "rows": int(X.shape[1]),
                "features": int(X.shape[2]),
                "batch": int(X.shape[0]),
                "wall_s": round(wall, 1),
            }
            running = []
            if rank == 0:
                with log_path.open("a") as fh:
                    fh.write(json.dumps(line) + "\n")
                if progress:
                    print(
                        f"step {step}/{total} stage {index + 1} loss {line['loss']:.4f} "
                        f"acc {line['acc']:.3f} lr {lr:.2e} {wall:.0f}s",
                        file=sys.stderr,
                        flush=True,
                    )
        if step % checkpoint_every == 0 or step == end:
            save_checkpoint(wall_before + time.perf_counter() - start)
    wall = wall_before + time.perf_counter() - start
    if rank == 0 and step == total:
        model.eval().cpu().save_pretrained(out / "model", overwrite=True)
        record = {
            "command": command,
            "seed": seed,
            "steps": total,
            "stages": [dataclasses.asdict(s) for s in stages],
            "processes": world,
            "device": str(dev),
            "wall_s": round(wall, 1),
            "n_params": model.n_params,
            "torch": torch.__version__,
        }
        (out / "record.json").write_text(json.dumps(record, indent=2))
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    return model.eval().cpu()


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (``python -m tabicl_lite.pretrain`` / ``tabicl-lite-pretrain``)."""
    parser = argparse.ArgumentParser(
        prog="tabicl-lite-pretrain", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--out", required=True, help="run folder")
    parser.add_argument("--curriculum", default="lite", choices=sorted(CURRICULA))
    parser.add_argument("--size", default="lite", choices=sorted(MODEL_SIZES), help="model size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--checkpoint-every", type=int, default=500)
    parser.add_argument("--device", default=None, help="cuda, mps or cpu (default: best)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--stop-after", type=int, default=None, help="stop after this step")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    pretrain(
        args.out,
        curriculum=args.curriculum,
        model_config=MODEL_SIZES[args.size](),
        seed=args.seed,
        resume=args.resume,
        log_every=args.log_every,
        checkpoint_every=args.checkpoint_every,
        device=args.device,
        stop_after=args.stop_after,
        command=" ".join(["python -m tabicl_lite.pretrain", *(argv or sys.argv[1:])]),
    )


if __name__ == "__main__":
    main()
