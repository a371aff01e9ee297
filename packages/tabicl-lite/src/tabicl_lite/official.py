"""The official TabICL classifiers' preprocessing and ensemble: ``tabicl`` 0.1.4 (v1
checkpoints) and 2.2.0 (v2 checkpoints).

What the official checkpoints were trained to read, per ensemble member:

1. missing numeric values imputed with the training mean; columns constant on the
   training rows dropped;
2. standard scaling (training mean, ``std`` with ddof 0 plus ``1e-6``), clipped at ±100;
3. a normaliser fitted on the SCALED training rows: ``"none"``, ``"power"``
   (Yeo-Johnson, standardised), ``"quantile"`` (to a normal), ``"quantile_rtdl"``
   (quantiles of the rows with 1e-3 noise, then standardised) or ``"robust"``;
4. a two-pass outlier remover: bounds ``mean ± 4 std`` of the rows left after removing
   the first pass's outliers (ddof 1), applied as a SOFT clip
   ``x -> max(x, lower - log1p|x|)``, ``x -> min(x, upper + log1p|x|)``.

Members cross a random Latin square of feature orders with the class shifts, shuffled,
then with every normaliser; the first ``n_estimators`` are kept. The two official
versions draw the shifts differently (``generation``): 0.1.4 takes a random permutation
of the shift amounts and shuffles the pairs with the same ``random.Random(seed)``; 2.2.0
lists the shifts in order (pattern ``i`` relabels ``y`` as ``(y - i) mod K``) and shuffles
the pairs with a fresh ``random.Random(seed)``. The same seed gives each official's
orders and shifts exactly. Steps 1-4 are the same in both.
"""

from __future__ import annotations

import itertools
import random
import warnings
from collections.abc import Sequence

import numpy as np
from sklearn.preprocessing import (
    QuantileTransformer,
    RobustScaler,
    StandardScaler,
)

from .preprocessing import Member, power_transformer

OFFICIAL_NORM_METHODS = ("none", "power", "quantile", "quantile_rtdl", "robust")
SHUFFLE_METHODS = ("latin", "shift", "random", "none")
#: ensemble members the official classifier sends through the network at once (its
#: ``batch_size``); its column-embedding shortcut reorders members within such a batch
OFFICIAL_MEMBER_BATCH = 8
#: the official's largest feature count for a Latin square; above it orders are random
MAX_FEATURES_FOR_LATIN = 4000
#: standard-scaled values are clipped at ± this
SCALED_CLIP = 100.0


class QuantileRTDL:
    """Quantile transform of the training rows plus Gaussian noise (1e-3 over each
    column's std), ``max(min(n // 30, 1000), 10)`` quantiles, then standardised."""

    def __init__(self, random_state: int | None, noise: float = 1e-3):
        self.random_state = random_state
        self.noise = noise

    def fit(self, X: np.ndarray) -> QuantileRTDL:
        n_quantiles = max(min(X.shape[0] // 30, 1000), 10)
        std = np.std(X, axis=0, keepdims=True)
        noisy = X + self.noise / np.maximum(std, self.noise) * np.random.default_rng(
            self.random_state
        ).standard_normal(X.shape)
        self.quantile_ = QuantileTransformer(
            output_distribution="normal",
            n_quantiles=n_quantiles,
            subsample=1_000_000_000,
            random_state=self.random_state,
        ).fit(noisy)
        self.scaler_ = StandardScaler().fit(self.quantile_.transform(X))
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        return self.scaler_.transform(self.quantile_.transform(X))


def make_normalizer(method: str, random_state: int | None, progress: bool | None = None):
    """The official normaliser ``method`` (unfitted), ``None`` for ``"none"``; ``"power"`` is
    fitted in column blocks (the same fit, with a progress bar on wide tables)."""
    if method == "none":
        return None
    if method == "power":
        return power_transformer(progress)
    if method == "quantile":
        return QuantileTransformer(output_distribution="normal", random_state=random_state)
    if method == "quantile_rtdl":
        return QuantileRTDL(random_state)
    if method == "robust":
        return RobustScaler(unit_variance=True)
    raise ValueError(f"norm_methods entries must be in {OFFICIAL_NORM_METHODS}, got {method!r}")


class OfficialPipeline:
    """Scaler -> normaliser -> soft outlier clip of one normalisation (steps 2-4 above).

    Parameters
    ----------
    method : str
        One of :data:`OFFICIAL_NORM_METHODS`.
    outlier_threshold : float
        Bounds are ``mean ± outlier_threshold * std``.
    random_state : int or None
        Seeds the quantile normalisers.
    progress : bool or None
        Show a bar over the column blocks of a Yeo-Johnson fit; ``None``: on wide tables.
    """

    def __init__(
        self,
        method: str,
        outlier_threshold: float = 4.0,
        random_state=None,
        progress: bool | None = None,
    ):
        self.method = method
        self.outlier_threshold = outlier_threshold
        self.random_state = random_state
        self.progress = progress

    def fit_transform(self, X: np.ndarray) -> np.ndarray:
        """Fit on the training rows ``X`` (n, H) float64 without NaN; their transform."""
        self.mean_ = X.mean(axis=0)
        self.scale_ = X.std(axis=0) + 1e-6
        Z = self._scale(X)
        self.normalizer_ = make_normalizer(self.method, self.random_state, self.progress)
        if self.normalizer_ is not None:
            self.low_, self.high_ = Z.min(axis=0), Z.max(axis=0)
            with warnings.catch_warnings():
                # n_quantiles above the row count, Yeo-Johnson on a near-constant column
                warnings.simplefilter("ignore")
                Z = self.normalizer_.fit(Z).transform(Z)
        self._fit_bounds(Z)
        return self._soft_clip(Z)

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Transform rows ``X`` (m, H) float64 without NaN."""
        Z = self._scale(X)
        if self.normalizer_ is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    Z = self.normalizer_.transform(Z)
                except ValueError:  # as the official: a value the normaliser cannot map
                    Z = self.normalizer_.transform(np.clip(Z, self.low_, self.high_))
        return self._soft_clip(Z)

    def _scale(self, X: np.ndarray) -> np.ndarray:
        return np.clip((X - self.mean_) / self.scale_, -SCALED_CLIP, SCALED_CLIP)

    def _fit_bounds(self, Z: np.ndarray) -> None:
        ddof = 1 if Z.shape[0] > 1 else 0
        t = self.outlier_threshold
        mean, std = Z.mean(axis=0), np.maximum(Z.std(axis=0, ddof=ddof), 1e-6)
        clean = np.where((mean - t * std > Z) | (mean + t * std < Z), np.nan, Z)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all rows of a column removed
            mean = np.nanmean(clean, axis=0)
            std = np.maximum(np.nanstd(clean, axis=0, ddof=ddof), 1e-6)
        self.lower_, self.upper_ = mean - t * std, mean + t * std

    def _soft_clip(self, Z: np.ndarray) -> np.ndarray:
        Z = np.maximum(-np.log1p(np.abs(Z)) + self.lower_, Z)
        return np.minimum(np.log1p(np.abs(Z)) + self.upper_, Z)


def latin_square(n: int, rng: random.Random) -> list[list[int]]:
    """A random ``n x n`` Latin square of ``range(n)``, rows then columns shuffled, drawn
    with the official's sequence of ``rng`` calls (same seed, same square)."""
    symbols = list(range(n))
    picks = []
    while len(symbols) > 1:
        sym = rng.choice(symbols)
        symbols.remove(sym)
        picks.append(sym)
    square = [symbols]
    for sym in reversed(picks):  # grow the square by one symbol on the diagonal
        square.append(square[0].copy())
        for i, row in enumerate(square):
            row.insert(i, sym)
    rng.shuffle(square)
    columns = [list(c) for c in zip(*square, strict=True)]
    rng.shuffle(columns)
    return columns


def feature_orders(n_features: int, n_estimators: int, method: str, seed) -> list[list[int]]:
    """The official ``FeatureShuffler``: ``"latin"`` (random Latin square rows, random
    orders above :data:`MAX_FEATURES_FOR_LATIN` features), ``"shift"`` (all cyclic shifts),
    ``"random"`` or ``"none"``."""
    rng = random.Random(seed)
    identity = list(range(n_features))
    if method == "latin" and n_features > MAX_FEATURES_FOR_LATIN:
        method = "random"
    if method == "none" or n_estimators == 1:
        return [identity]
    if method == "shift":
        return [identity[-i:] + identity[:-i] for i in range(n_features)]
    if method == "random":
        if n_features <= 5:
            perms = [list(p) for p in itertools.permutations(identity)]
            return rng.sample(perms, min(n_estimators, len(perms)))
        return [rng.sample(identity, n_features) for _ in range(n_estimators)]
    if method == "latin":
        return latin_square(n_features, rng)
    raise ValueError(f"feature_shuffle must be one of {SHUFFLE_METHODS}, got {method!r}")


def official_members(
    n_estimators: int,
    n_features: int,
    n_classes: int,
    norm_methods: Sequence[str],
    shuffle: str,
    class_shift: bool,
    seed,
    *,
    shortcut: bool = False,
    generation: int = 1,
) -> list[Member]:
    """The official ensemble's members, grouped by normaliser in ``norm_methods`` order.

    Parameters
    ----------
    shortcut : bool
        Replicate the official column-embedding shortcut (v1 networks): within each batch
        of :data:`OFFICIAL_MEMBER_BATCH` members of a normaliser, the official embeds the
        first member's columns once and maps them to member ``i`` with the inverse of the
        intended mapping, so member ``i`` reads the order ``P0[Pi^-1[P0]]`` instead of
        ``Pi``. Off: every member reads its own order ``Pi`` (the intended design).
    generation : {1, 2}
        The design of ``tabicl`` 0.1.4 (1) or 2.2.0 (2), see the module's docstring.
    """
    if generation not in (1, 2):
        raise ValueError(f"generation must be 1 or 2, got {generation!r}")
    orders = feature_orders(n_features, n_estimators, shuffle, seed)
    rng = random.Random(seed)
    if not class_shift or n_estimators == 1:
        shifts = [0]
    elif generation == 1:
        shifts = rng.sample(range(n_classes), n_classes)
    else:
        shifts = [-i % n_classes for i in range(n_classes)]
    configs = list(itertools.product(orders, shifts))
    rng.shuffle(configs)
    chosen = list(itertools.product(configs, norm_methods))[:n_estimators]
    members = []
    for norm in norm_methods:
        group = [(np.asarray(order), shift) for (order, shift), m in chosen if m == norm]
        if shortcut:
            n_batches = -(-len(group) // OFFICIAL_MEMBER_BATCH)
            for batch in np.array_split(np.arange(len(group)), max(n_batches, 1)):
                ref = group[batch[0]][0]
                for i in batch[1:]:
                    order, shift = group[i]
                    group[i] = (ref[np.argsort(order)[ref]], shift)
        members.extend(Member(norm=norm, features=order, shift=int(s)) for order, s in group)
    return members
