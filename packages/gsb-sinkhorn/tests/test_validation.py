"""Bad input gets a clear ValueError naming the argument."""

import math

import numpy as np
import pytest

from gsb_sinkhorn import Divergence, random_bipartite_graph, sinkhorn

A = np.array([0.5, 0.5])
B = np.array([0.25, 0.75])
C = np.array([[0.0, 1.0], [1.0, 0.0]])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"a": np.array([-0.5, 1.5])}, "a must be non-negative"),
        ({"b": np.array([np.nan, 1.0])}, "b must be finite"),
        ({"M": np.array([[0.0, np.inf], [1.0, 0.0]])}, "M must be finite"),
        ({"b": np.array([0.5, 0.6])}, r"same total mass: sum\(a\) = 1.0, sum\(b\) = 1.1"),
        ({"b": np.array([0.2, 0.3, 0.5])}, r"b must have shape \(2,\)"),
        ({"M": np.ones(4)}, "M must be 2-dimensional"),
        ({"reg": 0.0}, "reg must be > 0"),
        ({"reg": -1.0}, "reg must be > 0"),
        ({"stopThr": 0.0}, "stopThr must be > 0"),
        ({"divergence": "hellinger"}, "divergence must be one of"),
        ({"R": -np.ones((2, 2))}, "R must be non-negative"),
        ({"a": np.zeros(2), "b": np.zeros(2)}, "positive total mass"),
    ],
)
def test_bad_input(kwargs, match):
    args = {"a": A, "b": B, "M": C} | kwargs
    with pytest.raises(ValueError, match=match):
        sinkhorn(**args)


def test_max_iter_must_be_integer():
    with pytest.raises(TypeError, match="numItermax must be an integer"):
        sinkhorn(A, B, C, numItermax=10.5)


def test_the_0_1_argument_order_gets_a_clear_error():
    with pytest.raises(
        TypeError, match=r"arguments follow POT, sinkhorn\(a, b, M, reg, divergence\)"
    ):
        sinkhorn(A, B, C, "logistic")


def test_logistic_marginal_above_reachable_is_infeasible():
    # each entry is below 1, so a row sum of 2 over 2 columns cannot be reached
    with pytest.raises(
        ValueError, match=r"a\[0\] = 2.0 is not below its largest reachable value 2.0"
    ):
        sinkhorn(np.array([2.0, 0.5]), np.array([1.25, 1.25]), np.zeros((2, 2)), 1.0, "logistic")


def test_reference_disconnecting_a_row_is_infeasible():
    R = np.array([[0.0, 0.0], [1.0, 1.0]])
    with pytest.raises(ValueError, match=r"a\[0\] > 0 but R has no positive entry"):
        sinkhorn(A, B, C, R=R)


def test_psi_not_increasing_is_rejected():
    with pytest.raises(ValueError, match="strictly increasing"):
        Divergence("bad", psi=lambda t: -np.exp(t), dpsi=lambda t: np.exp(t))


def test_wrong_derivative_is_rejected():
    with pytest.raises(ValueError, match="does not match the derivative"):
        Divergence("bad", psi=np.exp, dpsi=lambda t: 2 * np.exp(t))


def test_bad_domain_is_rejected():
    with pytest.raises(ValueError, match="domain must be an interval"):
        Divergence("bad", psi=np.exp, dpsi=np.exp, domain=(1.0, -1.0))


def test_infeasible_degree_sequence():
    # row degree 3 needs 3 columns with an edge, but only 2 columns have positive degree
    with pytest.raises(ValueError, match="Gale-Ryser"):
        random_bipartite_graph([3, 1], [2, 2, 0])


def test_degree_above_other_side_size():
    with pytest.raises(ValueError, match="row_degrees must be at most the number of columns 2"):
        random_bipartite_graph([3, 1], [2, 2])


def test_unequal_degree_sums():
    with pytest.raises(ValueError, match="equal sums"):
        random_bipartite_graph([1, 1], [1, 2])


def test_degenerate_domain_is_rejected():
    with pytest.raises(ValueError, match="domain"):
        Divergence("bad", psi=lambda t: -1 / t, dpsi=lambda t: 1 / t**2, domain=(0.0, 0.0))
    assert math.isinf(Divergence("ok", psi=np.exp, dpsi=np.exp).domain[1])


def test_inconsistent_psi_dpsi_is_rejected():
    with pytest.raises(ValueError, match=r"psi_dpsi .* must return \(psi\(t\), dpsi\(t\)\)"):
        Divergence("bad", psi=np.exp, dpsi=np.exp, psi_dpsi=lambda t: (np.exp(t), 2 * np.exp(t)))


@pytest.mark.parametrize(
    ("fn", "args", "match"),
    [
        ("marginal_error", (np.array([[np.nan, 0.5], [0.25, 0.25]]), A, B), "plan must be finite"),
        ("marginal_error", (np.full((2, 2), 0.25), np.array([np.inf, 0.5]), B), "a must be finite"),
        ("primal_objective", (np.array([[np.nan, 0.5], [0.25, 0.25]]), C), "plan must be finite"),
        ("primal_objective", (-np.full((2, 2), 0.25), C), "plan must be non-negative"),
        ("primal_objective", (np.full((2, 2), 0.25), np.ones((3, 3))), r"C must have shape"),
    ],
)
def test_objectives_refuse_a_nan_plan(fn, args, match):
    import gsb_sinkhorn

    with pytest.raises(ValueError, match=match):
        getattr(gsb_sinkhorn, fn)(*args)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"M": C.astype(complex)}, TypeError, "M must be real, got dtype complex128"),
        ({"a": A + 0j}, TypeError, "a must be real"),
        ({"M": np.array([["0", "1"], ["1", "0"]])}, TypeError, "M must be numeric"),
        ({"a": np.array([True, True])}, TypeError, "a must be numeric"),
        ({"M": C.astype(np.float16)}, TypeError, "M must be float32 or float64, got float16"),
    ],
)
def test_inputs_a_cast_would_corrupt_are_refused(kwargs, error, match):
    args = {"a": A, "b": B, "M": C} | kwargs
    with pytest.raises(error, match=match):
        sinkhorn(**args)


def test_pandas_inputs_are_arrays():
    pd = pytest.importorskip("pandas")
    want = sinkhorn(A, B, C, 0.5)
    got = sinkhorn(pd.Series(A), pd.Series(B), pd.DataFrame(C), 0.5)
    np.testing.assert_array_equal(got, want)


def test_divergence_names_ignore_case():
    from gsb_sinkhorn import get_divergence

    assert get_divergence("KL") is get_divergence("kl")
    np.testing.assert_array_equal(
        sinkhorn(A, B, C, 0.5, "Logistic"), sinkhorn(A, B, C, 0.5, "logistic")
    )


def test_dual_objective_checks_the_potentials():
    from gsb_sinkhorn import dual_objective

    with pytest.raises(ValueError, match=r"f must have shape \(2,\), got \(3,\)"):
        dual_objective(A, B, C, np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match=r"g must have shape \(2,\)"):
        dual_objective(A, B, C, np.zeros(2), np.zeros((2, 1)))
    with pytest.raises(TypeError, match="f must be real"):
        dual_objective(A, B, C, np.zeros(2, complex), np.zeros(2))


@pytest.mark.parametrize(
    ("seed", "error", "match"),
    [("abc", TypeError, "seed must be None, a non-negative integer"), (-1, ValueError, "seed")],
)
def test_bad_seeds_are_named(seed, error, match):
    from gsb_sinkhorn import random_contingency_table

    with pytest.raises(error, match=match):
        random_bipartite_graph([1, 1], [1, 1], seed=seed)
    with pytest.raises(error, match=match):
        random_contingency_table([2, 1], [1, 2], seed=seed)
