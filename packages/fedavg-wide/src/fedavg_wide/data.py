"""Data for FedAvg experiments: partitioners (IID, Dirichlet label skew, pathological
k-classes-per-client) and the bundled datasets (scikit-learn's digits, a synthetic
regression).

Partitioners take the labels and return one index array per client; every sample lands in
exactly one client. They work on any labels (ints or strings), so a user's own dataset is
split the same way; :func:`make_clients` turns the indices into ``(X, y)`` pairs for
:func:`~fedavg_wide.FedAvg`.
"""

from __future__ import annotations

import numpy as np
import torch

from icml25_core import as_float_array, check_scalar

__all__ = [
    "dirichlet_partition",
    "iid_partition",
    "load_digits",
    "make_clients",
    "pathological_partition",
    "synthetic_regression",
]


def _labels(labels) -> tuple[np.ndarray, np.ndarray]:
    arr = np.asarray(labels)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"labels must be a non-empty 1-D array, got shape {arr.shape}")
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise ValueError("labels must not hold NaN or infinite values (a NaN is not a class)")
    classes, codes = np.unique(arr, return_inverse=True)
    return classes, codes


def _check_clients(n_clients: int, n: int) -> None:
    check_scalar(n_clients, "n_clients", low=1, integer=True)
    if n_clients > n:
        raise ValueError(f"n_clients={n_clients} exceeds the {n} samples: a client would be empty")


def iid_partition(labels, n_clients: int, *, seed: int = 0) -> list[np.ndarray]:
    """A uniformly random split into ``n_clients`` parts of equal size (+-1)."""
    _, codes = _labels(labels)
    _check_clients(n_clients, len(codes))
    perm = np.random.default_rng(seed).permutation(len(codes))
    return [np.sort(part) for part in np.array_split(perm, n_clients)]


def dirichlet_partition(
    labels, n_clients: int, alpha: float, *, seed: int = 0, min_size: int = 1
) -> list[np.ndarray]:
    """Label skew: for every class, the shares of its samples across clients are drawn from
    ``Dirichlet(alpha, ..., alpha)`` (Hsu et al. 2019). Small ``alpha`` (0.1) gives clients
    dominated by one or two classes; large ``alpha`` approaches IID.

    Draws are repeated (up to 1000 times) until every client holds at least ``min_size``
    samples, the usual rule (FedML, Flower Datasets' ``DirichletPartitioner``).
    """
    check_scalar(alpha, "alpha", low=0.0, low_inclusive=False)
    check_scalar(min_size, "min_size", low=1, integer=True)
    classes, codes = _labels(labels)
    _check_clients(n_clients, len(codes))
    if n_clients * min_size > len(codes):
        raise ValueError(
            f"n_clients x min_size = {n_clients * min_size} exceeds the {len(codes)} samples"
        )
    rng = np.random.default_rng(seed)
    for _ in range(1000):
        parts: list[list[int]] = [[] for _ in range(n_clients)]
        for c in range(len(classes)):
            idx = rng.permutation(np.flatnonzero(codes == c))
            shares = rng.dirichlet(np.full(n_clients, alpha))
            cuts = (np.cumsum(shares)[:-1] * len(idx)).astype(int)
            for client, chunk in enumerate(np.split(idx, cuts)):
                parts[client].extend(chunk.tolist())
        if min(len(p) for p in parts) >= min_size:
            return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]
    raise ValueError(
        f"no Dirichlet(alpha={alpha}) draw in 1000 gave every client {min_size} samples; "
        "raise alpha or lower n_clients"
    )


def pathological_partition(
    labels, n_clients: int, classes_per_client: int, *, seed: int = 0
) -> list[np.ndarray]:
    """McMahan et al.'s pathological non-IID split: each client sees only
    ``classes_per_client`` classes.

    The classes are dealt round-robin: client ``m`` gets classes ``(m k + j) mod C`` for
    ``j < k`` (``k = classes_per_client``, ``C`` classes), and each class's samples are
    split evenly among the clients holding it. With 2 classes, 10 clients and ``k = 1``
    that is the paper's split: 5 clients with only the first class, 5 with only the second.
    """
    classes, codes = _labels(labels)
    _check_clients(n_clients, len(codes))
    check_scalar(classes_per_client, "classes_per_client", low=1, integer=True)
    n_classes = len(classes)
    if classes_per_client > n_classes:
        raise ValueError(f"classes_per_client={classes_per_client} exceeds the {n_classes} classes")
    holders: list[list[int]] = [[] for _ in range(n_classes)]
    for m in range(n_clients):
        for j in range(classes_per_client):
            holders[(m * classes_per_client + j) % n_classes].append(m)
    missing = [str(classes[c]) for c in range(n_classes) if not holders[c]]
    if missing:
        raise ValueError(
            f"n_clients x classes_per_client = {n_clients * classes_per_client} leaves "
            f"classes {missing} with no client"
        )
    rng = np.random.default_rng(seed)
    parts: list[list[int]] = [[] for _ in range(n_clients)]
    for c in range(n_classes):
        idx = rng.permutation(np.flatnonzero(codes == c))
        if len(idx) < len(holders[c]):
            raise ValueError(
                f"class {classes[c]!r} has {len(idx)} samples for {len(holders[c])} clients"
            )
        for m, chunk in zip(holders[c], np.array_split(idx, len(holders[c])), strict=True):
            parts[m].extend(chunk.tolist())
    return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]


def make_clients(X, y, parts, *, dtype: torch.dtype = torch.float32):
    """``[(X[idx], y[idx]) for idx in parts]`` as tensors (``X`` in ``dtype``; ``y`` kept
    integer if it is integer, else ``dtype``), refusing an empty part."""
    X = torch.as_tensor(as_float_array(X, "X"), dtype=dtype)
    y_arr = np.asarray(y)
    if len(y_arr) != len(X):
        raise ValueError(f"X and y must have the same length, got {len(X)} and {len(y_arr)}")
    y = (
        torch.as_tensor(y_arr)
        if np.issubdtype(y_arr.dtype, np.integer)
        else torch.as_tensor(as_float_array(y_arr, "y"), dtype=dtype)
    )
    out = []
    for m, idx in enumerate(parts):
        idx = np.asarray(idx)
        if idx.size == 0:
            raise ValueError(f"parts[{m}] is empty: every client needs at least one sample")
        if idx.ndim != 1 or idx.dtype.kind not in "iu":
            raise ValueError(
                f"parts[{m}] must be a 1-D array of integer sample indices, got "
                f"{idx.dtype} of shape {idx.shape}"
            )
        if idx.min() < 0 or idx.max() >= len(X):
            raise ValueError(
                f"parts[{m}] must hold indices in [0, {len(X)}), got {idx.min()}..{idx.max()}"
            )
        out.append((X[idx], y[idx]))
    return out


def load_digits(
    *, binary: bool = False, test_size: float = 0.25, seed: int = 0, dtype=torch.float32
):
    """scikit-learn's 8x8 digits (bundled with scikit-learn: no download), pixels scaled to
    [0, 1] and flattened to 64 features; a stratified train/test split.

    Parameters
    ----------
    binary : bool
        Only the digits 0 and 1 (the paper's "mini-MNIST", 360 images) with targets
        ``-1`` (digit 0) / ``+1`` (digit 1) as float column vectors for MSE regression on
        a one-output network; otherwise the 10 classes (1797 images) as integer labels.
    test_size : float
        Fraction held out.

    Returns
    -------
    (X_train, y_train, X_test, y_test) : torch.Tensor
        ``X`` of shape ``(n, 64)``; ``y`` of shape ``(n, 1)`` (binary) or ``(n,)`` int64.
    """
    from sklearn.datasets import load_digits as sk_digits
    from sklearn.model_selection import train_test_split

    check_scalar(
        test_size, "test_size", low=0.0, high=1.0, low_inclusive=False, high_inclusive=False
    )
    X, labels = sk_digits(return_X_y=True)
    if binary:
        keep = labels < 2
        X, labels = X[keep], labels[keep]
    X = X / 16.0
    Xa, Xb, ya, yb = train_test_split(
        X, labels, test_size=test_size, random_state=seed, stratify=labels
    )

    def target(lab):
        if binary:
            return torch.as_tensor(2.0 * lab - 1.0, dtype=dtype).reshape(-1, 1)
        return torch.as_tensor(lab, dtype=torch.int64)

    return (
        torch.as_tensor(Xa, dtype=dtype),
        target(ya),
        torch.as_tensor(Xb, dtype=dtype),
        target(yb),
    )


def synthetic_regression(
    n: int = 400,
    d: int = 16,
    *,
    noise: float = 0.1,
    n_groups: int = 4,
    seed: int = 0,
    dtype=torch.float32,
):
    """A nonlinear regression task with a group label for partitioning.

    Inputs ``x ~ N(mu_g, I)`` around ``n_groups`` random group means (so a
    :func:`pathological_partition` or :func:`dirichlet_partition` on the group label gives
    covariate-skewed clients); target ``y = sin(w . x) + noise N(0, 1)`` with a fixed random
    unit ``w``.

    Returns
    -------
    X : torch.Tensor, shape (n, d)
    y : torch.Tensor, shape (n, 1)
    groups : numpy.ndarray, shape (n,)
    """
    check_scalar(n, "n", low=1, integer=True)
    check_scalar(d, "d", low=1, integer=True)
    check_scalar(noise, "noise", low=0.0)
    check_scalar(n_groups, "n_groups", low=1, integer=True)
    rng = np.random.default_rng(seed)
    means = 1.5 * rng.standard_normal((n_groups, d))
    groups = rng.integers(0, n_groups, n)
    X = means[groups] + rng.standard_normal((n, d))
    w = rng.standard_normal(d)
    w /= np.linalg.norm(w)
    y = np.sin(X @ w) + noise * rng.standard_normal(n)
    return (
        torch.as_tensor(X, dtype=dtype),
        torch.as_tensor(y, dtype=dtype).reshape(-1, 1),
        groups,
    )
