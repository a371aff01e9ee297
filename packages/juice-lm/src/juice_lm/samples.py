"""Knowledge-conflict samples, their prompts, and how answers are read and graded.

A :class:`ConflictSample` holds one fact the model knows (``question`` -> ``memory_answer``)
and two contexts that contradict it with ``context_answer``: a bare substitution and a
coherent passage (the paper's "substitution" and "coherent" conflicts). A prompt is the
context, a space, and the question; the clean prompt is the question alone.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import torch

KINDS = ("clean", "substitution", "coherent")
"""The three prompts of a sample: no context, a substitution conflict, a coherent conflict."""
MODES = ("memory", "context")
"""Steer toward the model's parametric memory or toward the context."""
MODE_KINDS = {"memory": KINDS, "context": ("substitution", "coherent")}
"""The prompts each mode scores and grades by default: toward memory all three, toward the
context the two conflicts (the clean prompt has no context to follow)."""


@dataclass(frozen=True)
class ConflictSample:
    """One fact and two contexts that contradict it.

    Attributes
    ----------
    question : str
        The query, e.g. ``"The capital of France is"``.
    memory_answer : str
        What the model knows, e.g. ``"Paris"``.
    context_answer : str
        What the contexts claim, e.g. ``"Rome"``.
    substitution : str
        A context stating the conflicting fact, e.g. ``"The capital of France is Rome."``.
    coherent : str
        A longer, coherent context supporting the conflicting fact.
    """

    question: str
    memory_answer: str
    context_answer: str
    substitution: str
    coherent: str

    def __post_init__(self) -> None:
        for name in ("question", "memory_answer", "context_answer", "substitution", "coherent"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"ConflictSample.{name} must be a non-empty string, got {value!r}")

    def context(self, kind: str) -> str:
        """The context of prompt ``kind`` (one of :data:`KINDS`; empty for ``clean``)."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        return "" if kind == "clean" else getattr(self, kind)

    def prompt(self, kind: str) -> str:
        """Context and question as one prompt."""
        return compose(self.context(kind), self.question)

    def target(self, mode: str) -> str:
        """The answer ``mode`` steers toward."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        return self.memory_answer if mode == "memory" else self.context_answer


def compose(context: str, question: str) -> str:
    """``context + " " + question`` (the question alone without context)."""
    return f"{context} {question}" if context else question


def check_samples(samples, name: str = "samples") -> list[ConflictSample]:
    """``samples`` as a non-empty list of :class:`ConflictSample`."""
    samples = list(samples)
    if not samples:
        raise ValueError(f"{name} must hold at least one ConflictSample, got none")
    bad = [type(s).__name__ for s in samples if not isinstance(s, ConflictSample)]
    if bad:
        raise TypeError(f"{name} must hold ConflictSample objects, got {bad[0]}")
    return samples


def answer_token_id(tokenizer, answer: str) -> int:
    """The id of the first sub-token of ``answer``'s first word as it follows a prompt (a
    leading space: ``" Paris"``), skipping a bare word-start piece (SentencePiece's
    ``"▁"``)."""
    words = answer.strip().split()
    if not words:
        raise ValueError(f"answer must contain a word, got {answer!r}")
    ids = tokenizer(" " + words[0], add_special_tokens=False).input_ids
    unk = getattr(tokenizer, "unk_token_id", None)
    for i in ids:
        if unk is not None and i == unk:
            raise ValueError(
                f"answer {answer!r} is not in the tokenizer's vocabulary: its first word "
                f"tokenises to the unknown token {tokenizer.decode([i])!r}, which would be "
                "scored instead"
            )
        if tokenizer.decode([i]).strip():
            return int(i)
    raise ValueError(f"the tokenizer gives no token for answer {answer!r}")


def answer_length(tokenizer, answer: str) -> int:
    """Number of tokens of ``" " + answer`` (how many tokens grading needs to generate)."""
    return len(tokenizer(" " + answer.strip(), add_special_tokens=False).input_ids)


def normalize_answer(text: str) -> str:
    """Lower case, accents and punctuation removed, spaces collapsed (as the official
    evaluation)."""
    text = unicodedata.normalize("NFD", text.lower())
    text = "".join(c for c in text if unicodedata.category(c) != "Mn")
    text = re.sub(r"[^\w\s]", "", text)
    return re.sub(r"\s+", " ", text).strip()


def is_correct(generated: str, answer: str, words: int = 5) -> bool:
    """Whether ``answer`` (normalised) occurs as whole words among the first ``words``
    words of ``generated``.

    The official code keeps the first five words of a 15-token greedy continuation and
    tests for a substring, so "Paris" counts as found in "Parisian"; here the match must
    start and end at word boundaries.
    """
    head = normalize_answer(" ".join(generated.split()[:words]))
    return re.search(rf"(?<!\w){re.escape(normalize_answer(answer))}(?!\w)", head) is not None


def encode_batch(tokenizer, texts: list[str], device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded ``(input_ids, attention_mask)`` of ``texts`` (special tokens as the
    tokenizer adds them, e.g. one BOS)."""
    encoded = [tokenizer(t).input_ids for t in texts]
    if any(len(e) == 0 for e in encoded):
        raise ValueError("a prompt tokenises to no tokens")
    pad = tokenizer.pad_token_id
    if pad is None:
        pad = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
    width = max(len(e) for e in encoded)
    ids = torch.full((len(texts), width), int(pad), dtype=torch.long)
    mask = torch.zeros((len(texts), width), dtype=torch.long)
    for i, e in enumerate(encoded):
        ids[i, width - len(e) :] = torch.tensor(e)
        mask[i, width - len(e) :] = 1
    return ids.to(device), mask.to(device)
