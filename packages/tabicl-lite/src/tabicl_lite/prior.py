"""The pretraining prior: classification tables drawn from random structural causal models.

A table comes from an MLP-SCM (probability ``p_mlp``, 0.7 in the paper) or a tree-SCM:
root causes pass through a random network of ``depth`` layers; features and the target
are read off randomly chosen nodes of that network, so some features are causes of the
target, some effects, some unrelated. The MLP-SCM uses random linear maps (with dropout
of connections) and random activations; the tree-SCM replaces each layer by a
scikit-learn tree ensemble fitted to random Gaussian targets. Gaussian noise is added at
every node. The continuous target becomes classes by value (equal-width thresholds) or
by rank (random quantiles); a fraction of features is made categorical (quantile bins
with shuffled codes); features and class labels are permuted; optionally some values are
masked as missing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.ensemble import ExtraTreesRegressor

from icml25_core import as_generator

ACTIVATIONS = {
    "tanh": np.tanh,
    "relu": lambda z: np.maximum(z, 0.0),
    "leaky_relu": lambda z: np.where(z > 0, z, 0.1 * z),
    "sigmoid": lambda z: 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30))),
    "sin": np.sin,
    "abs": np.abs,
    "square": lambda z: np.clip(z, -5, 5) ** 2,
    "identity": lambda z: z,
    "step": lambda z: (z > 0).astype(float),
    "softplus": lambda z: np.logaddexp(0.0, z),
}


@dataclass(frozen=True)
class PriorConfig:
    """Ranges of the SCM prior.

    Attributes
    ----------
    p_mlp : float
        Probability of an MLP-SCM (else tree-SCM).
    depth : tuple of int
        Inclusive range of network depth.
    width : tuple of int
        Inclusive range of hidden width (raised so that every feature has a node).
    noise : tuple of float
        Log-uniform range of the per-node noise std.
    p_target_last : float
        Probability that the target is read from the last layer (an effect of all causes);
        otherwise from any node.
    max_causes : int
        Root causes are drawn from ``[1, max_causes]``.
    p_clique : float
        Probability that the features are a contiguous block of nodes next to the target
        (neighbours in the network) rather than nodes anywhere.
    p_categorical : float
        Expected fraction of categorical features.
    max_categories : int
        Categories per categorical feature are drawn from ``[2, max_categories]``.
    p_missing : float
        Probability that a table has missing values (then 1-10 % of its entries).
    tree_fit_rows : int
        Rows a tree-SCM layer is fitted on (it predicts on all rows).
    """

    p_mlp: float = 0.7
    depth: tuple[int, int] = (1, 4)
    width: tuple[int, int] = (4, 32)
    noise: tuple[float, float] = (1e-4, 0.05)
    p_target_last: float = 0.7
    max_causes: int = 8
    p_clique: float = 0.5
    p_categorical: float = 0.2
    max_categories: int = 10
    p_missing: float = 0.1
    tree_fit_rows: int = 256

    def __post_init__(self):
        if not 0.0 <= self.p_mlp <= 1.0:
            raise ValueError(f"p_mlp must be in [0, 1], got {self.p_mlp}")
        if not 1 <= self.depth[0] <= self.depth[1]:
            raise ValueError(f"depth must be an increasing range >= 1, got {self.depth}")


def _causes(rng: np.random.Generator, n_rows: int, n_causes: int) -> np.ndarray:
    kind = rng.integers(3)
    if kind == 0:
        return rng.standard_normal((n_rows, n_causes))
    if kind == 1:
        return rng.uniform(-1.7, 1.7, (n_rows, n_causes))
    scale = rng.uniform(0.3, 2.0, n_causes)
    mixed = rng.standard_normal((n_rows, n_causes)) * scale
    heavy = rng.random(n_causes) < 0.3
    mixed[:, heavy] = rng.standard_t(3, (n_rows, int(heavy.sum())))
    return mixed


def _mlp_layer(rng: np.random.Generator, h: np.ndarray, width: int) -> np.ndarray:
    w = rng.standard_normal((h.shape[1], width)) / np.sqrt(h.shape[1])
    keep = rng.random(w.shape) >= rng.uniform(0.0, 0.6)
    w = w * keep / max(keep.mean(), 1e-3)
    act = ACTIVATIONS[list(ACTIVATIONS)[rng.integers(len(ACTIVATIONS))]]
    return act(h @ w + rng.standard_normal(width) * 0.5)


def _tree_layer(rng: np.random.Generator, h: np.ndarray, width: int, fit_rows: int) -> np.ndarray:
    idx = rng.choice(h.shape[0], size=min(fit_rows, h.shape[0]), replace=False)
    trees = ExtraTreesRegressor(
        n_estimators=int(rng.integers(1, 5)),
        max_depth=int(rng.integers(2, 7)),
        max_features=float(rng.uniform(0.3, 1.0)),
        random_state=int(rng.integers(2**31)),
    )
    trees.fit(h[idx], rng.standard_normal((idx.size, width)))
    return trees.predict(h).reshape(h.shape[0], width)


def _to_classes(rng: np.random.Generator, target: np.ndarray, n_classes: int) -> np.ndarray:
    if rng.random() < 0.5:  # by value: equal-width thresholds over the central range
        lo, hi = np.quantile(target, [0.02, 0.98])
        cuts = np.linspace(lo, hi, n_classes + 1)[1:-1]
    else:  # by rank: random class proportions
        cuts = np.quantile(target, np.sort(rng.uniform(0.0, 1.0, n_classes - 1)))
    labels = np.searchsorted(cuts, target)
    return rng.permutation(n_classes)[labels]


def _categorize(rng: np.random.Generator, col: np.ndarray, max_categories: int) -> np.ndarray:
    k = int(rng.integers(2, max_categories + 1))
    cuts = np.quantile(col, np.sort(rng.uniform(0, 1, k - 1)))
    return rng.permutation(k)[np.searchsorted(cuts, col)].astype(float)


def sample_table(
    rng: np.random.Generator | int,
    n_rows: int,
    n_features: int,
    n_classes: int,
    config: PriorConfig | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw one classification table from the SCM prior.

    Parameters
    ----------
    rng : numpy.random.Generator or int
        The random stream (continued), or a seed for a new one.
    n_rows, n_features, n_classes : int
    config : PriorConfig, optional

    Returns
    -------
    X : ndarray, shape (n_rows, n_features), float32 (NaN where missing)
    y : ndarray, shape (n_rows,), int64 in ``[0, n_classes)``
    """
    rng = as_generator(rng, "rng")
    cfg = config or PriorConfig()
    if n_rows < 2 or n_features < 1 or n_classes < 2:
        raise ValueError(
            f"need n_rows >= 2, n_features >= 1, n_classes >= 2; got {n_rows}, {n_features}, "
            f"{n_classes}"
        )
    mlp = rng.random() < cfg.p_mlp
    depth = int(rng.integers(cfg.depth[0], cfg.depth[1] + 1))
    width = max(int(rng.integers(cfg.width[0], cfg.width[1] + 1)), -(-(n_features + 2) // depth))
    if not mlp:
        width = min(width, 16 + -(-(n_features + 2) // depth))  # trees: keep fitting cheap
    noise = float(np.exp(rng.uniform(*np.log(cfg.noise))))
    h = _causes(rng, n_rows, int(rng.integers(1, cfg.max_causes + 1)))
    nodes = []
    for _ in range(depth):
        h = _mlp_layer(rng, h, width) if mlp else _tree_layer(rng, h, width, cfg.tree_fit_rows)
        h = h + noise * rng.standard_normal(h.shape)
        nodes.append(h)
    nodes = np.concatenate(nodes, axis=1)
    # the target is an effect of the last layer or any node; features are other nodes
    last = rng.random() < cfg.p_target_last
    t = nodes.shape[1] - 1 - int(rng.integers(width)) if last else int(rng.integers(nodes.shape[1]))
    others = np.delete(np.arange(nodes.shape[1]), t)
    if rng.random() < cfg.p_clique:  # the n_features nodes nearest to the target
        picked = others[np.argsort(np.abs(others - t), kind="stable")[:n_features]]
    else:
        picked = rng.choice(others, size=n_features, replace=False)
    target = nodes[:, t]
    X = nodes[:, rng.permutation(picked)].copy()
    y = _to_classes(rng, target, n_classes)
    for j in np.flatnonzero(rng.random(n_features) < cfg.p_categorical):
        X[:, j] = _categorize(rng, X[:, j], cfg.max_categories)
    if rng.random() < cfg.p_missing:
        X[rng.random(X.shape) < rng.uniform(0.01, 0.1)] = np.nan
    return X.astype(np.float32), y.astype(np.int64)


def sample_batch(
    rng: np.random.Generator,
    batch_size: int,
    n_rows: int,
    n_features: int,
    n_train: int,
    max_classes: int = 10,
    config: PriorConfig | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A batch of tables of one shape, each with every class present among its training rows.

    Returns
    -------
    X : ndarray, shape (batch_size, n_rows, n_features)
    y : ndarray, shape (batch_size, n_rows)
    n_classes : ndarray, shape (batch_size,)
    """
    if not 0 < n_train < n_rows:
        raise ValueError(f"need 0 < n_train < n_rows, got n_train={n_train}, n_rows={n_rows}")
    Xs, ys, ks = [], [], []
    while len(Xs) < batch_size:
        k = int(rng.integers(2, max_classes + 1))
        X, y = sample_table(rng, n_rows, n_features, k, config)
        present = np.unique(y[:n_train])
        if present.size < 2:
            continue
        # relabel to the classes seen in training; drop test rows of unseen classes by
        # giving them the -100 ignore label of cross-entropy
        remap = np.full(k, -100)
        remap[present] = rng.permutation(present.size)
        Xs.append(X)
        ys.append(remap[y])
        ks.append(present.size)
    return np.stack(Xs), np.stack(ys), np.asarray(ks)
