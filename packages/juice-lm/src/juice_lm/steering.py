"""Test-time head steering: JuICE (run twice), JUNE (run once) and PH3 (head pruning).

All three add ``sum_j c_j h_j`` to attention output projections (:mod:`juice_lm.heads`).
JuICE takes the head outputs ``h_j`` from a first, clean forward of the same tokens and
adds ``+alpha_plus h_j`` for the enhance set and ``-alpha_minus h_j`` for the suppress set
in a second forward; JUNE scales the heads' own outputs in a single forward (so later
layers see the edit of earlier ones twice over); PH3 zero-ablates (``c = -1``, run once) the
top-k heads. Generation is greedy; each run keeps its own KV cache, which gives the same
tokens as recomputing the whole sequence at every step (the official code's way).
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from icml25_core import check_choice, check_scalar

from .heads import AttentionHeads, Head
from .samples import (
    MODE_KINDS,
    MODES,
    answer_length,
    answer_token_id,
    check_samples,
    compose,
    encode_batch,
    is_correct,
)


@dataclass(frozen=True)
class Completion:
    """Greedy continuations of a batch of prompts.

    Attributes
    ----------
    texts : list of str
        The generated text of each prompt (prompt excluded).
    first_probs : tensor (B, vocab)
        The next-token distribution of the first generated position, after steering.
    """

    texts: list[str]
    first_probs: torch.Tensor


TOKENS_PER_WORD = 3
"""Default tokens generated per graded word: ``words=5`` generates the official
evaluation's 15 tokens."""


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def _positions(mask: torch.Tensor, n: int) -> torch.Tensor:
    """Position ids of the last ``n`` tokens of left-padded rows."""
    return (mask.cumsum(-1) - 1).clamp(min=0)[:, -n:]


def check_left_padded(mask: torch.Tensor, name: str = "attention_mask") -> None:
    """Refuse a mask ``(B, T)`` with padding after a row's tokens (right padding):
    generation appends each new token after the last column, so a right-padded row would
    continue from its padding."""
    late = ((mask.cummax(dim=1).values > 0) & (mask == 0)).any(dim=1)
    rows = late.nonzero().flatten().tolist()
    if rows:
        raise ValueError(
            f"{name} rows {rows[:5]} have padding after their tokens (right padding); "
            "generation needs left padding: set tokenizer.padding_side = 'left' or use "
            "juice_lm.encode_batch"
        )


@functools.cache
def _forward_arguments(cls: type) -> tuple[str, bool]:
    """The KV-cache keyword of ``cls.forward`` and whether it takes ``logits_to_keep``
    (read once per model class, not per step)."""
    params = inspect.signature(cls.forward).parameters
    return ("cache" if "cache" in params else "past_key_values"), "logits_to_keep" in params


def forward(model: nn.Module, ids, mask, cache=None, use_cache: bool = True, last: bool = False):
    """One forward of the new tokens ``ids`` (B, n) of left-padded rows with attention
    ``mask`` (B, past + n) -> ``(logits (B, n, vocab), cache)``; with ``last=True`` only
    the last position's logits ``(B, 1, vocab)`` are computed (``logits_to_keep=1``, where
    the model takes it: a prefill over a large vocabulary otherwise materialises
    ``B x n x vocab`` logits).

    transformers 5 names the KV cache ``cache`` (``past_key_values`` before).
    """
    name, keeps = _forward_arguments(type(model))
    extra = {"logits_to_keep": 1} if last and keeps else {}
    out = model(
        ids,
        attention_mask=mask,
        position_ids=_positions(mask, ids.shape[1]),
        use_cache=use_cache,
        **{name: cache},
        **extra,
    )
    if not use_cache:
        return out.logits, None
    # read "past_key_values" only when "cache" is absent: transformers 5 warns on reading it
    return out.logits, out["cache"] if "cache" in out else out.get("past_key_values")


class HeadSteering:
    """A causal LM whose attention heads are re-weighted at test time.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM of a supported architecture (:data:`juice_lm.heads.ADAPTERS`).
    coefficients : mapping of (layer, head) to float
        ``c_j`` of each edited head; empty for the unmodified model.
    runs : {1, 2}
        2: head outputs come from a clean first forward (JuICE); 1: from the steered
        forward itself (JUNE, pruning).
    """

    def __init__(self, model: nn.Module, coefficients: Mapping[Head, float], *, runs: int = 2):
        if runs not in (1, 2):
            raise ValueError(f"runs must be 1 or 2, got {runs!r}")
        self.model = model
        self.heads = AttentionHeads(model)
        self.runs = runs
        self.coefficients = dict(
            zip(self.heads.check_heads(coefficients), coefficients.values(), strict=True)
        )
        self._coefs = self.heads.coefficient_tensors(self.coefficients)

    # -- forwards ----------------------------------------------------------------------------
    def _step(self, ids, mask, caches, use_cache: bool, last: bool = False):
        """One steered forward of ``ids`` (the new tokens) -> logits (of the last position
        only with ``last=True``) and updated caches."""
        if not self._coefs:
            logits, cache = forward(self.model, ids, mask, caches[0], use_cache, last)
            return logits, (cache, None)
        if self.runs == 1:
            with self.heads.edit(self._coefs):
                logits, cache = forward(self.model, ids, mask, caches[0], use_cache, last)
            return logits, (cache, None)
        with self.heads.capture(self._coefs) as clean:
            _, first = forward(self.model, ids, mask, caches[0], use_cache, last=True)
        with self.heads.edit(self._coefs, source=clean):
            logits, second = forward(self.model, ids, mask, caches[1], use_cache, last)
        return logits, (first, second)

    @torch.no_grad()
    def logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None):
        """Steered logits of every position.

        Parameters
        ----------
        input_ids : tensor (B, T)
        attention_mask : tensor (B, T), optional
            1 for tokens, 0 for (left) padding.

        Returns
        -------
        tensor (B, T, vocab)
        """
        ids, mask = self._inputs(input_ids, attention_mask)
        return self._step(ids, mask, (None, None), use_cache=False)[0]

    def _inputs(self, input_ids, attention_mask):
        if (
            not isinstance(input_ids, torch.Tensor)
            or input_ids.dim() != 2
            or input_ids.numel() == 0
        ):
            raise ValueError("input_ids must be a non-empty (batch, length) tensor of token ids")
        if input_ids.is_floating_point() or input_ids.is_complex() or input_ids.dtype == torch.bool:
            raise TypeError(f"input_ids must be integer token ids, got dtype {input_ids.dtype}")
        vocab = self.model.get_input_embeddings().num_embeddings
        low, high = int(input_ids.min()), int(input_ids.max())
        if low < 0 or high >= vocab:
            raise ValueError(
                f"input_ids must lie in [0, {vocab}) (the model's vocabulary), got {low}..{high}"
            )
        device = _device(self.model)
        ids = input_ids.to(device)
        mask = torch.ones_like(ids) if attention_mask is None else attention_mask.to(device)
        if mask.shape != ids.shape:
            raise ValueError(
                f"attention_mask has shape {tuple(mask.shape)}, input_ids {tuple(ids.shape)}"
            )
        if not bool(((mask == 0) | (mask == 1)).all()):
            raise ValueError("attention_mask must hold 0 (padding) and 1 (token) only")
        empty = (mask.sum(dim=1) == 0).nonzero().flatten().tolist()
        if empty:
            raise ValueError(
                f"attention_mask rows {empty[:5]} are all zeros: every prompt needs a token"
            )
        return ids, mask.long()

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        *,
        max_new_tokens: int = 16,
        use_cache: bool = True,
        eos_token_id: int | None = None,
        return_first_logits: bool = False,
    ):
        """Greedy steered generation.

        Parameters
        ----------
        input_ids : tensor (B, T)
            Left-padded prompts.
        attention_mask : tensor (B, T), optional
            1 for tokens, 0 for padding, which must come before a row's tokens (a
            right-padded mask is refused: the continuation would follow the padding).
        max_new_tokens : int
        use_cache : bool
            Keep one KV cache per run (``True``) or recompute the whole sequence twice per
            step (``False``, the official code's way; same tokens, slower).
        eos_token_id : int, optional
            Rows that produced it continue with it (and generation stops once all have).
        return_first_logits : bool
            Also return the steered logits of the first new position, ``(B, vocab)``.

        Returns
        -------
        tensor (B, T + new)
            Prompts and continuations (and the first logits when asked).
        """
        check_scalar(max_new_tokens, "max_new_tokens", low=1, integer=True)
        ids, mask = self._inputs(input_ids, attention_mask)
        check_left_padded(mask)
        caches = (None, None)
        step_ids = ids
        done = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)
        first = None
        for _ in range(max_new_tokens):
            if use_cache:
                logits, caches = self._step(step_ids, mask, caches, use_cache=True, last=True)
            else:
                logits, _ = self._step(ids, mask, (None, None), use_cache=False, last=True)
            last = logits[:, -1]
            if first is None:
                first = last.float()
            nxt = last.argmax(-1)
            if eos_token_id is not None:
                nxt = torch.where(done, torch.full_like(nxt, eos_token_id), nxt)
                done |= nxt == eos_token_id
            ids = torch.cat([ids, nxt[:, None]], dim=1)
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            step_ids = nxt[:, None]
            if eos_token_id is not None and bool(done.all()):
                break
        return (ids, first) if return_first_logits else ids

    def complete(
        self, tokenizer, contexts: Sequence[str], questions: Sequence[str], max_new_tokens: int
    ) -> Completion:
        """Greedy continuations of ``compose(context, question)`` for a batch."""
        prompts = [compose(c, q) for c, q in zip(contexts, questions, strict=True)]
        ids, mask = encode_batch(tokenizer, prompts, _device(self.model))
        out, first = self.generate(
            ids,
            mask,
            max_new_tokens=max_new_tokens,
            eos_token_id=tokenizer.eos_token_id,
            return_first_logits=True,
        )
        texts = tokenizer.batch_decode(out[:, ids.shape[1] :], skip_special_tokens=True)
        return Completion(texts, first.softmax(-1))


def plain(model: nn.Module) -> HeadSteering:
    """The unmodified model behind the same interface (the "no intervention" row)."""
    return HeadSteering(model, {}, runs=1)


def evaluate(
    method,
    tokenizer,
    samples,
    mode: str = "memory",
    *,
    kinds: Sequence[str] | None = None,
    batch_size: int = 32,
    max_new_tokens: int | None = None,
    words: int = 5,
) -> dict:
    """Accuracy of following ``mode``'s answer, and its first-token probability.

    Parameters
    ----------
    method : object with ``complete(tokenizer, contexts, questions, max_new_tokens)``
        A :class:`HeadSteering` (JuICE, JUNE, PH3, :func:`plain`) or :class:`~juice_lm.CAD`.
    samples : sequence of ConflictSample
    mode : {"memory", "context"}
        Which answer counts as correct.
    kinds : sequence of str, optional
        Prompt kinds to grade; default all three for memory, the two conflicts for context.
    max_new_tokens : int, optional
        Tokens generated per prompt; default :data:`TOKENS_PER_WORD` per graded word (15
        for the default five words, the official budget), or the longest answer's token
        count where that is more. The answer must appear within the first ``words`` words
        (:func:`~juice_lm.is_correct`), and a model that opens with a few words ("Hmm,
        it's the beautiful Paris.") needs the tokens to reach it.
    words : int
        How many generated words grading looks at (5, as the official code).

    Returns
    -------
    dict
        ``accuracy`` and ``target_prob`` (means over kinds and samples) and ``per_kind``:
        ``{kind: {"accuracy", "target_prob"}}``.
    """
    check_choice(mode, "mode", MODES)
    check_scalar(words, "words", low=1, integer=True)
    check_scalar(batch_size, "batch_size", low=1, integer=True)
    if max_new_tokens is not None:
        check_scalar(max_new_tokens, "max_new_tokens", low=1, integer=True)
    samples = check_samples(samples)
    kinds = tuple(kinds) if kinds is not None else MODE_KINDS[mode]
    targets = [s.target(mode) for s in samples]
    if max_new_tokens is None:
        longest = max(answer_length(tokenizer, t) for t in targets)
        max_new_tokens = max(TOKENS_PER_WORD * words, longest)
    token_ids = torch.tensor([answer_token_id(tokenizer, t) for t in targets])
    per_kind = {}
    for kind in kinds:
        correct, probs = [], []
        for start in range(0, len(samples), batch_size):
            chunk = samples[start : start + batch_size]
            done = method.complete(
                tokenizer,
                [s.context(kind) for s in chunk],
                [s.question for s in chunk],
                max_new_tokens,
            )
            tid = token_ids[start : start + len(chunk)].to(done.first_probs.device)
            probs += done.first_probs.gather(1, tid[:, None])[:, 0].tolist()
            correct += [
                is_correct(t, s.target(mode), words) for t, s in zip(done.texts, chunk, strict=True)
            ]
        per_kind[kind] = {"accuracy": float(np.mean(correct)), "target_prob": float(np.mean(probs))}
    return {
        "accuracy": float(np.mean([v["accuracy"] for v in per_kind.values()])),
        "target_prob": float(np.mean([v["target_prob"] for v in per_kind.values()])),
        "per_kind": per_kind,
    }


def _best(candidates, score):
    """The candidate with the lexicographically largest ``(accuracy, target_prob)``; the
    first one on a tie (as Python's ``max``)."""
    results = [(c, score(c)) for c in candidates]
    best = max(results, key=lambda r: (r[1]["accuracy"], r[1]["target_prob"]))
    return best, results


class JuICE(HeadSteering):
    """Just Run Twice: steer a causal LM toward its memory or its context.

    Parameters
    ----------
    model : transformers.PreTrainedModel
    heads : Selection or (enhance, suppress)
        From :func:`~juice_lm.select_heads`: heads that raise the target's probability
        when added (enhance) and when removed (suppress).
    alpha_plus, alpha_minus : float
        Weights of the enhance (``+alpha_plus h``) and suppress (``-alpha_minus h``) edits.
        A head in both sets gets ``alpha_plus - alpha_minus`` once (the official code
        applies ``-alpha_minus`` to it twice).
    mode : {"memory", "context"}, optional
        What the heads were selected for; :meth:`tune_alphas` grades toward it. Default:
        the :class:`~juice_lm.Selection`'s own ``mode``, or ``"memory"`` for a plain
        ``(enhance, suppress)`` pair.
    runs : {1, 2}
        2 is JuICE; 1 is the paper's JUNE ablation (:class:`JUNE`).
    """

    def __init__(
        self,
        model: nn.Module,
        heads,
        alpha_plus: float = 1.0,
        alpha_minus: float = 1.0,
        *,
        mode: str | None = None,
        runs: int = 2,
    ):
        if mode is None:
            mode = getattr(heads, "mode", "memory")
        check_choice(mode, "mode", MODES)
        enhance, suppress = (heads.enhance, heads.suppress) if hasattr(heads, "enhance") else heads
        probe = AttentionHeads(model)
        self.enhance = probe.check_heads(enhance, "enhance")
        self.suppress = probe.check_heads(suppress, "suppress")
        self.mode = mode
        self.alpha_plus = float(check_scalar(alpha_plus, "alpha_plus", low=0.0))
        self.alpha_minus = float(check_scalar(alpha_minus, "alpha_minus", low=0.0))
        if not self.enhance and not self.suppress:
            warnings.warn(
                f"{type(self).__name__} has no heads to steer (empty enhance and suppress: "
                "select_heads found no head that helps or hurts on the scoring samples); it "
                "behaves exactly as the unmodified model; score more samples or other prompt "
                "kinds",
                UserWarning,
                stacklevel=2,
            )
        super().__init__(model, self._coefficients(), runs=runs)

    def _coefficients(self) -> dict[Head, float]:
        coefs: dict[Head, float] = {}
        for h in dict.fromkeys(self.enhance):
            coefs[h] = coefs.get(h, 0.0) + self.alpha_plus
        for h in dict.fromkeys(self.suppress):
            coefs[h] = coefs.get(h, 0.0) - self.alpha_minus
        return coefs

    def set_alphas(self, alpha_plus: float, alpha_minus: float) -> JuICE:
        """Change the edit weights in place; returns ``self``."""
        self.alpha_plus = float(check_scalar(alpha_plus, "alpha_plus", low=0.0))
        self.alpha_minus = float(check_scalar(alpha_minus, "alpha_minus", low=0.0))
        self.coefficients = self._coefficients()
        self._coefs = self.heads.coefficient_tensors(self.coefficients)
        return self

    def tune_alphas(
        self,
        tokenizer,
        validation,
        *,
        alphas_plus: Sequence[float] = (0, 1, 2, 3, 4, 5),
        alphas_minus: Sequence[float] | None = None,
        **grading,
    ) -> dict:
        """Pick ``(alpha_plus, alpha_minus)`` on ``validation`` and keep them.

        The grid is the official one (``alpha_plus`` in 0..5, ``alpha_minus`` in 0..3 for
        memory and 0..5 for context); the best pair maximises accuracy, then the target's
        first-token probability, as the official code. ``grading`` goes to
        :func:`evaluate` (``words``, ``max_new_tokens``, ``batch_size``).

        Returns
        -------
        dict
            ``alpha_plus``, ``alpha_minus``, the chosen pair's validation ``accuracy`` and
            ``target_prob``, and ``grid``: every pair's scores.
        """
        validation = check_samples(validation, "validation")
        if alphas_minus is None:
            alphas_minus = (0, 1, 2, 3) if self.mode == "memory" else (0, 1, 2, 3, 4, 5)
        pairs = [(float(s), float(p)) for s in alphas_minus for p in alphas_plus]

        def score(pair):
            self.set_alphas(pair[1], pair[0])
            return evaluate(self, tokenizer, validation, self.mode, **grading)

        (best, scores), results = _best(pairs, score)
        self.set_alphas(best[1], best[0])
        return {
            "alpha_plus": best[1],
            "alpha_minus": best[0],
            "accuracy": scores["accuracy"],
            "target_prob": scores["target_prob"],
            "grid": [
                {
                    "alpha_plus": p[1],
                    "alpha_minus": p[0],
                    **{k: s[k] for k in ("accuracy", "target_prob")},
                }
                for p, s in results
            ],
        }


class JUNE(JuICE):
    """JuICE's run-once ablation: the same heads and weights applied in one forward."""

    def __init__(self, model, heads, alpha_plus=1.0, alpha_minus=1.0, *, mode=None):
        super().__init__(model, heads, alpha_plus, alpha_minus, mode=mode, runs=1)


class PH3(HeadSteering):
    """Head pruning (Jin et al., 2024): zero-ablate ``heads`` in a single forward."""

    def __init__(self, model: nn.Module, heads: Sequence[Head]):
        super().__init__(model, dict.fromkeys((tuple(h) for h in heads), -1.0), runs=1)
        self.pruned = list(self.coefficients)

    @classmethod
    def tune(
        cls,
        model,
        tokenizer,
        ranking: Sequence[Head],
        validation,
        mode: str = "memory",
        *,
        ks: Sequence[int] = (1, 3, 5, 7, 9, 15),
        **grading,
    ) -> tuple[PH3, dict]:
        """Prune the top ``k`` of ``ranking``, ``k`` chosen on ``validation`` (accuracy,
        then target probability, as the official code); ``ks`` beyond the ranking's length
        are cut to it."""
        validation = check_samples(validation, "validation")
        ranking = [tuple(h) for h in ranking]
        if not ranking:
            raise ValueError("ranking must name at least one head to prune")
        ks = sorted({min(int(k), len(ranking)) for k in ks if int(k) >= 1})

        def score(k):
            return evaluate(cls(model, ranking[:k]), tokenizer, validation, mode, **grading)

        (k, scores), _ = _best(ks, score)
        return cls(model, ranking[:k]), {
            "k": k,
            **{n: scores[n] for n in ("accuracy", "target_prob")},
        }
