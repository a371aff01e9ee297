"""The arithmetic-expression benchmark of grammar-VAE latent space optimization.

Expressions come from the context-free grammar of Kusner et al. (2017), as in the
official LES code::

    S -> S '+' T | S '*' T | S '/' T | T
    T -> '(' S ')' | 'sin(' S ')' | 'exp(' S ')' | 'x' | '1' | '2' | '3'

written as strings of at most :data:`MAX_LENGTH` (19) characters over the 15 symbols of
:data:`VOCAB` (the space pads). Everything here is written without NLTK:

- :func:`sample_expressions`: random derivations with at most 15 productions;
- :func:`is_valid`: whether a string parses under the grammar, tokenized as the
  reference does (spaces are separators; ``sin(`` and ``exp(`` are single tokens);
- :func:`objective`: ``-log(1 + min(1000, MSE))`` of the expression against the target
  ``1/3 + x + sin(x*x)`` on 1000 points of ``[-10, 10]`` (arithmetic precedence, as
  ``numexpr`` evaluates the string), NaN for an invalid string;
- :func:`encode` / :func:`decode`: strings to token ids ``(N, 19)`` and back.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence

import numpy as np

__all__ = [
    "MAX_LENGTH",
    "MAX_PRODUCTIONS",
    "TARGET",
    "VOCAB",
    "decode",
    "encode",
    "evaluate",
    "is_valid",
    "objective",
    "sample_expressions",
    "tokenize",
]

VOCAB: tuple[str, ...] = ("x", "+", "(", ")", "1", "2", "3", "*", "/", "s", "i", "n", "e", "p", " ")
"""The 15 symbols, in the official order (token id = index; ``" "`` pads)."""
PAD = VOCAB.index(" ")
MAX_LENGTH = 19
"""Characters per expression (shorter ones are padded with spaces)."""
MAX_PRODUCTIONS = 15
"""Most grammar productions in a sampled derivation (the grammar-VAE dataset's limit)."""
TARGET = "1/3+x+sin(x*x)"
"""The expression the objective's MSE is measured against."""
GRID = np.linspace(-10.0, 10.0, 1000)
_MSE_CAP = 1000.0

_OPS = ("+", "*", "/")
_OPEN = ("(", "sin(", "exp(")
_ATOMS = ("x", "1", "2", "3")
_INDEX = {c: i for i, c in enumerate(VOCAB)}


def tokenize(expression: str) -> list[str]:
    """The reference's tokens of ``expression``: spaces around ``( ) + * /``, then
    ``sin (`` / ``exp (`` joined back into ``sin(`` / ``exp(``, split on whitespace.

    Examples: ``"sin(x)+1"`` -> ``['sin(', 'x', ')', '+', '1']``; ``"x 1"`` ->
    ``['x', '1']``; ``"si n(x)"`` -> ``['si', 'n', '(', 'x', ')']`` (invalid tokens are kept).
    """
    s = expression.replace("(", " ( ").replace(")", " ) ")
    s = s.replace("+", " + ").replace("*", " * ").replace("/", " / ")
    s = s.replace("sin (", "sin(").replace("exp (", "exp(")
    return s.split()


class _Parser:
    """Recursive descent over tokens. ``grammar=True``: the CFG's left-recursive rules
    (every operator at one level, left-associative), used for validity.
    ``grammar=False``: arithmetic precedence (``*``/``/`` before ``+``), used to evaluate
    the string as ``numexpr`` does. Values are numpy arrays over :data:`GRID`."""

    def __init__(self, tokens: Sequence[str], x: np.ndarray | None) -> None:
        self.tokens, self.pos, self.x = list(tokens), 0, x

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        tok = self.peek()
        if tok is None:
            raise SyntaxError("unexpected end")
        self.pos += 1
        return tok

    def sum(self):  # precedence level of +
        value = self.product()
        while self.peek() == "+":
            self.take()
            value = self._apply("+", value, self.product())
        return value

    def product(self):  # precedence level of * and /
        value = self.term()
        while self.peek() in ("*", "/"):
            op = self.take()
            value = self._apply(op, value, self.term())
        return value

    def flat(self):  # the grammar's S: all operators at one level
        value = self.term(flat=True)
        while self.peek() in _OPS:
            op = self.take()
            value = self._apply(op, value, self.term(flat=True))
        return value

    def term(self, flat: bool = False):
        tok = self.take()
        if tok in _OPEN:
            inner = self.flat() if flat else self.sum()
            if self.take() != ")":
                raise SyntaxError("missing ')'")
            if self.x is None or tok == "(":
                return inner
            return np.sin(inner) if tok == "sin(" else np.exp(inner)
        if tok in _ATOMS:
            if self.x is None:
                return None
            return self.x if tok == "x" else np.full_like(self.x, float(tok))
        raise SyntaxError(f"unexpected token {tok!r}")

    def _apply(self, op: str, a, b):
        if self.x is None:
            return None
        return a + b if op == "+" else a * b if op == "*" else a / b


def is_valid(expression: str) -> bool:
    """Whether ``expression`` (padding spaces allowed) is a sentence of the grammar."""
    parser = _Parser(tokenize(expression), None)
    if parser.peek() is None:
        return False
    try:
        parser.flat()
    except SyntaxError:
        return False
    return parser.peek() is None


def evaluate(expression: str, x: np.ndarray | None = None) -> np.ndarray:
    """Values of a valid ``expression`` at ``x`` (default: :data:`GRID`, 1000 points of
    ``[-10, 10]``), with arithmetic precedence; overflow gives ``inf``, not an error."""
    if not is_valid(expression):
        raise ValueError(f"expression {expression!r} is not a sentence of the grammar")
    grid = GRID if x is None else np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        return np.asarray(_Parser(tokenize(expression), grid).sum(), dtype=np.float64)


@functools.cache
def _target_values() -> np.ndarray:
    return evaluate(TARGET)


def objective(expression: str) -> float:
    """``-log(1 + min(1000, MSE))`` of ``expression`` against :data:`TARGET` on the grid
    (higher is better; the best value is 0); ``nan`` for an invalid expression. An MSE
    that is not finite (overflow, ``inf - inf``) counts as the cap 1000."""
    if not is_valid(expression):
        return math.nan
    with np.errstate(all="ignore"):
        mse = float(np.mean((evaluate(expression) - _target_values()) ** 2))
    if not math.isfinite(mse):
        mse = _MSE_CAP
    return -math.log1p(min(_MSE_CAP, mse))


def encode(expressions: Iterable[str], max_length: int = MAX_LENGTH) -> np.ndarray:
    """Token ids ``(N, max_length)`` of the strings, padded with the space symbol.

    ``expressions`` is a list (any iterable) of strings; one bare string is refused rather
    than read as one expression per character."""
    if isinstance(expressions, str | bytes):
        raise TypeError(
            f"expressions must be a list of strings, got the single string {expressions!r}; "
            "pass [expression]"
        )
    rows = []
    for e in expressions:
        if not isinstance(e, str):
            raise TypeError(f"expressions must hold strings, got {type(e).__name__} {e!r}")
        if len(e) > max_length:
            raise ValueError(f"expression {e!r} is longer than max_length={max_length}")
        bad = sorted(set(e) - set(VOCAB))
        if bad:
            raise ValueError(f"expression {e!r} has symbols {bad} outside VOCAB")
        rows.append([_INDEX[c] for c in e.ljust(max_length)])
    if not rows:
        raise ValueError("expressions is empty")
    return np.asarray(rows, dtype=np.int64)


def decode(tokens) -> list[str]:
    """Strings of token ids ``(N, L)`` (trailing padding stripped)."""
    ids = np.asarray(tokens)
    if ids.ndim != 2:
        raise ValueError(f"tokens must have shape (N, L), got {ids.shape}")
    if ids.size and (ids.min() < 0 or ids.max() >= len(VOCAB)):
        raise ValueError(f"tokens must lie in [0, {len(VOCAB)}), got {ids.min()}..{ids.max()}")
    return ["".join(VOCAB[i] for i in row).rstrip() for row in ids]


# derivation sampler: productions per nonterminal and their cumulative weights
_RULES = {
    "S": (("S", "+", "T"), ("S", "*", "T"), ("S", "/", "T"), ("T",)),
    "T": (("(", "S", ")"), ("sin(", "S", ")"), ("exp(", "S", ")"), ("x",), ("1",), ("2",), ("3",)),
}
_CUMULATIVE = {
    "S": np.cumsum([1.0, 1.0, 1.0, 3.0]) / 6.0,
    "T": np.cumsum([1.0, 1.0, 1.0, 3.0, 1.0, 1.0, 1.0]) / 9.0,
}


def _derive(rng: np.random.Generator, max_productions: int) -> str | None:
    """One leftmost derivation from ``S``; ``None`` past ``max_productions``."""
    symbols, out, used = ["S"], [], 0
    draws = rng.random(max_productions)
    while symbols:
        sym = symbols.pop()
        if sym not in _RULES:
            out.append(sym)
            continue
        if used == max_productions:
            return None
        rule = _RULES[sym][int(np.searchsorted(_CUMULATIVE[sym], draws[used], side="right"))]
        used += 1
        symbols.extend(reversed(rule))
    return "".join(out)


def sample_expressions(
    n: int,
    seed: int = 0,
    *,
    unique: bool = True,
    max_length: int = MAX_LENGTH,
    max_productions: int = MAX_PRODUCTIONS,
) -> list[str]:
    """``n`` expressions from random leftmost derivations of the grammar (rejection: at
    most ``max_productions`` productions and ``max_length`` characters), in draw order.

    ``unique=True`` keeps each expression once, as a training set of distinct
    expressions (the raw draws are dominated by ``x``, ``1``, ``2``, ``3``).
    """
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    rng = np.random.default_rng(seed)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        e = _derive(rng, max_productions)
        if e is None or len(e) > max_length or (unique and e in seen):
            continue
        seen.add(e)
        out.append(e)
    return out
