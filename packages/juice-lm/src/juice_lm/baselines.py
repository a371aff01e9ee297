"""The paper's decoding baselines: context-aware decoding (CAD) and prompting.

PH3 (head pruning) and JUNE (run once) edit heads and live in :mod:`juice_lm.steering`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from icml25_core import check_choice, check_scalar

from .samples import MODES, compose, encode_batch
from .steering import Completion, HeadSteering, _device, forward, plain

INSTRUCTIONS = {
    "memory": "Ignore the context and answer from your own knowledge.",
    "context": "Answer using only the information in the context.",
}
"""Default instructions of :class:`Prompting`."""


class CAD:
    """Context-aware decoding (Shi et al., 2024): greedy on
    ``(1 + alpha) logits(context + question) - alpha logits(question)``.

    The question-only pass drops the whole context and is tokenised on its own (one BOS).
    The official JuICE code drops only the first token of the context (``len()`` of a
    ``(1, L)`` tensor is 1) and feeds the context and the question each with a BOS.

    Parameters
    ----------
    model : transformers.PreTrainedModel
    alpha : float
        Contrast weight; 1.0 as the official JuICE evaluation (the CAD paper uses 0.5 too).
    """

    def __init__(self, model: nn.Module, alpha: float = 1.0):
        self.model = model
        self.alpha = float(check_scalar(alpha, "alpha", low=0.0))

    @torch.no_grad()
    def complete(
        self, tokenizer, contexts: Sequence[str], questions: Sequence[str], max_new_tokens: int
    ) -> Completion:
        """Greedy CAD continuations of ``compose(context, question)``, KV-cached."""
        check_scalar(max_new_tokens, "max_new_tokens", low=1, integer=True)
        device = _device(self.model)
        full = encode_batch(
            tokenizer, [compose(c, q) for c, q in zip(contexts, questions, strict=True)], device
        )
        alone = encode_batch(tokenizer, list(questions), device)
        streams = [list(full), list(alone)]  # [ids, mask] per stream
        caches: list = [None, None]
        step = [full[0], alone[0]]
        new, first = [], None
        eos = tokenizer.eos_token_id
        done = torch.zeros(full[0].shape[0], dtype=torch.bool, device=device)
        for _ in range(max_new_tokens):
            logits = []
            for s in range(2):
                ids, mask = streams[s]
                out, caches[s] = forward(self.model, step[s], mask, caches[s])
                logits.append(out[:, -1].float())
            adjusted = (1 + self.alpha) * logits[0] - self.alpha * logits[1]
            if first is None:
                first = adjusted
            nxt = adjusted.argmax(-1)
            if eos is not None:
                nxt = torch.where(done, torch.full_like(nxt, eos), nxt)
                done |= nxt == eos
            new.append(nxt)
            for s in range(2):
                ids, mask = streams[s]
                streams[s] = [
                    torch.cat([ids, nxt[:, None]], 1),
                    torch.cat([mask, torch.ones_like(mask[:, :1])], 1),
                ]
                step[s] = nxt[:, None]
            if eos is not None and bool(done.all()):
                break
        texts = tokenizer.batch_decode(torch.stack(new, 1), skip_special_tokens=True)
        return Completion(texts, first.softmax(-1))


class Prompting:
    """The unmodified model with an instruction before the context and the question.

    Parameters
    ----------
    model : transformers.PreTrainedModel
    mode : {"memory", "context"}
        Picks the default instruction (:data:`INSTRUCTIONS`).
    instruction : str, optional
        Replaces the default.
    """

    def __init__(self, model: nn.Module, mode: str = "memory", instruction: str | None = None):
        check_choice(mode, "mode", MODES)
        self.instruction = INSTRUCTIONS[mode] if instruction is None else str(instruction)
        if not self.instruction.strip():
            raise ValueError("instruction must not be empty")
        self._model: HeadSteering = plain(model)

    def complete(self, tokenizer, contexts, questions, max_new_tokens) -> Completion:
        """Greedy continuations with the instruction prepended."""
        contexts = [compose(self.instruction, c) for c in contexts]
        return self._model.complete(tokenizer, contexts, questions, max_new_tokens)
