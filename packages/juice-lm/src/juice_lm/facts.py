"""The full setting: templated natural-language facts and copying from the context, with
paraphrased prompts.

People are named by made-up words: *subjects* have facts, *strangers* have none. Three
relations (home city, job, sport) each have four paraphrased question templates
(``"Kavo lives in"``, ``"the home of Kavo is in"``, ...) and two supporting sentences
(``"Kavo moved to Oslo years ago ."``); a statement is a question template, the answer
and a full stop. Every subject has one answer per relation: the facts. A small
Llama-architecture model is trained (loss on the answer only) on a few context sentences
followed by a question:

- recall: the context states facts about others (distractors: strangers with random
  answers, or other subjects with their true facts); the question asks a subject's fact;
- copying: the context states a stranger's answer in one template among distractors; the
  question asks it, in any template, and the answer is the stated one;
- conflict: the context states a subject's relation with another answer; labelled with the
  memory answer or the context answer with equal odds, so the model keeps both mechanisms
  and is torn on a conflict (as :class:`~juice_lm.ToyWorld`).

The knowledge-conflict samples paraphrase: the question's template is never the one the
context states the conflicting answer in. The substitution context states it once among
distractors; the coherent context adds a supporting sentence and states it a second time
in a third template.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from icml25_core import check_scalar

from .samples import ConflictSample
from .toy import word_tokenizer

RELATIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "city": {
        "answers": (
            "Paris",
            "Rome",
            "Lima",
            "Oslo",
            "Cairo",
            "Delhi",
            "Quito",
            "Hanoi",
            "Dakar",
            "Sofia",
            "Riga",
            "Perth",
            "Tunis",
            "Accra",
            "Bern",
            "Doha",
            "Baku",
            "Minsk",
            "Seoul",
            "Tokyo",
            "Lagos",
            "Havana",
            "Madrid",
            "Vienna",
        ),
        "questions": (
            "{s} lives in",
            "{s} resides in",
            "the home of {s} is in",
            "{s} has a house in",
        ),
        "support": ("{s} moved to {a} years ago .", "every morning {s} walks through {a} ."),
    },
    "job": {
        "answers": (
            "doctor",
            "teacher",
            "pilot",
            "farmer",
            "lawyer",
            "baker",
            "nurse",
            "chef",
            "judge",
            "miner",
            "poet",
            "tailor",
            "dentist",
            "plumber",
            "sailor",
            "painter",
        ),
        "questions": (
            "{s} works as a",
            "the job of {s} is",
            "by profession {s} is a",
            "{s} earns a living as a",
        ),
        "support": ("{s} trained for years to become a {a} .", "everyone knows {s} as a {a} ."),
    },
    "sport": {
        "answers": (
            "tennis",
            "chess",
            "golf",
            "rugby",
            "hockey",
            "cricket",
            "judo",
            "boxing",
            "rowing",
            "polo",
            "karate",
            "skiing",
        ),
        "questions": (
            "{s} plays",
            "the favourite sport of {s} is",
            "on weekends {s} plays",
            "{s} is a keen player of",
        ),
        "support": ("{s} has practised {a} since childhood .", "{s} won a {a} prize last year ."),
    },
}
"""Answers, paraphrased question templates and supporting sentences of each relation."""


def _names(rng, n: int, taken: set[str]) -> list[str]:
    """``n`` distinct made-up names (consonant, vowel, consonant, vowel) not in ``taken``."""
    consonants, vowels = "bdfgklmnprstvz", "aeiou"
    pool = [
        (a + b + c + d).capitalize()
        for a in consonants
        for b in vowels
        for c in consonants
        for d in vowels
    ]
    pool = [p for p in pool if p not in taken]
    return [pool[i] for i in rng.choice(len(pool), size=n, replace=False)]


@dataclass
class FactWorld:
    """People, their facts, and the templates of one seed.

    Parameters
    ----------
    num_subjects : int
        People with facts (one answer per relation each).
    num_strangers : int
        People without facts (copying and distractors).
    max_distractors : int
        Most distractor sentences in a training context.
    seed : int
    """

    num_subjects: int = 64
    num_strangers: int = 64
    max_distractors: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        check_scalar(self.num_subjects, "num_subjects", low=2, high=2000, integer=True)
        check_scalar(self.num_strangers, "num_strangers", low=2, high=2000, integer=True)
        check_scalar(self.max_distractors, "max_distractors", low=0, high=8, integer=True)
        rng = np.random.default_rng(self.seed)
        self.relations = tuple(RELATIONS)
        answers = {a for r in RELATIONS.values() for a in r["answers"]}
        names = _names(rng, self.num_subjects + self.num_strangers, answers)
        self.subjects = names[: self.num_subjects]
        self.strangers = names[self.num_subjects :]
        self.facts = {
            (s, r): RELATIONS[r]["answers"][rng.integers(len(RELATIONS[r]["answers"]))]
            for s in self.subjects
            for r in self.relations
        }
        templates = [t for r in RELATIONS.values() for t in (*r["questions"], *r["support"])]
        words = {w for t in templates for w in t.format(s="", a="").split()} | {"."}
        self.tokenizer = word_tokenizer(sorted(words) + names + sorted(answers))
        longest = max(len(t.split()) + 2 for t in templates)  # a name and an answer or "."
        # BOS, distractors and up to three sentences of a coherent context, the question
        self.max_tokens = 1 + (self.max_distractors + 3) * longest + longest

    # -- sentences ------------------------------------------------------------------------------
    def question(self, person: str, relation: str, template: int) -> str:
        return RELATIONS[relation]["questions"][template].format(s=person)

    def statement(self, person: str, relation: str, answer: str, template: int) -> str:
        return f"{self.question(person, relation, template)} {answer} ."

    def _template(self, rng, avoid=()) -> int:
        choices = [t for t in range(4) if t not in avoid]
        return int(choices[rng.integers(len(choices))])

    def _relation(self, rng) -> str:
        return self.relations[rng.integers(len(self.relations))]

    def _answer(self, rng, relation: str, avoid: str | None = None) -> str:
        choices = [a for a in RELATIONS[relation]["answers"] if a != avoid]
        return choices[rng.integers(len(choices))]

    def _distractor(self, rng, person: str) -> str:
        """A statement about someone other than ``person``: a stranger with a random answer
        or another subject with its true fact."""
        relation = self._relation(rng)
        stranger = rng.random() < 0.5
        pool = [p for p in (self.strangers if stranger else self.subjects) if p != person]
        other = pool[rng.integers(len(pool))]
        answer = self._answer(rng, relation) if stranger else self.facts[(other, relation)]
        return self.statement(other, relation, answer, self._template(rng))

    def _context(self, rng, person: str, key: str | None) -> list[str]:
        """0..max_distractors distractors with the ``key`` sentence at a random place."""
        sentences = [
            self._distractor(rng, person) for _ in range(rng.integers(self.max_distractors + 1))
        ]
        if key is not None:
            sentences.insert(int(rng.integers(len(sentences) + 1)), key)
        return sentences

    # -- training data -------------------------------------------------------------------------
    def example(self, rng, task: int) -> tuple[str, str]:
        """One training ``(text, answer)``: task 0 recall, 1 copying, 2 conflict."""
        relation = self._relation(rng)
        q = self._template(rng)
        if task == 0:
            person = self.subjects[rng.integers(self.num_subjects)]
            context, answer = self._context(rng, person, None), self.facts[(person, relation)]
        elif task == 1:
            person = self.strangers[rng.integers(self.num_strangers)]
            answer = self._answer(rng, relation)
            key = self.statement(person, relation, answer, self._template(rng))
            context = self._context(rng, person, key)
        else:
            person = self.subjects[rng.integers(self.num_subjects)]
            memory = self.facts[(person, relation)]
            stated = self._answer(rng, relation, avoid=memory)
            key = self.statement(person, relation, stated, self._template(rng))
            context = self._context(rng, person, key)
            answer = memory if rng.random() < 0.5 else stated
        return " ".join([*context, self.question(person, relation, q)]), answer

    def batch(self, rng, size: int, shares=(0.4, 0.4, 0.2)):
        """A left-padded training batch: ``(input_ids (B, T), attention_mask (B, T),
        targets (B,))``; ``shares`` of recall, copying and conflict sequences."""
        p = np.asarray(shares, dtype=float)
        if p.shape != (3,) or (p < 0).any() or p.sum() <= 0:
            raise ValueError(f"shares must be three non-negative weights, got {shares!r}")
        examples = [self.example(rng, t) for t in rng.choice(3, size=size, p=p / p.sum())]
        tok = self.tokenizer
        ids = [tok(text).input_ids for text, _ in examples]
        width = max(map(len, ids))
        out = torch.full((size, width), tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros((size, width), dtype=torch.long)
        for i, row in enumerate(ids):
            out[i, width - len(row) :] = torch.tensor(row)
            mask[i, width - len(row) :] = 1
        vocab = tok.get_vocab()
        return out, mask, torch.tensor([vocab[a] for _, a in examples])

    # -- conflicts -------------------------------------------------------------------------------
    def samples(self, n: int, seed: int) -> list[ConflictSample]:
        """``n`` knowledge-conflict samples over distinct (subject, relation) facts, with
        paraphrased contexts (``n <= num_subjects * 3``)."""
        check_scalar(n, "n", low=1, high=len(self.facts), integer=True)
        rng = np.random.default_rng(seed)
        keys = list(self.facts)
        out = []
        for i in rng.permutation(len(keys))[:n]:
            person, relation = keys[i]
            memory = self.facts[(person, relation)]
            stated = self._answer(rng, relation, avoid=memory)
            q = self._template(rng)
            a = self._template(rng, avoid=(q,))
            c = self._template(rng, avoid=(q, a))
            said = self.statement(person, relation, stated, a)
            before = [self._distractor(rng, person) for _ in range(rng.integers(2))]
            after = [self._distractor(rng, person) for _ in range(rng.integers(2))]
            support = RELATIONS[relation]["support"][rng.integers(2)].format(s=person, a=stated)
            out.append(
                ConflictSample(
                    self.question(person, relation, q),
                    memory,
                    stated,
                    " ".join([*before, said, *after]),
                    " ".join([*before, support, said, self.statement(person, relation, stated, c)]),
                )
            )
        return out
