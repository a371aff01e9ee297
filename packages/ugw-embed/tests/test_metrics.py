import numpy as np
import pytest

from ugw_embed import distortion, embedded_wasserstein, foscttm


def test_foscttm_known_values():
    E = np.arange(10.0)[:, None]
    assert foscttm(E, E) == 0.0
    # worked by hand, ties counting as failures: from E1, sample 1 (at 1, true match at 2)
    # has an impostor at 1 (closer) and one at 0 (a tie): 2/2; sample 2 one closer: 1/2;
    # from E2 the same by symmetry: (0 + 1 + 1/2) / 3 both ways
    assert foscttm([[0.0], [1.0], [2.0]], [[0.0], [2.0], [1.0]]) == pytest.approx(1 / 2)
    # no ties: from E1, samples 1 and 2 have one closer impostor each (0 + 1/2 + 1/2) / 3;
    # from E2, sample 2 (at 1.2, true match at 3) has both others closer (0 + 0 + 1) / 3
    assert foscttm([[0.0], [1.0], [3.0]], [[0.0], [1.9], [1.2]]) == pytest.approx(1 / 3)


def test_foscttm_counts_ties_so_a_collapse_is_not_perfect():
    E = np.zeros((5, 2))
    assert foscttm(E, E) == 1.0  # everything ties with the true match
    # only view 2 collapsed: from E1 every candidate ties (1); from E2, sample j's true
    # match is at distance j and j others are as close: j / 4, mean 1/2
    assert foscttm(np.arange(5.0)[:, None], np.zeros((5, 1))) == pytest.approx(0.75)


def test_foscttm_of_a_random_matching_is_one_half():
    rng = np.random.default_rng(0)
    E = rng.random((300, 2))
    assert foscttm(E, E[rng.permutation(300)]) == pytest.approx(0.5, abs=0.05)


def test_foscttm_shape_errors():
    with pytest.raises(ValueError, match=r"E2 must have shape \(3, 2\)"):
        foscttm(np.ones((3, 2)), np.ones((4, 2)))


def test_embedded_wasserstein_of_a_translation():
    rng = np.random.default_rng(0)
    E = rng.random((20, 2))
    assert embedded_wasserstein(E, E) == pytest.approx(0.0, abs=1e-12)
    assert embedded_wasserstein(E, E + np.array([3.0, 4.0])) == pytest.approx(5.0, rel=1e-9)


def test_distortion_is_zero_for_similarities():
    rng = np.random.default_rng(1)
    X = rng.random((15, 3))
    D = np.linalg.norm(X[:, None] - X[None], axis=-1)
    R = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    assert distortion(D, 2.5 * X @ R) == pytest.approx(0.0, abs=1e-12)
    assert distortion(D, rng.random((15, 3))) > 0.2


def test_an_unknown_metric_is_named():
    E = np.eye(3)
    with pytest.raises(ValueError, match=r"metric must be a scipy.*got 'evil'"):
        foscttm(E, E, metric="evil")
    with pytest.raises(ValueError, match=r"metric must be a scipy.*got 'evil'"):
        embedded_wasserstein(E, E, metric="evil")
    assert foscttm(E, E, metric="cityblock") == 0.0
