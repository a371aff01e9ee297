"""``TabICLClassifier``: the scikit-learn face of TabICL."""

from __future__ import annotations

import functools
import os
from importlib.resources import as_file, files
from numbers import Integral, Real
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.preprocessing import LabelEncoder, OrdinalEncoder
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from icml25_core import select_device
from icml25_core.hub import CONFIG_NAME, WEIGHTS_NAME

from .hierarchy import build_tree, tree_log_proba
from .model import TabICL
from .preprocessing import NORM_METHODS, Member, Normalizer, OutlierClipper, make_members

SHIPPED_CHECKPOINT = "lite"


def shipped_checkpoint_path() -> Path:
    """Folder of the checkpoint shipped inside the wheel (``config.json`` + safetensors)."""
    with as_file(files("tabicl_lite") / "checkpoints" / SHIPPED_CHECKPOINT) as path:
        return Path(path)


def _identity(folder: Path) -> tuple:
    """What the cache keys a checkpoint on: its resolved path and each file's size and
    modification time, so a checkpoint rewritten in place is loaded again."""
    stats = []
    for name in (CONFIG_NAME, WEIGHTS_NAME):
        file = folder / name
        if file.exists():
            st = file.stat()
            stats.append((name, st.st_size, st.st_mtime_ns))
    return (str(folder.resolve()), tuple(stats))


@functools.lru_cache(maxsize=8)
def _load(path: str, device: str, identity: tuple) -> TabICL:
    model = TabICL.from_pretrained(path, map_location=device)
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def load_model(model_path: str | Path | None = None, device: str | None = None) -> TabICL:
    """Load a TabICL checkpoint folder (the shipped one by default), cached per process
    by the folder and its files' sizes and modification times (a checkpoint saved again
    in place is reloaded).

    The returned model is shared and frozen; it is in eval mode and must not be trained.
    """
    path = shipped_checkpoint_path() if model_path is None else Path(model_path)
    if not path.is_dir():
        raise FileNotFoundError(
            f"model_path must be a checkpoint folder (config.json + model.safetensors), "
            f"got {str(path)!r}"
        )
    return _load(str(path.resolve()), select_device(device), _identity(path))


class TabICLClassifier(ClassifierMixin, BaseEstimator):
    """Tabular classification by in-context learning with a pretrained TabICL.

    ``fit`` stores and preprocesses the training table (no gradient step); ``predict_proba``
    runs the network with the training rows as context. An ensemble of ``n_estimators``
    views (normalizations, Latin feature orders, class shifts) is averaged in logit space.

    Parameters
    ----------
    n_estimators : int, default=8
        Ensemble members.
    norm_methods : tuple of str, default=("none", "power")
        Normalizations cycled over the members: ``"none"``, ``"power"`` (Yeo-Johnson),
        ``"quantile"``.
    feature_shuffle : bool, default=True
        Members see the features in cyclic shifts of one random order.
    class_shift : bool, default=True
        Members relabel class ``c`` as ``(c + s_i) mod K`` (undone on their outputs);
        not used with more than ``max_classes`` classes.
    outlier_threshold : float or None, default=4.0
        Clip features to mean ± threshold·std of their training values (``None``: off).
    softmax_temperature : float, default=0.9
    categorical_features : list of int or str, bool mask, or None
        Columns holding categories (any dtype, strings included); they are ordinal-encoded
        on the training rows, unseen categories at predict become missing values. Other
        columns must be numeric.
    batch_size : int, default=1024
        Test rows per forward pass.
    model_path : path, optional
        A checkpoint folder (``config.json`` + ``model.safetensors``); the checkpoint
        shipped in the wheel by default. Nothing is downloaded.
    device : str, optional
        ``"cuda"``, ``"mps"`` or ``"cpu"``; the best available by default.
    random_state : int, RandomState or None, default=0
        Seeds the feature orders and class shifts.

    Attributes
    ----------
    classes_ : ndarray, shape (n_classes,)
    n_features_in_ : int
    model_ : TabICL
    members_ : list of Member
    train_views_ : ndarray, shape (n_estimators, n_samples, n_features)
        The training table as each member sees it (clipped, normalized, reordered).
    """

    _parameter_constraints: ClassVar[dict] = {
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "norm_methods": [tuple, list],
        "feature_shuffle": ["boolean"],
        "class_shift": ["boolean"],
        "outlier_threshold": [Interval(Real, 0, None, closed="neither"), None],
        "softmax_temperature": [Interval(Real, 0, None, closed="neither")],
        "categorical_features": ["array-like", None],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "model_path": [str, os.PathLike, None],
        "device": [str, None],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        *,
        n_estimators: int = 8,
        norm_methods: tuple[str, ...] = ("none", "power"),
        feature_shuffle: bool = True,
        class_shift: bool = True,
        outlier_threshold: float | None = 4.0,
        softmax_temperature: float = 0.9,
        categorical_features=None,
        batch_size: int = 1024,
        model_path: str | Path | None = None,
        device: str | None = None,
        random_state=0,
    ):
        self.n_estimators = n_estimators
        self.norm_methods = norm_methods
        self.feature_shuffle = feature_shuffle
        self.class_shift = class_shift
        self.outlier_threshold = outlier_threshold
        self.softmax_temperature = softmax_temperature
        self.categorical_features = categorical_features
        self.batch_size = batch_size
        self.model_path = model_path
        self.device = device
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    # ------------------------------------------------------------------ checks
    def _check_params(self) -> None:
        """scikit-learn's ``_parameter_constraints``, then what they cannot say."""
        self._validate_params()
        if not len(self.norm_methods):
            raise ValueError(
                f"norm_methods must be a non-empty tuple from {NORM_METHODS}, got "
                f"{self.norm_methods!r}"
            )
        for m in self.norm_methods:
            Normalizer(m)

    def _categorical_mask(self, n_features: int) -> np.ndarray:
        cats = self.categorical_features
        mask = np.zeros(n_features, dtype=bool)
        if cats is None:
            return mask
        cats = np.asarray(cats)
        if cats.dtype == bool:
            if cats.shape != (n_features,):
                raise ValueError(
                    f"categorical_features as a mask must have length {n_features}, got "
                    f"{cats.shape}"
                )
            return cats.copy()
        names = getattr(self, "feature_names_in_", None)
        for c in cats.ravel():
            if isinstance(c, str | np.str_):
                if names is None or c not in names:
                    raise ValueError(
                        f"categorical_features names {c!r}, which is not a column of X"
                    )
                mask[int(np.flatnonzero(names == c)[0])] = True
            elif isinstance(c, int | np.integer) and -n_features <= c < n_features:
                mask[c] = True
            else:
                raise ValueError(
                    f"categorical_features entries must be column indices in [0, {n_features}) "
                    f"or column names, got {c!r}"
                )
        return mask

    def _encode(self, X, y=None, *, reset: bool):
        """Validate X (and y at fit) and return X as floats, categoricals ordinal-encoded."""
        if reset:
            X, y = validate_data(self, X, y, dtype=None, ensure_all_finite=False)
        else:
            X = validate_data(self, X, dtype=None, ensure_all_finite=False, reset=False)
        if reset:
            self.categorical_mask_ = self._categorical_mask(X.shape[1])
            cat = self.categorical_mask_
            self.encoder_ = (
                OrdinalEncoder(
                    handle_unknown="use_encoded_value",
                    unknown_value=np.nan,
                    encoded_missing_value=np.nan,
                ).fit(X[:, cat])
                if cat.any()
                else None
            )
        cat = self.categorical_mask_
        out = np.empty(X.shape, dtype=np.float64)
        try:
            out[:, ~cat] = np.asarray(X[:, ~cat], dtype=np.float64)
        except ValueError as err:
            raise ValueError(
                "X has non-numeric values in columns not declared in categorical_features; "
                f"declare them there ({err})"
            ) from None
        if np.isinf(out[:, ~cat]).any():
            raise ValueError("X contains infinity; replace it with a finite value or NaN (missing)")
        if cat.any():
            out[:, cat] = self.encoder_.transform(X[:, cat])
        return out, y

    # ------------------------------------------------------------------ API
    def fit(self, X, y):
        """Store the training table as the model's context.

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)
            NaN marks a missing value; infinities are refused.
        y : array-like, shape (n_samples,)
            Class labels (any hashable values, e.g. strings).

        Returns
        -------
        self
        """
        self._check_params()
        Xf, y = self._encode(X, y, reset=True)
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        n_classes = self.classes_.size
        if n_classes < 2:
            raise ValueError(
                f"y has one class ({self.classes_[0]!r}); a classifier needs at least 2 classes"
            )
        self.model_ = load_model(self.model_path, self.device)
        max_classes = self.model_.config.max_classes
        self.tree_ = build_tree(n_classes, max_classes) if n_classes > max_classes else None
        rng = np.random.default_rng(check_random_state(self.random_state).randint(2**31))
        self.members_: list[Member] = make_members(
            self.n_estimators,
            Xf.shape[1],
            n_classes,
            tuple(self.norm_methods),
            self.feature_shuffle,
            self.class_shift and self.tree_ is None,
            rng,
        )
        self.clipper_ = OutlierClipper(self.outlier_threshold).fit(Xf)
        clipped = self.clipper_.transform(Xf)
        self.normalizers_ = {m: Normalizer(m).fit(clipped) for m in set(self.norm_methods)}
        self.train_views_ = self._views(Xf)
        self.y_train_ = encoder.transform(y)
        return self

    def _views(self, X: np.ndarray) -> np.ndarray:
        """(n_members, n_rows, n_features) float32: each member's view of rows X."""
        clipped = self.clipper_.transform(X)
        normed = {m: n.transform(clipped) for m, n in self.normalizers_.items()}
        return np.stack([normed[m.norm][:, m.features] for m in self.members_]).astype(np.float32)

    @torch.inference_mode()
    def _log_proba_groups(
        self, train: torch.Tensor, labels: torch.Tensor, test: torch.Tensor, k: int
    ) -> torch.Tensor:
        """Member log-probabilities ``(M, n_test, k)`` of one block of test rows (at most
        ``batch_size``, see :meth:`predict_log_proba`) over ``k`` classes."""
        X = torch.cat((train, test), dim=1)
        logits = self.model_(X, labels)[..., :k] / self.softmax_temperature
        return torch.log_softmax(logits.double(), dim=-1)

    def predict_log_proba(self, X) -> np.ndarray:
        """Log class probabilities, shape (n_samples, n_classes), columns as ``classes_``.

        Rows go through in blocks of ``batch_size`` (the member views included), so the
        working memory stays bounded however many rows ``X`` has; each row's result does
        not depend on the others.
        """
        check_is_fitted(self)
        Xf, _ = self._encode(X, reset=False)
        blocks = range(0, Xf.shape[0], self.batch_size)
        return np.concatenate([self._log_proba_block(Xf[s : s + self.batch_size]) for s in blocks])

    def _log_proba_block(self, Xf: np.ndarray) -> np.ndarray:
        """:meth:`predict_log_proba` of encoded rows ``Xf`` (n_rows, n_features)."""
        device = next(self.model_.parameters()).device
        train = torch.from_numpy(self.train_views_).to(device)
        test = torch.from_numpy(self._views(Xf)).to(device)
        n_classes = self.classes_.size
        y = self.y_train_
        if self.tree_ is None:
            shifts = np.array([m.shift for m in self.members_])[:, None]
            labels = torch.from_numpy((y[None, :] + shifts) % n_classes).to(device)
            logp = self._log_proba_groups(train, labels, test, n_classes).cpu().numpy()
            # member i saw class c as (c + s_i) mod K: read its column back
            index = (np.arange(n_classes)[None, :] + shifts) % n_classes  # (M, K)
            logp = np.take_along_axis(logp, index[:, None, :], axis=2)
            mean = logp.mean(axis=0)
        else:
            members = len(self.members_)

            def classify(rows: np.ndarray, groups: np.ndarray, k: int) -> np.ndarray:
                labels = torch.from_numpy(np.broadcast_to(groups, (members, groups.size)).copy())
                index = torch.from_numpy(rows).to(device)
                logp = self._log_proba_groups(train[:, index], labels.to(device), test, k)
                return logp.cpu().numpy()

            mean = tree_log_proba(self.tree_, y, n_classes, classify).mean(axis=0)
        return mean - np.logaddexp.reduce(mean, axis=1, keepdims=True)

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities, shape (n_samples, n_classes), rows sum to 1."""
        return np.exp(self.predict_log_proba(X))

    def predict(self, X) -> np.ndarray:
        """Most probable class of each row, in the labels ``y`` used at fit."""
        logp = self.predict_log_proba(X)
        return self.classes_[np.argmax(logp, axis=1)]
