"""The paper's decoding baselines: context-aware decoding (CAD) and prompting.

PH3 (head pruning) and JUNE (run once) edit heads and live in :mod:`juice_lm.steering`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from icml25_core import check_choice, check_scalar

from .samples import MODES, compose, encode_batch
from .steering import Completion, HeadSteering, _device, check_left_padded, forward, plain

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
    def generate(
        self,
        input_ids: torch.Tensor,
        question_ids: torch.Tensor,
        max_new_tokens: int,
        *,
        attention_mask: torch.Tensor | None = None,
        question_mask: torch.Tensor | None = None,
        eos_token_id: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Greedy CAD tokens from two left-padded streams, each with its own KV cache.

        Parameters
        ----------
        input_ids : tensor (B, T)
            Context and question.
        question_ids : tensor (B, Tq)
            The question alone.
        max_new_tokens : int
        attention_mask, question_mask : tensor, optional
            Masks of the two streams (default: no padding); padding on the left only.
        eos_token_id : int, optional
            A row that produced it keeps producing it; decoding stops when all rows have.

        Returns
        -------
        new_tokens : tensor (B, n)
            ``n <= max_new_tokens`` generated ids.
        first_logits : tensor (B, vocab)
            The contrasted logits of the first generated position.
        """
        check_scalar(max_new_tokens, "max_new_tokens", low=1, integer=True)
        device = _device(self.model)
        streams = []
        for ids, mask, name in (
            (input_ids, attention_mask, "attention_mask"),
            (question_ids, question_mask, "question_mask"),
        ):
            ids = ids.to(device)
            streams.append(torch.ones_like(ids) if mask is None else mask.to(device))
            check_left_padded(streams[-1], name)
        if input_ids.shape[0] != question_ids.shape[0]:
            raise ValueError(
                f"input_ids and question_ids must hold the same number of rows, got "
                f"{input_ids.shape[0]} and {question_ids.shape[0]}"
            )
        caches: list = [None, None]
        step = [input_ids.to(device), question_ids.to(device)]
        new, first = [], None
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=device)
        for _ in range(max_new_tokens):
            logits = []
            for s in range(2):
                out, caches[s] = forward(self.model, step[s], streams[s], caches[s], last=True)
                logits.append(out[:, -1].float())
            adjusted = (1 + self.alpha) * logits[0] - self.alpha * logits[1]
            if first is None:
                first = adjusted
            nxt = adjusted.argmax(-1)
            if eos_token_id is not None:
                nxt = torch.where(done, torch.full_like(nxt, eos_token_id), nxt)
                done |= nxt == eos_token_id
            new.append(nxt)
            for s in range(2):
                streams[s] = torch.cat([streams[s], torch.ones_like(streams[s][:, :1])], 1)
                step[s] = nxt[:, None]
            if eos_token_id is not None and bool(done.all()):
                break
        return torch.stack(new, 1), first

    def complete(
        self, tokenizer, contexts: Sequence[str], questions: Sequence[str], max_new_tokens: int
    ) -> Completion:
        """Greedy CAD continuations of ``compose(context, question)``, KV-cached."""
        device = _device(self.model)
        full = encode_batch(
            tokenizer, [compose(c, q) for c, q in zip(contexts, questions, strict=True)], device
        )
        alone = encode_batch(tokenizer, list(questions), device)
        new, first = self.generate(
            full[0],
            alone[0],
            max_new_tokens,
            attention_mask=full[1],
            question_mask=alone[1],
            eos_token_id=tokenizer.eos_token_id,
        )
        texts = tokenizer.batch_decode(new, skip_special_tokens=True)
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
