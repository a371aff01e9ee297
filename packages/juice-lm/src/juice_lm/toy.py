"""The paper's Section-5 setting, trained here: factual recall and induction sharing a
trigger token.

A vocabulary of subjects ``s0..``, answers ``a0..``, fillers ``f0..`` and the trigger ``is``.
Each subject has one answer (the facts). A small Llama-architecture model is trained on two
tasks that end the same way, ``... X is -> ?``:

- factual recall: fillers, then ``s is`` -> the fact ``a(s)``;
- induction: fillers with ``x is y`` inside, more fillers, then ``x is`` -> ``y``, where
  ``x`` is a filler (never a subject) and ``y`` an answer.

A knowledge conflict puts a subject into the context with another answer
(``s is y ... s is``): memory says ``a(s)``, induction says ``y``. A share of the training
sequences are such conflicts, labelled with the memory answer or the context answer with
equal odds, so the trained model keeps both mechanisms and is torn on a conflict, as a
pretrained LM that has seen both kinds of text. The substitution context states the
conflicting fact once among fillers; the coherent context states it twice (a stronger
context than any training sequence).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from icml25_core import check_scalar

from .samples import ConflictSample

TRIGGER = "is"


def word_tokenizer(words: list[str]):
    """A whitespace word-level ``PreTrainedTokenizerFast`` over ``words`` with ``<s>``
    (added at the start of every text), ``</s>`` and ``<pad>``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<s>", "</s>", "<unk>"]
    vocab = {w: i for i, w in enumerate(specials + list(words))}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", vocab["<s>"])]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
    )


@dataclass
class ToyWorld:
    """Subjects, answers, fillers and the facts of one seed.

    Parameters
    ----------
    num_subjects, num_answers, num_fillers : int
    seed : int
    """

    num_subjects: int = 48
    num_answers: int = 16
    num_fillers: int = 32
    seed: int = 0
    max_tokens = 64
    """Positions a model of this world supports (training sequences and prompts are shorter)."""

    def __post_init__(self) -> None:
        for name in ("num_subjects", "num_answers", "num_fillers"):
            check_scalar(getattr(self, name), name, low=2, integer=True)
        rng = np.random.default_rng(self.seed)
        self.subjects = [f"s{i}" for i in range(self.num_subjects)]
        self.answers = [f"a{i}" for i in range(self.num_answers)]
        self.fillers = [f"f{i}" for i in range(self.num_fillers)]
        self.facts = {s: self.answers[rng.integers(self.num_answers)] for s in self.subjects}
        self.tokenizer = word_tokenizer([*self.subjects, *self.answers, *self.fillers, TRIGGER])

    # -- training data -------------------------------------------------------------------------
    def _fill(self, rng, n: int) -> list[str]:
        return [self.fillers[i] for i in rng.integers(self.num_fillers, size=n)]

    def factual(self, rng, length: int) -> tuple[list[str], str]:
        """``length - 2`` fillers, then ``s is`` -> ``a(s)``."""
        s = self.subjects[rng.integers(self.num_subjects)]
        return [*self._fill(rng, length - 2), s, TRIGGER], self.facts[s]

    def induction(self, rng, length: int) -> tuple[list[str], str]:
        """Fillers with ``x is y`` inside, then ``x is`` -> ``y`` (``length >= 5``)."""
        x = self.fillers[rng.integers(self.num_fillers)]
        y = self.answers[rng.integers(self.num_answers)]
        rest = length - 5
        before = int(rng.integers(rest + 1))
        words = [*self._fill(rng, before), x, TRIGGER, y, *self._fill(rng, rest - before)]
        return [*words, x, TRIGGER], y

    def conflict(self, rng, length: int) -> tuple[list[str], str]:
        """Fillers with ``s is y`` inside (``y != a(s)``), then ``s is`` -> ``a(s)`` or ``y``
        with equal odds (``length >= 5``)."""
        s = self.subjects[rng.integers(self.num_subjects)]
        others = [a for a in self.answers if a != self.facts[s]]
        y = others[rng.integers(len(others))]
        rest = length - 5
        before = int(rng.integers(rest + 1))
        words = [*self._fill(rng, before), s, TRIGGER, y, *self._fill(rng, rest - before)]
        return [*words, s, TRIGGER], (self.facts[s] if rng.random() < 0.5 else y)

    def batch(self, rng, size: int, shares=(0.4, 0.4, 0.2), max_length: int = 14):
        """A training batch of one random length: ``(input_ids (B, T), attention_mask
        (B, T), targets (B,))`` (no padding: the mask is all ones); ``shares`` of factual,
        induction and conflict sequences."""
        length = int(rng.integers(5, max_length + 1))
        rows, targets = [], []
        vocab = self.tokenizer.get_vocab()
        tasks = (self.factual, self.induction, self.conflict)
        p = np.asarray(shares, dtype=float)
        if p.shape != (3,) or (p < 0).any() or p.sum() <= 0:
            raise ValueError(f"shares must be three non-negative weights, got {shares!r}")
        picks = rng.choice(3, size=size, p=p / p.sum())
        for pick in picks:
            words, target = tasks[pick](rng, length)
            rows.append([vocab["<s>"], *(vocab[w] for w in words)])
            targets.append(vocab[target])
        ids = torch.tensor(rows)
        return ids, torch.ones_like(ids), torch.tensor(targets)

    # -- conflicts -------------------------------------------------------------------------------
    def samples(self, n: int, seed: int) -> list[ConflictSample]:
        """``n`` knowledge-conflict samples over distinct subjects (``n <= num_subjects``)."""
        check_scalar(n, "n", low=1, high=self.num_subjects, integer=True)
        rng = np.random.default_rng(seed)
        out = []
        for i in rng.permutation(self.num_subjects)[:n]:
            s = self.subjects[i]
            memory = self.facts[s]
            others = [a for a in self.answers if a != memory]
            y = others[rng.integers(len(others))]
            fact = f"{s} {TRIGGER} {y}"
            a, b = (" ".join(self._fill(rng, k)) for k in rng.integers(1, 4, size=2))
            substitution = f"{a} {fact} {b}"
            coherent = f"{a} {fact} {b} {fact}"
            out.append(ConflictSample(f"{s} {TRIGGER}", memory, y, substitution, coherent))
        return out


def small_llama(
    vocab_size: int,
    *,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    max_positions: int = 64,
    seed: int = 0,
    **token_ids,
):
    """A fresh, randomly initialised ``LlamaForCausalLM`` (MLP width ``4 * hidden``, no
    grouped-query attention, untied embeddings, eager attention); ``token_ids``: the
    config's ``bos_token_id`` / ``eos_token_id`` / ``pad_token_id``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=False,
        attn_implementation="eager",
        **token_ids,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config).eval()


def toy_model(world, *, hidden: int = 64, layers: int = 2, heads: int = 4, seed: int = 0):
    """A fresh :func:`small_llama` sized for ``world``'s vocabulary and ``max_tokens`` (a
    :class:`ToyWorld` or a :class:`~juice_lm.FactWorld`)."""
    tok = world.tokenizer
    return small_llama(
        len(tok),
        hidden=hidden,
        layers=layers,
        heads=heads,
        max_positions=world.max_tokens,
        seed=seed,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )


def train_toy(
    world,
    *,
    steps: int = 1500,
    batch_size: int = 128,
    lr: float = 3e-3,
    shares=(0.4, 0.4, 0.2),
    seed: int = 0,
    model=None,
    progress: bool = False,
):
    """Train :func:`toy_model` (or ``model``) on ``world``'s batches (a :class:`ToyWorld`:
    factual, induction and conflict sequences; a :class:`~juice_lm.FactWorld`: recall,
    copying and conflict; ``shares`` of each), loss on the last position only; AdamW with
    a cosine schedule. Returns the model in eval mode. A diverging loss raises
    ``FloatingPointError`` naming ``lr``."""
    from icml25_core import check_loss, track

    from .steering import forward

    check_scalar(steps, "steps", low=1, integer=True)
    check_scalar(batch_size, "batch_size", low=1, integer=True)
    check_scalar(lr, "lr", low=0.0, low_inclusive=False)
    model = toy_model(world, seed=seed) if model is None else model
    rng = np.random.default_rng(seed + 1)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    device = next(model.parameters()).device
    model.train()
    for step in track(range(steps), "training the toy model") if progress else range(steps):
        ids, mask, target = world.batch(rng, batch_size, shares)
        logits = forward(model, ids.to(device), mask.to(device), use_cache=False)[0][:, -1]
        loss = torch.nn.functional.cross_entropy(logits, target.to(device))
        check_loss(loss, lr=lr, step=step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
    return model.eval()
