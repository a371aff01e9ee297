"""The expression grammar: sampler, validity (against an enumeration of the language),
evaluation with arithmetic precedence, the objective, encoding."""

import itertools
import math

import numpy as np
import pytest

from les_lso import grammar

TOKENS = ("+", "*", "/", "(", ")", "sin(", "exp(", "x", "1", "2", "3")


def _sentences(max_tokens):
    """Every sentence of the grammar with at most ``max_tokens`` tokens, by expanding
    leftmost nonterminals breadth-first (each expansion adds at least one token or is
    S -> T, which is bounded by the token count)."""
    rules = {
        "S": [["S", "+", "T"], ["S", "*", "T"], ["S", "/", "T"], ["T"]],
        "T": [["(", "S", ")"], ["sin(", "S", ")"], ["exp(", "S", ")"], ["x"], ["1"], ["2"], ["3"]],
    }
    out, frontier, seen = set(), [("S",)], {("S",)}
    while frontier:
        form = frontier.pop()
        i = next((k for k, s in enumerate(form) if s in rules), None)
        if i is None:
            out.add(form)
            continue
        for rhs in rules[form[i]]:
            new = form[:i] + tuple(rhs) + form[i + 1 :]
            if (
                sum(s not in rules for s in new) + sum(s in rules for s in new) <= max_tokens
                and new not in seen
            ):
                seen.add(new)
                frontier.append(new)
    return out


def test_validity_matches_the_language_on_every_short_token_string():
    language = _sentences(4)
    assert ("sin(", "x", ")") in language and ("x", "+", "1") in language
    checked = 0
    for n in range(1, 5):
        for seq in itertools.product(TOKENS, repeat=n):
            assert grammar.is_valid(" ".join(seq)) == (seq in language), seq
            checked += 1
    assert checked == 11 + 11**2 + 11**3 + 11**4


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        ("sin(x)+1", True),
        ("x+1*2/3", True),
        ("((x))", True),
        ("x+ 1   ", True),  # spaces separate tokens, as in the reference's parser
        ("x 1", False),
        ("", False),
        ("   ", False),
        ("x+", False),
        ("(x", False),
        ("x)", False),
        ("si n(x)", False),
        ("sin x", False),
        ("sin()", False),
        ("12", False),
        ("xx", False),
        ("exp(x)(", False),
    ],
)
def test_known_strings(text, valid):
    assert grammar.is_valid(text) is valid


def test_tokenize_as_the_reference():
    assert grammar.tokenize("sin(x)+exp(1)") == ["sin(", "x", ")", "+", "exp(", "1", ")"]
    assert grammar.tokenize("si n(x)") == ["si", "n", "(", "x", ")"]


def test_sampled_expressions_are_valid_short_unique_and_seeded():
    a = grammar.sample_expressions(500, seed=3)
    assert a == grammar.sample_expressions(500, seed=3)
    assert a != grammar.sample_expressions(500, seed=4)
    assert len(set(a)) == 500
    assert all(grammar.is_valid(e) and len(e) <= grammar.MAX_LENGTH for e in a)
    raw = grammar.sample_expressions(2000, seed=0, unique=False)
    assert len(set(raw)) < len(raw)


def test_evaluation_uses_arithmetic_precedence():
    x = np.array([0.5, 2.0, -3.0])
    np.testing.assert_allclose(grammar.evaluate("x+1*2", x), x + 2)
    np.testing.assert_allclose(grammar.evaluate("1/3+x+sin(x*x)", x), 1 / 3 + x + np.sin(x * x))
    np.testing.assert_allclose(grammar.evaluate("x/2/x", x), x / 2 / x)
    np.testing.assert_allclose(grammar.evaluate("exp(sin(x))*3", x), np.exp(np.sin(x)) * 3)
    with pytest.raises(ValueError, match="not a sentence"):
        grammar.evaluate("x+")


def test_objective_values():
    assert grammar.objective(grammar.TARGET) == 0.0
    assert grammar.objective("1/3+x+sin(x*x)   ") == 0.0
    assert math.isnan(grammar.objective("x+"))
    # overflow of exp(exp(exp(x))) caps the MSE at 1000
    assert grammar.objective("exp(exp(exp(x)))") == pytest.approx(-math.log(1001))
    grid = np.linspace(-10, 10, 1000)
    mse = np.mean((grid - (1 / 3 + grid + np.sin(grid * grid))) ** 2)
    assert grammar.objective("x") == pytest.approx(-math.log1p(mse))


def test_encode_decode_round_trip_and_errors():
    exprs = ["sin(x)+1", "x", "1/3+x+sin(x*x)"]
    ids = grammar.encode(exprs)
    assert ids.shape == (3, grammar.MAX_LENGTH) and ids.dtype == np.int64
    assert grammar.decode(ids) == exprs
    with pytest.raises(ValueError, match="longer than max_length"):
        grammar.encode(["x+" * 10 + "x"])
    with pytest.raises(ValueError, match="outside VOCAB"):
        grammar.encode(["x-1"])
    with pytest.raises(ValueError, match="empty"):
        grammar.encode([])
    with pytest.raises(
        TypeError, match=r"expressions must be a list of strings, got the single string 'x\+1'"
    ):
        grammar.encode("x+1")
    with pytest.raises(TypeError, match="expressions must hold strings, got int"):
        grammar.encode(["x", 1])
    with pytest.raises(ValueError, match=r"shape \(N, L\)"):
        grammar.decode(np.zeros(3, dtype=int))
    with pytest.raises(ValueError, match="must lie in"):
        grammar.decode(np.full((1, 3), 15))
    with pytest.raises(ValueError, match="positive integer"):
        grammar.sample_expressions(0)
