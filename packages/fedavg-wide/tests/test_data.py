"""Partitioners keep every sample exactly once with the stated skew; the bundled data."""

import numpy as np
import pytest
import torch

from fedavg_wide import (
    dirichlet_partition,
    iid_partition,
    load_digits,
    make_clients,
    pathological_partition,
    synthetic_regression,
)

LABELS = np.repeat(np.arange(10), [50, 60, 40, 55, 45, 50, 52, 48, 58, 42])


def _exactly_once(parts, n):
    joined = np.concatenate(parts)
    assert len(joined) == n and np.array_equal(np.sort(joined), np.arange(n))


def _classes_per_client(parts):
    return [len(np.unique(LABELS[p])) for p in parts]


def test_iid_keeps_every_sample_once_in_equal_parts():
    parts = iid_partition(LABELS, 7, seed=0)
    _exactly_once(parts, len(LABELS))
    assert max(map(len, parts)) - min(map(len, parts)) <= 1


def test_pathological_gives_each_client_exactly_k_classes_and_splits_a_class_evenly():
    parts = pathological_partition(LABELS, 10, 2, seed=0)
    _exactly_once(parts, len(LABELS))
    assert _classes_per_client(parts) == [2] * 10
    # the paper's split: 2 classes, 10 clients, one class each -> 5 + 5
    binary = np.repeat([0, 1], [178, 182])
    parts = pathological_partition(binary, 10, 1, seed=0)
    _exactly_once(parts, 360)
    owners = [int(binary[p][0]) for p in parts]
    assert sorted(owners) == [0] * 5 + [1] * 5
    assert all(len(np.unique(binary[p])) == 1 for p in parts)
    with pytest.raises(ValueError, match="no client"):
        pathological_partition(LABELS, 3, 2)
    with pytest.raises(ValueError, match="classes_per_client"):
        pathological_partition(LABELS, 3, 11)


def test_dirichlet_skew_grows_as_alpha_falls():
    skew = {}
    for alpha in (0.05, 1.0, 100.0):
        parts = dirichlet_partition(LABELS, 10, alpha, seed=0)
        _exactly_once(parts, len(LABELS))
        assert min(map(len, parts)) >= 1
        # mean total-variation distance of each client's label mix from the global one
        glob = np.bincount(LABELS, minlength=10) / len(LABELS)
        tv = [
            0.5 * np.abs(np.bincount(LABELS[p], minlength=10) / len(p) - glob).sum() for p in parts
        ]
        skew[alpha] = float(np.mean(tv))
    assert skew[0.05] > 0.6 > skew[1.0] > skew[100.0]
    assert skew[100.0] < 0.15
    assert np.mean(_classes_per_client(dirichlet_partition(LABELS, 10, 0.05, seed=0))) < 4
    with pytest.raises(ValueError, match="alpha"):
        dirichlet_partition(LABELS, 10, 0.0)
    with pytest.raises(ValueError, match="alpha"):
        dirichlet_partition(LABELS, 10, -1.0)


def test_partitioner_errors():
    with pytest.raises(ValueError, match="n_clients"):
        iid_partition(LABELS, 0)
    with pytest.raises(ValueError, match="exceeds"):
        iid_partition(LABELS[:3], 4)
    with pytest.raises(ValueError, match="1-D"):
        iid_partition(np.zeros((3, 2)), 2)
    with pytest.raises(ValueError, match="empty"):
        make_clients(np.zeros((4, 2)), np.zeros(4, dtype=int), [np.arange(4), np.array([], int)])
    X, y = np.zeros((4, 2)), np.zeros(4, dtype=int)
    with pytest.raises(ValueError, match=r"parts\[0\] must hold indices in \[0, 4\), got -1\.\.1"):
        make_clients(X, y, [np.array([-1, 1])])
    with pytest.raises(
        ValueError, match=r"parts\[1\] must be a 1-D array of integer sample indices"
    ):
        make_clients(X, y, [np.arange(2), np.array([0.5, 1.0])])
    with pytest.raises(ValueError, match="labels must not hold NaN"):
        dirichlet_partition(np.array([0.0, 1.0, np.nan, 1.0]), 2, 1.0)


def test_settings_refuse_impossible_values():
    from fedavg_wide import Settings

    for field, value in {"depth": 0, "classes_per_client": 0, "alpha": -1.0, "seed": -1}.items():
        with pytest.raises(ValueError, match=field):
            Settings(**{field: value})


def test_bundled_data_shapes_and_targets():
    Xa, ya, Xb, yb = load_digits(binary=True)
    assert Xa.shape[1] == 64 and ya.shape == (len(Xa), 1) and len(Xa) + len(Xb) == 360
    assert set(torch.unique(ya).tolist()) == {-1.0, 1.0} and float(Xa.max()) <= 1.0
    Xa, ya, Xb, yb = load_digits()
    assert len(Xa) + len(Xb) == 1797 and ya.dtype == torch.int64 and len(torch.unique(yb)) == 10
    X, y, groups = synthetic_regression(n=100, d=4, seed=1)
    assert X.shape == (100, 4) and y.shape == (100, 1) and set(groups) <= {0, 1, 2, 3}
    clients = make_clients(X, y.numpy(), iid_partition(groups, 3))
    assert sum(len(c[0]) for c in clients) == 100 and clients[0][1].dtype == torch.float32
