"""The paper's claim at laptop scale: JuICE steers a model through knowledge conflicts
better than head pruning (PH3) and running once (JUNE) toward memory (Prop. 5.5), and better
than context-aware decoding toward the context.

Per seed a world and a small Llama-architecture model trained on it: in the quick profile
a :class:`~juice_lm.ToyWorld` (the Section-5 setting: factual recall and induction sharing
the trigger ``is``, with conflicts seen in training labelled either way), in the full
profile a :class:`~juice_lm.FactWorld` (templated natural-language facts about people and
copying from the context, paraphrased prompts). Heads are scored on four conflict
samples with the official alphas (1, 3, 5, 10, 30 and -1, -2, -5); ``k`` enhance and
``k`` suppress heads are kept (a head must help on both conflict prompts: the clean
prompt's memory probability is about 1 in this world, so no head can raise it and the
official all-three-prompts rule would select nothing in memory mode). JuICE and JUNE
tune their alphas and PH3 its ``k`` on validation samples (accuracy, then the target's
probability, as the official code); everything is graded on fresh test samples by the
first generated word. Prompting prepends :data:`~juice_lm.INSTRUCTIONS`; the models here
never saw an instruction, so its row measures what an unread prefix does. Memory mode
grades the clean and both conflict prompts against the memory answer, context mode the
two conflict prompts against the context answer.

Verdict: the mean test accuracy over seeds of JuICE beats PH3 and JUNE in memory mode and
CAD in context mode, each by at least ``MARGIN``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from icml25_core import Experiment, Row, Verdict, grouped_bars, mean_metric

MARGIN = 0.02
SCORE_KINDS = ("substitution", "coherent")
NONE, PROMPT_NAME, PH3_NAME, JUNE_NAME, CAD_NAME, JUICE_NAME = (
    "none",
    "prompting",
    "PH3 (pruning)",
    "JUNE (run once)",
    "CAD",
    "JuICE",
)
ROWS = {
    "memory": (NONE, PROMPT_NAME, PH3_NAME, JUNE_NAME, JUICE_NAME),
    "context": (NONE, PROMPT_NAME, PH3_NAME, JUNE_NAME, CAD_NAME, JUICE_NAME),
}
# the official grids; alphas_minus None: 0..3 toward memory, 0..5 toward the context
_GRID = {"alphas_plus": (0, 1, 2, 3, 4, 5), "alphas_minus": None, "ph3_ks": (1, 3, 5, 7, 9, 15)}
PROFILES = {
    "smoke": {
        # the fact world, so the full profile's path runs in the tests (quick runs the toy)
        "world": {"kind": "facts", "num_subjects": 8, "num_strangers": 8, "max_distractors": 1},
        "model": {"hidden": 32, "layers": 2, "heads": 2},
        "steps": 20,
        "n_score": 2,
        "n_val": 4,
        "n_test": 6,
        "k": 1,
        "alphas_plus": (0, 1),
        "alphas_minus": (0, 1),
        "ph3_ks": (1,),
    },
    "quick": {
        "world": {"kind": "toy", "num_subjects": 48, "num_answers": 16, "num_fillers": 32},
        "model": {"hidden": 64, "layers": 2, "heads": 4},
        "steps": 600,
        "n_score": 4,
        "n_val": 32,
        "n_test": 48,
        "k": 2,
        **_GRID,
    },
    "full": {
        "world": {"kind": "facts", "num_subjects": 64, "num_strangers": 64},
        "model": {"hidden": 64, "layers": 3, "heads": 4},
        "steps": 2000,
        "batch_size": 128,
        "n_score": 4,
        "n_val": 64,
        "n_test": 96,
        "k": 3,
        **_GRID,
    },
}


def _metrics(result: dict, extra: dict | None = None) -> dict:
    out = {"accuracy": result["accuracy"], "target_prob": result["target_prob"]}
    out.update({f"accuracy_{k}": v["accuracy"] for k, v in result["per_kind"].items()})
    out.update(extra or {})
    return out


def _run(cfg, seed, out_dir) -> list[Row]:
    import torch

    from .baselines import CAD, Prompting
    from .facts import FactWorld
    from .scoring import ablation_ranking, score_heads, select_heads
    from .steering import JUNE, PH3, JuICE, evaluate, plain
    from .toy import ToyWorld, toy_model, train_toy

    torch.manual_seed(seed)
    kind, world_args = cfg["world"]["kind"], dict(cfg["world"])
    del world_args["kind"]
    world = {"toy": ToyWorld, "facts": FactWorld}[kind](seed=seed, **world_args)
    model = train_toy(
        world,
        steps=cfg["steps"],
        batch_size=cfg.get("batch_size", 128),
        seed=seed,
        model=toy_model(world, seed=seed, **cfg["model"]),
    )
    tok = world.tokenizer
    scoring = world.samples(cfg["n_score"], seed=10_000 + seed)
    validation = world.samples(cfg["n_val"], seed=20_000 + seed)
    test = world.samples(cfg["n_test"], seed=30_000 + seed)
    # the toy's answers are one word (one token); what follows them is noise
    grade = {"words": 1, "max_new_tokens": 1}
    scores = score_heads(model, tok, scoring)
    # the seed's own file in the run's folder: a resumed seed writes it again
    scores.save(Path(out_dir) / f"head-scores-seed{seed}.json", overwrite=True)
    rows = []
    for mode, names in ROWS.items():
        selection = select_heads(scores, cfg["k"], mode, kinds=SCORE_KINDS)
        methods = {NONE: (plain(model), {}), PROMPT_NAME: (Prompting(model, mode), {})}
        ranking = ablation_ranking(scores, mode, kinds=SCORE_KINDS)
        if ranking:
            ph3, info = PH3.tune(model, tok, ranking, validation, mode, ks=cfg["ph3_ks"], **grade)
            methods[PH3_NAME] = (ph3, {"k": float(info["k"])})
        else:
            methods[PH3_NAME] = (plain(model), {"k": 0.0})  # no head qualifies: nothing pruned
        for name, cls in ((JUNE_NAME, JUNE), (JUICE_NAME, JuICE)):
            steer = cls(model, selection, mode=mode)
            info = steer.tune_alphas(
                tok,
                validation,
                alphas_plus=cfg["alphas_plus"],
                alphas_minus=cfg["alphas_minus"],
                **grade,
            )
            methods[name] = (
                steer,
                {
                    "alpha_plus": info["alpha_plus"],
                    "alpha_minus": info["alpha_minus"],
                    "heads": float(len(selection.enhance) + len(selection.suppress)),
                },
            )
        if CAD_NAME in names:
            methods[CAD_NAME] = (CAD(model), {})
        for name in names:
            method, extra = methods[name]
            result = evaluate(method, tok, test, mode, **grade)
            rows.append(
                Row(
                    name, seed, _metrics(result, extra), {"mode": mode}, baseline=name != JUICE_NAME
                )
            )
    return rows


def _judge(rows: list[Row]) -> Verdict:
    def acc(name, mode):
        return mean_metric(rows, "accuracy", name, mode=mode)

    def wins(name, mode):
        seeds = sorted({r.seed for r in rows})
        own = {
            r.seed: r.metrics["accuracy"]
            for r in rows
            if r.method == JUICE_NAME and r.setting["mode"] == mode
        }
        other = {
            r.seed: r.metrics["accuracy"]
            for r in rows
            if r.method == name and r.setting["mode"] == mode
        }
        return sum(own[s] > other[s] for s in seeds if s in own and s in other), len(seeds)

    checks = [("memory", PH3_NAME), ("memory", JUNE_NAME), ("context", CAD_NAME)]
    held, parts = True, []
    for mode, name in checks:
        mine, theirs = acc(JUICE_NAME, mode), acc(name, mode)
        ok = mine >= theirs + MARGIN
        held &= ok
        won, n = wins(name, mode)
        parts.append(
            f"{mode}: JuICE {mine:.3f} vs {name} {theirs:.3f} ({'beats' if ok else 'does not beat'} "
            f"it by {MARGIN}; better on {won}/{n} seeds)"
        )
    none = {m: acc(NONE, m) for m in ROWS}
    parts.append(f"no intervention: memory {none['memory']:.3f}, context {none['context']:.3f}")
    return Verdict(bool(held), "; ".join(parts))


def _plot(rows: list[Row], out_dir: Path) -> list[Path]:
    names = list(dict.fromkeys(r.method for r in rows))
    modes = list(ROWS)
    values = {
        n: [0.0 if np.isnan(v := mean_metric(rows, "accuracy", n, mode=m)) else v for m in modes]
        for n in names
    }
    return [
        grouped_bars(
            values,
            modes,
            Path(out_dir) / "knowledge_conflict.png",
            ylabel="test accuracy",
            ylim=(0, 1),
        )
    ]


KNOWLEDGE_CONFLICT = Experiment(
    "knowledge-conflict",
    "JuICE beats PH3 and JUNE when steering toward memory and CAD when steering toward the "
    f"context (mean test accuracy over seeds, margin {MARGIN})",
    _run,
    _judge,
    PROFILES,
    plot=_plot,
    default_seeds=3,
)
