"""Table preprocessing of the inference ensemble: outlier clipping, normalizations, shuffles.

Every transform is fitted on the training rows only and applied row by row, so a test row
never changes another row's features.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.preprocessing import PowerTransformer, QuantileTransformer

NORM_METHODS = ("none", "power", "quantile")


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
    """``"none"``, ``"power"`` (Yeo-Johnson) or ``"quantile"`` (to a normal) per column."""

    def __init__(self, method: str):
        if method not in NORM_METHODS:
            raise ValueError(f"norm_methods entries must be in {NORM_METHODS}, got {method!r}")
        self.method = method

    def fit(self, X: np.ndarray) -> Normalizer:
        # a column with no observed training value (all NaN: all missing) has nothing to
        # fit; it stays missing for training and test rows alike
        self.observed_ = ~np.isnan(X).all(axis=0)
        if not self.observed_.any():
            self.transformer_ = None
            return self
        X = X[:, self.observed_]
        if self.method == "power":
            self.transformer_ = PowerTransformer(method="yeo-johnson", standardize=True)
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
