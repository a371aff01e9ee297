"""Head scoring and selection (the paper's Algorithm 1, stage one).

For every head ``(l, j)``, every sample and each of its three prompts (clean, substitution
conflict, coherent conflict), the head's output ``h`` on that prompt is added back scaled
by ``alpha`` (``o_l += alpha h`` at every position) and the probability of the answer's
first sub-token at the last position is compared with the unedited one. The mean change
over ``alpha`` in ``alphas_pos`` (1, 3, 5, 10, 30) is the head's positive score, over
``alphas_neg`` (-1, -2, -5) its negative score. Heads whose positive score is above zero on
every prompt kind form the enhance candidates, ranked by the sum over kinds; those whose
negative score is above zero (removing them helps) the suppress candidates.

The official code runs one forward per head, alpha and prompt; here all heads of a layer
and all alphas of a prompt go through the model as one batch.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from icml25_core import check_choice, check_scalar, write_json_atomic

from .heads import AttentionHeads, Head
from .samples import KINDS, MODE_KINDS, MODES, answer_token_id, check_samples
from .steering import forward


@dataclass(frozen=True)
class Selection:
    """Heads chosen for steering.

    Attributes
    ----------
    enhance : list of (layer, head)
        Adding these heads' outputs raises the target's probability.
    suppress : list of (layer, head)
        Removing these heads' outputs raises it.
    mode : str
        ``"memory"`` or ``"context"``: whose answer was the target.
    """

    enhance: list[Head]
    suppress: list[Head]
    mode: str = "memory"


@dataclass
class HeadScores:
    """Mean changes of answer probabilities when heads are scaled, per head and alpha.

    Attributes
    ----------
    alphas : tuple of float
        The scales tried, ``alphas_pos`` then ``alphas_neg``.
    changes : dict
        ``changes[target][kind]``: array ``(num_layers, num_heads, len(alphas))`` of the
        change in ``P(first sub-token of the target answer)``, averaged over samples;
        ``target`` is ``"memory"`` (the memory answer) or ``"context"``.
    num_samples : int
    """

    alphas: tuple[float, ...]
    changes: dict[str, dict[str, np.ndarray]] = field(repr=False)
    num_samples: int = 0

    @property
    def shape(self) -> tuple[int, int]:
        """``(num_layers, num_heads)``."""
        first = next(iter(next(iter(self.changes.values())).values()))
        return first.shape[0], first.shape[1]

    def _mean(self, target: str, kind: str, positive: bool) -> np.ndarray:
        a = np.asarray(self.alphas)
        cols = a > 0 if positive else a < 0
        if not cols.any():
            raise ValueError(f"no {'positive' if positive else 'negative'} alpha was scored")
        return self.changes[target][kind][..., cols].mean(-1)

    def positive(self, target: str, kind: str) -> np.ndarray:
        """Mean change over the positive alphas, ``(num_layers, num_heads)``."""
        return self._mean(target, kind, True)

    def negative(self, target: str, kind: str) -> np.ndarray:
        """Mean change over the negative alphas, ``(num_layers, num_heads)``."""
        return self._mean(target, kind, False)

    def ablation(self, target: str, kind: str) -> np.ndarray:
        """Change when the head is zero-ablated (``alpha = -1``), ``(num_layers, num_heads)``."""
        if -1.0 not in self.alphas:
            raise ValueError("alpha -1 (zero ablation) was not among the scored alphas")
        return self.changes[target][kind][..., self.alphas.index(-1.0)]

    def save(self, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write the scores as JSON (atomically; an existing file needs ``overwrite=True``)."""
        data = {
            "format": "juice-lm head scores 1",
            "alphas": list(self.alphas),
            "num_samples": self.num_samples,
            "changes": {t: {k: v.tolist() for k, v in d.items()} for t, d in self.changes.items()},
        }
        return write_json_atomic(path, data, overwrite=overwrite)

    @classmethod
    def load(cls, path: str | os.PathLike) -> HeadScores:
        """Read scores written by :meth:`save`; a malformed file is an error naming it."""
        path = Path(path)
        try:
            data = json.loads(path.read_text())
            if data.get("format") != "juice-lm head scores 1":
                raise ValueError("not a juice-lm head-scores file")
            alphas = tuple(float(a) for a in data["alphas"])
            changes = {
                t: {k: np.asarray(v, dtype=float) for k, v in d.items()}
                for t, d in data["changes"].items()
            }
            shapes = {v.shape for d in changes.values() for v in d.values()}
            if len(shapes) != 1 or len(next(iter(shapes))) != 3:
                raise ValueError("the score arrays differ in shape")
            if next(iter(shapes))[2] != len(alphas) or not all(
                np.isfinite(v).all() for d in changes.values() for v in d.values()
            ):
                raise ValueError("the score arrays do not match the alphas or are not finite")
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"cannot read head scores from {path}: {exc}") from exc
        return cls(alphas, changes, int(data.get("num_samples", 0)))


def _check_alphas(alphas, name: str, sign: int) -> tuple[float, ...]:
    alphas = tuple(float(check_scalar(a, name)) for a in alphas)
    if not alphas or any(a * sign <= 0 for a in alphas):
        raise ValueError(f"{name} must be non-empty and all {'> 0' if sign > 0 else '< 0'}")
    return alphas


@torch.no_grad()
def score_heads(
    model,
    tokenizer,
    samples,
    *,
    alphas_pos: Sequence[float] = (1, 3, 5, 10, 30),
    alphas_neg: Sequence[float] = (-1, -2, -5),
    batch_size: int = 64,
) -> HeadScores:
    """Score every attention head by how scaling it moves the answers' probabilities.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM of a supported architecture.
    tokenizer : transformers.PreTrainedTokenizerBase
    samples : sequence of ConflictSample
        The paper uses four.
    alphas_pos, alphas_neg : sequence of float
        Scales whose mean effect gives the positive and the negative score.
    batch_size : int
        Edited forwards per batch (all heads of a layer times all alphas, chunked).

    Returns
    -------
    HeadScores
        Both the memory answer's and the context answer's changes, for every prompt kind.
    """
    samples = check_samples(samples)
    alphas = _check_alphas(alphas_pos, "alphas_pos", 1) + _check_alphas(
        alphas_neg, "alphas_neg", -1
    )
    check_scalar(batch_size, "batch_size", low=1, integer=True)
    heads = AttentionHeads(model)
    L, H, A = heads.num_layers, heads.num_heads, len(alphas)
    device = next(model.parameters()).device
    total = {t: {k: np.zeros((L, H, A)) for k in KINDS} for t in MODES}
    # all (head, alpha) combinations of one layer: row b edits head b // A by alphas[b % A]
    combos = torch.zeros(H * A, H)
    combos[torch.arange(H * A), torch.arange(H * A) // A] = torch.tensor(alphas).repeat(H)
    for sample in samples:
        targets = torch.tensor([answer_token_id(tokenizer, sample.target(m)) for m in MODES])
        for kind in KINDS:
            ids = torch.tensor([tokenizer(sample.prompt(kind)).input_ids], device=device)
            mask = torch.ones_like(ids)
            with heads.capture() as clean:
                logits, _ = forward(model, ids, mask, use_cache=False, last=True)
                base = logits[0, -1].float().softmax(-1)[targets.to(device)]
            for layer in range(L):
                changes = []
                for start in range(0, H * A, batch_size):
                    coef = combos[start : start + batch_size]
                    n = coef.shape[0]
                    source = {layer: clean[layer].expand(n, -1, -1)}
                    with heads.edit({layer: coef}, source=source):
                        logits, _ = forward(
                            model, ids.expand(n, -1), mask.expand(n, -1), use_cache=False, last=True
                        )
                        logits = logits[:, -1].float()
                    changes.append(logits.softmax(-1)[:, targets.to(device)] - base)
                change = torch.cat(changes).view(H, A, len(MODES)).cpu().numpy()
                for i, mode in enumerate(MODES):
                    total[mode][kind][layer] += change[..., i]
    n = len(samples)
    return HeadScores(alphas, {t: {k: v / n for k, v in d.items()} for t, d in total.items()}, n)


def _ranked(per_kind: list[np.ndarray]) -> list[Head]:
    """Heads above zero on every kind, by decreasing sum over kinds (ties: lower index)."""
    stack = np.stack(per_kind)
    ok = (stack > 0).all(0)
    total = stack.sum(0)
    heads = [(int(layer), int(head)) for layer, head in zip(*np.nonzero(ok), strict=True)]
    return sorted(heads, key=lambda h: (-total[h], h))


def select_heads(
    scores: HeadScores, k: int = 5, mode: str = "memory", *, kinds: Sequence[str] | None = None
) -> Selection:
    """The top-``k`` enhance and suppress heads for steering toward ``mode``.

    By default memory mode uses the memory answer on all three prompt kinds (the official
    selection) and context mode the context answer on the two conflict prompts (the clean
    prompt has no context to follow); ``kinds`` overrides which prompts a head must help
    on. Fewer than ``k`` heads are returned where fewer qualify.
    """
    check_scalar(k, "k", low=1, integer=True)
    check_choice(mode, "mode", MODES)
    kinds = (
        MODE_KINDS[mode] if kinds is None else tuple(check_choice(x, "kinds", KINDS) for x in kinds)
    )
    enhance = _ranked([scores.positive(mode, kind) for kind in kinds])[:k]
    suppress = _ranked([scores.negative(mode, kind) for kind in kinds])[:k]
    return Selection(enhance, suppress, mode)


def ablation_ranking(
    scores: HeadScores, mode: str = "memory", *, kinds: Sequence[str] | None = None
) -> list[Head]:
    """Heads whose zero-ablation raises the target's probability on every prompt kind of
    ``mode`` (or of ``kinds``), best first: what :class:`~juice_lm.PH3` prunes."""
    check_choice(mode, "mode", MODES)
    kinds = (
        MODE_KINDS[mode] if kinds is None else tuple(check_choice(x, "kinds", KINDS) for x in kinds)
    )
    return _ranked([scores.ablation(mode, kind) for kind in kinds])
