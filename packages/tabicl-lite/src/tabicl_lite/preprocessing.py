"""Table preprocessing of the inference ensemble: outlier clipping, normalizations, shuffles.

Every transform is fitted on the training rows only and applied row by row, so a test row
never changes another row's features.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
from sklearn.preprocessing import PowerTransformer, QuantileTransformer

from icml25_core import track

NORM_METHODS = ("none", "power", "quantile")
#: columns per block when a Yeo-Johnson transform is fitted block by block
POWER_BLOCK = 200
#: blocks (of test rows at prediction, of columns in a fit) from which a progress bar shows
#: when ``progress=None``
PROGRESS_BLOCKS = 10


def show_progress(progress: bool | None, n_blocks: int) -> bool:
    """Whether a loop over ``n_blocks`` shows a bar: ``progress``, or when ``None`` from
    :data:`PROGRESS_BLOCKS` blocks on."""
    return n_blocks >= PROGRESS_BLOCKS if progress is None else progress


class ColumnBlocks:
    """A per-column transformer fitted on blocks of ``block`` columns, with a progress bar.

    For a transform whose parameters are per column (Yeo-Johnson's lambda and the
    standardisation after it) this is the same fit as one over all columns; the blocks
    only let a wide table (sklearn's ``PowerTransformer`` takes about 8 ms per column of
    200 rows, 80 s for 10,000 columns) show its progress.

    Parameters
    ----------
    make : callable
        Returns a fresh, unfitted transformer with ``fit`` / ``transform`` (picklable, for
        the fitted classifier to be).
    description : str
        The progress bar's label.
    block : int
        Columns per block.
    progress : bool or None
        Show the bar; ``None``: from :data:`PROGRESS_BLOCKS` blocks on.
    """

    def __init__(
        self,
        make: Callable,
        description: str,
        block: int = POWER_BLOCK,
        progress: bool | None = None,
    ):
        self.make = make
        self.description = description
        self.block = block
        self.progress = progress

    def fit(self, X: np.ndarray) -> ColumnBlocks:
        """Fit on ``X`` (n_rows, n_columns)."""
        starts = range(0, X.shape[1], self.block)
        if show_progress(self.progress, len(starts)):
            starts = track(starts, f"{self.description}, {X.shape[1]} columns", len(starts))
        self.parts_ = [self.make().fit(X[:, s : s + self.block]) for s in starts]
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Transform ``X`` (m, n_columns); the first block's error propagates as is."""
        return np.concatenate(
            [
                part.transform(X[:, i * self.block : (i + 1) * self.block])
                for i, part in enumerate(self.parts_)
            ],
            axis=1,
        )


def power_transformer(progress: bool | None = None) -> ColumnBlocks:
    """sklearn's standardised Yeo-Johnson ``PowerTransformer``, fitted in column blocks."""
    return ColumnBlocks(
        partial(PowerTransformer, method="yeo-johnson", standardize=True),
        "fit Yeo-Johnson",
        block=POWER_BLOCK,
        progress=progress,
    )


class OutlierClipper:
    """Clip each column to ``mean ± threshold * std`` of its training values (NaN kept)."""

    def __init__(self, threshold: float | None = 4.0):
        self.threshold = threshold

    def fit(self, X: np.ndarray) -> OutlierClipper:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns
            self.mean_ = np.nan_to_num(np.nanmean(X, axis=0))
            self.std_ = np.nan_to_num(np.nanstd(X, axis=0))
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        if self.threshold is None:
            return X
        lo = self.mean_ - self.threshold * self.std_
        hi = self.mean_ + self.threshold * self.std_
        return np.clip(X, lo, hi)


class Normalizer:
    """``"none"``, ``"power"`` (Yeo-Johnson) or ``"quantile"`` (to a normal) per column.

    ``progress`` (bool or None) shows a bar over the column blocks of a Yeo-Johnson fit
    (see :class:`ColumnBlocks`).
    """

    def __init__(self, method: str, progress: bool | None = None):
        if method not in NORM_METHODS:
            raise ValueError(f"norm_methods entries must be in {NORM_METHODS}, got {method!r}")
        self.method = method
        self.progress = progress

    def fit(self, X: np.ndarray) -> Normalizer:
        # a column with no observed training value (all NaN: all missing) has nothing to
        # fit; it stays missing for training and test rows alike
        self.observed_ = ~np.isnan(X).all(axis=0)
        if not self.observed_.any():
            self.transformer_ = None
            return self
        X = X[:, self.observed_]
        if self.method == "power":
            self.transformer_ = power_transformer(self.progress)
        elif self.method == "quantile":
            n_quantiles = max(2, min(1000, X.shape[0]))
            self.transformer_ = QuantileTransformer(
                n_quantiles=n_quantiles, output_distribution="normal", random_state=0
            )
        else:
            self.transformer_ = None
            return self
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")  # constant columns, overflow in lambda search
            self.transformer_.fit(X)
            Z = self.transformer_.transform(X)
        # a Yeo-Johnson lambda can overflow on the training values themselves: such columns
        # are passed through unchanged, for training and test rows alike
        self.passthrough_ = (~np.isfinite(Z) & ~np.isnan(X)).any(axis=0)
        Z = np.where(self.passthrough_ | np.isnan(Z), np.nan, Z)
        self.low_, self.high_ = (
            np.nanmin(Z, axis=0, initial=np.inf),
            np.nanmax(Z, axis=0, initial=-np.inf),
        )
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Transform rows; a test value beyond what the training rows overflowed to is
        clipped to the training rows' transformed range."""
        if self.transformer_ is None:
            return X
        out = X.copy()
        X = X[:, self.observed_]
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            Z = self.transformer_.transform(X)
        overflow = ~np.isfinite(Z) & ~np.isnan(X)
        if overflow.any():
            Z = np.where(overflow, np.where(Z > 0, self.high_, self.low_), Z)
        out[:, self.observed_] = np.where(self.passthrough_, X, Z)
        return out


@dataclass(frozen=True)
class Member:
    """One ensemble member: normalization, feature order and class shift."""

    norm: str
    features: np.ndarray
    shift: int


def make_members(
    n_estimators: int,
    n_features: int,
    n_classes: int,
    norm_methods: tuple[str, ...],
    feature_shuffle: bool,
    class_shift: bool,
    rng: np.random.Generator,
) -> list[Member]:
    """Members ``i = 0..n_estimators-1``: normalization ``norm_methods[i % len]``; feature
    order the ``i``-th cyclic shift of one random permutation (a Latin design: every
    feature visits every position); class shift ``(s + i) mod n_classes``."""
    base = rng.permutation(n_features) if feature_shuffle else np.arange(n_features)
    offset = int(rng.integers(n_classes)) if class_shift else 0
    return [
        Member(
            norm=norm_methods[i % len(norm_methods)],
            features=np.roll(base, -i) if feature_shuffle else base,
            shift=(offset + i) % n_classes if class_shift else 0,
        )
        for i in range(n_estimators)
    ]
