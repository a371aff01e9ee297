"""``TabICLClassifier``: the scikit-learn face of TabICL."""

from __future__ import annotations

import functools
import os
import warnings
from importlib.resources import as_file, files
from numbers import Integral, Real
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.preprocessing import LabelEncoder, OrdinalEncoder
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from icml25_core import select_device, track
from icml25_core.hub import CONFIG_NAME, WEIGHTS_NAME

from .convert import from_official_checkpoint
from .hierarchy import build_tree, tree_log_proba
from .model import Context, TabICL
from .official import (
    OFFICIAL_NORM_METHODS,
    SHUFFLE_METHODS,
    OfficialPipeline,
    official_members,
)
from .preprocessing import (
    NORM_METHODS,
    Member,
    Normalizer,
    OutlierClipper,
    make_members,
    show_progress,
)

PREPROCESSING = ("auto", "official", "lite")
#: ensemble size when ``n_estimators=None``: the official classifiers' (32 in ``tabicl``
#: 0.1.4 for v1 checkpoints, 8 in 2.2.0 for v2) with the official preprocessing, 8 for
#: this package's own (its small checkpoint gains little beyond)
DEFAULT_ESTIMATORS = {("official", 1): 32, ("official", 2): 8, "lite": 8}
#: the official hierarchy floors each member's class probabilities: log(p + 1e-6)
HIERARCHY_FLOOR = 1e-6

SHIPPED_CHECKPOINT = "lite"


def shipped_checkpoint_path() -> Path:
    """Folder of the checkpoint shipped inside the wheel (``config.json`` + safetensors)."""
    with as_file(files("tabicl_lite") / "checkpoints" / SHIPPED_CHECKPOINT) as path:
        return Path(path)


def _identity(path: Path) -> tuple:
    """What the cache keys a checkpoint on: its resolved path and each file's size and
    modification time, so a checkpoint rewritten in place is loaded again."""
    files = [path] if path.is_file() else [path / CONFIG_NAME, path / WEIGHTS_NAME]
    stats = [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files if f.exists()]
    return (str(path.resolve()), tuple(stats))


@functools.lru_cache(maxsize=8)
def _load(path: str, device: str, identity: tuple) -> TabICL:
    if Path(path).is_file():
        model = from_official_checkpoint(path, map_location=device)
    else:
        model = TabICL.from_pretrained(path, map_location=device)
    for p in model.parameters():
        p.requires_grad_(False)
    return model.eval()


def load_model(model_path: str | Path | None = None, device: str | None = None) -> TabICL:
    """Load a TabICL checkpoint (the shipped one by default), cached per process by its
    path and its files' sizes and modification times (a checkpoint saved again in place
    is reloaded).

    ``model_path`` is a checkpoint folder of this package (``config.json`` +
    ``model.safetensors``) or an official TabICL ``.ckpt`` file (v1 or v2), converted on load
    (:func:`tabicl_lite.convert.from_official_checkpoint`).

    The returned model is shared and frozen; it is in eval mode and must not be trained.
    """
    path = shipped_checkpoint_path() if model_path is None else Path(model_path)
    if not path.is_dir() and not path.is_file():
        raise FileNotFoundError(
            "model_path must be a checkpoint folder (config.json + model.safetensors) or an "
            f"official TabICL .ckpt file, got {str(path)!r}"
        )
    if path.is_file() and path.suffix == ".safetensors":
        raise ValueError(
            f"model_path {str(path)!r} is a weights file alone; pass the folder holding it "
            "and its config.json"
        )
    return _load(str(path.resolve()), select_device(device), _identity(path))


def _seed(random_state) -> int | None:
    """The integer seed of the official ensemble (``random.Random(seed)``): an int as given,
    ``None`` as given (fresh randomness, as the official), else one drawn from the
    ``RandomState``."""
    if random_state is None or isinstance(random_state, Integral):
        return None if random_state is None else int(random_state)
    return int(check_random_state(random_state).randint(2**31))


def _float(logits: torch.Tensor) -> torch.Tensor:
    """Logits computed under bfloat16 autocast back in float32; others unchanged."""
    return logits.float() if logits.dtype == torch.bfloat16 else logits


class TabICLClassifier(ClassifierMixin, BaseEstimator):
    """Tabular classification by in-context learning with a pretrained TabICL.

    ``fit`` stores and preprocesses the training table (no gradient step); ``predict_proba``
    runs the network with the training rows as context. An ensemble of views
    (normalizations, feature orders, class shifts) is averaged in logit space.

    Two preprocessings (``preprocessing``):

    * ``"official"``: the official TabICL classifier's (:mod:`tabicl_lite.official`) of the
      checkpoint's generation (``tabicl`` 0.1.4 for v1, 2.2.0 for v2): mean imputation,
      constant columns dropped, standard scaling clipped at ±100, the normaliser fitted on
      the scaled rows, a two-pass soft outlier clip; members cross a random Latin square
      of feature orders with class shifts, as that official draws them from
      ``random_state``. What the official checkpoints were trained on.
    * ``"lite"``: this package's own: a hard clip at mean ± ``outlier_threshold`` std,
      the normaliser on the clipped rows, cyclic shifts of one random feature order;
      the network standardises the columns itself. What the shipped checkpoint was
      trained on.

    ``"auto"`` (default) picks ``"official"`` for a converted official checkpoint
    (``config.standardize=False``) and ``"lite"`` for this package's checkpoints.

    Parameters
    ----------
    n_estimators : int or None, default=None
        Ensemble members; ``None``: the official default with the official preprocessing
        (32 for a v1 checkpoint, 8 for v2), 8 with this package's.
    norm_methods : tuple of str, default=("none", "power")
        Normalizations cycled over the members: ``"none"``, ``"power"`` (Yeo-Johnson),
        ``"quantile"``; the official preprocessing also has ``"quantile_rtdl"`` and
        ``"robust"``.
    feature_shuffle : bool or str, default=True
        Members see the features in different orders. Official preprocessing: ``True``
        is ``"latin"`` (rows of a random Latin square); ``"shift"``, ``"random"``,
        ``"none"`` as the official. This package's: cyclic shifts of one random order.
    class_shift : bool, default=True
        Members relabel class ``c`` as ``(c + s_i) mod K`` (undone on their outputs).
        This package's preprocessing does not shift with more than ``max_classes``
        classes.
    outlier_threshold : float or None, default=4.0
        Outlier bounds at mean ± threshold·std of the training values (``None``: off;
        this package's preprocessing only).
    softmax_temperature : float, default=0.9
    categorical_features : list of int or str, bool mask, or None
        Columns holding categories (any dtype, strings included); ordinal-encoded on the
        training rows. In a DataFrame, string, object, category and bool columns are
        categorical without being listed. Unseen and missing categories become a missing
        value (``"lite"``) or the code -1 (``"official"``, as the official). Other columns
        must be numeric (nullable ``Int64`` / ``Float64`` with ``pd.NA`` included).
    preprocessing : {"auto", "official", "lite"}, default="auto"
    official_shortcut : bool, default=False
        With the official preprocessing, replicate the official code's column-embedding
        shortcut: in each batch of 8 members of one normaliser, member ``i`` reads the
        feature order ``P0[Pi^-1[P0]]`` instead of its own ``Pi`` (see the README). Off:
        every member reads its own order, as the official design intends. v1 networks
        only (the official v2 classifier has no shortcut).
    batch_size : int, default=1024
        Test rows per forward pass.
    kv_cache : bool or {"kv", "repr"}, default=False
        Run the training rows through the network once, at ``fit``, and keep what test
        rows need (:meth:`TabICL.context`): later blocks of test rows and later
        ``predict_proba`` calls then run only the test rows. ``True`` / ``"kv"``: every
        in-context block's keys and values (``2 * icl_blocks * icl_dim`` numbers per
        training row and member: 4 MiB per 1,000 rows and member at the paper's size);
        ``"repr"``: the row representations only (``icl_dim`` numbers per row and
        member) and the in-context stage re-run per call. More than ``max_classes``
        classes always use ``"repr"`` (the class hierarchy runs the in-context stage on
        subsets of the training rows). The probabilities equal the uncached path's to
        float rounding.
    use_amp : bool, default=False
        Run the network under bfloat16 autocast (CPU and CUDA). Off by default: on a CPU
        without native bfloat16 it is slower than float32, and it changes the
        probabilities at the 1e-2 level.
    model_path : path, optional
        A checkpoint folder (``config.json`` + ``model.safetensors``) or an official TabICL
        ``.ckpt`` file, v1 or v2 (converted on load); the checkpoint shipped in the wheel by
        default. Nothing is downloaded.
    device : str, optional
        ``"cuda"``, ``"mps"`` or ``"cpu"``; the best available by default.
    random_state : int, RandomState or None, default=0
        Seeds the feature orders and class shifts (and the quantile normalisers).
    progress : bool or None, default=None
        Show a progress bar over the blocks of test rows at prediction and over the
        column blocks of a Yeo-Johnson fit (200 columns each); ``None``: when there are at
        least 10 blocks (10,240 test rows at the default ``batch_size``, 2,000 columns).

    Attributes
    ----------
    classes_ : ndarray, shape (n_classes,)
    n_features_in_ : int
    model_ : TabICL
    preprocessing_ : str
        ``"official"`` or ``"lite"``.
    categorical_mask_ : ndarray of bool, shape (n_features_in_,)
    members_ : list of Member
    train_tables_ : ndarray, shape (n_normalizations, n_samples, n_features_used)
        The training table under each normalization the members use; member ``i`` reads
        its feature order ``members_[i].features`` of its normalization's table (the
        columns are embedded once per normalization and shared by its members).
    context_ : Context or None
        The cached training context (``kv_cache``), on the model's device.
    """

    _parameter_constraints: ClassVar[dict] = {
        "n_estimators": [Interval(Integral, 1, None, closed="left"), None],
        "norm_methods": [tuple, list],
        "feature_shuffle": ["boolean", StrOptions(set(SHUFFLE_METHODS))],
        "class_shift": ["boolean"],
        "outlier_threshold": [Interval(Real, 0, None, closed="neither"), None],
        "softmax_temperature": [Interval(Real, 0, None, closed="neither")],
        "categorical_features": ["array-like", None],
        "preprocessing": [StrOptions(set(PREPROCESSING))],
        "official_shortcut": ["boolean"],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "kv_cache": ["boolean", StrOptions({"kv", "repr"})],
        "use_amp": ["boolean"],
        "model_path": [str, os.PathLike, None],
        "device": [str, None],
        "random_state": ["random_state"],
        "progress": ["boolean", None],
    }

    def __init__(
        self,
        *,
        n_estimators: int | None = None,
        norm_methods: tuple[str, ...] = ("none", "power"),
        feature_shuffle: bool | str = True,
        class_shift: bool = True,
        outlier_threshold: float | None = 4.0,
        softmax_temperature: float = 0.9,
        categorical_features=None,
        preprocessing: str = "auto",
        official_shortcut: bool = False,
        batch_size: int = 1024,
        kv_cache: bool | str = False,
        use_amp: bool = False,
        model_path: str | Path | None = None,
        device: str | None = None,
        random_state=0,
        progress: bool | None = None,
    ):
        self.n_estimators = n_estimators
        self.norm_methods = norm_methods
        self.feature_shuffle = feature_shuffle
        self.class_shift = class_shift
        self.outlier_threshold = outlier_threshold
        self.softmax_temperature = softmax_temperature
        self.categorical_features = categorical_features
        self.preprocessing = preprocessing
        self.official_shortcut = official_shortcut
        self.batch_size = batch_size
        self.kv_cache = kv_cache
        self.use_amp = use_amp
        self.model_path = model_path
        self.device = device
        self.random_state = random_state
        self.progress = progress

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    # ------------------------------------------------------------------ checks
    def _check_params(self, mode: str) -> None:
        """What ``_parameter_constraints`` cannot say, for preprocessing ``mode``."""
        allowed = OFFICIAL_NORM_METHODS if mode == "official" else NORM_METHODS
        if not len(self.norm_methods) or any(m not in allowed for m in self.norm_methods):
            raise ValueError(
                f"norm_methods must be a non-empty tuple from {allowed} with "
                f"preprocessing={mode!r}, got {self.norm_methods!r}"
            )
        if mode == "lite" and isinstance(self.feature_shuffle, str):
            raise ValueError(
                "feature_shuffle must be True or False with preprocessing='lite' (the "
                f"methods {SHUFFLE_METHODS} are the official preprocessing's), got "
                f"{self.feature_shuffle!r}"
            )
        if mode == "official" and self.outlier_threshold is None:
            raise ValueError(
                "outlier_threshold=None is not supported with preprocessing='official' (the "
                "official pipeline always clips outliers); give a threshold such as 4.0"
            )

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

    def _columns(self, X, y, *, reset: bool):
        """Validate X (and y at fit); return X's numeric part as float64 (NaN missing), its
        categorical part as an object array (NaN missing) and y."""
        frame = hasattr(X, "columns") and hasattr(X, "dtypes")
        if reset:
            Xa, y = validate_data(self, X, y, dtype=None, ensure_all_finite=False)
            mask = self._categorical_mask(Xa.shape[1])
            if frame:
                from pandas.api.types import is_bool_dtype, is_numeric_dtype

                auto = [not is_numeric_dtype(t) or is_bool_dtype(t) for t in X.dtypes]
                other = [
                    str(c)
                    for c, t in zip(X.columns, X.dtypes, strict=True)
                    if t.kind in "mM" or str(t).startswith(("period", "interval"))
                ]
                if other:
                    raise ValueError(
                        f"X has columns of unsupported dtype (dates, periods): {other}; convert "
                        "them to numbers or categories"
                    )
                mask |= np.asarray(auto, dtype=bool)
            self.categorical_mask_ = mask
        else:
            Xa = validate_data(self, X, dtype=None, ensure_all_finite=False, reset=False)
        cat = self.categorical_mask_
        if frame:
            num = np.column_stack(
                [
                    X.iloc[:, j].to_numpy(dtype=np.float64, na_value=np.nan)
                    for j in np.flatnonzero(~cat)
                ]
                or [np.empty((len(X), 0))]
            )
            cats = np.column_stack(
                [self._categories(X.iloc[:, j]) for j in np.flatnonzero(cat)]
                or [np.empty((len(X), 0), dtype=object)]
            )
        else:
            try:
                num = np.asarray(Xa[:, ~cat], dtype=np.float64)
            except ValueError as err:
                raise ValueError(
                    "X has non-numeric values in columns not declared in categorical_features; "
                    f"declare them there ({err})"
                ) from None
            cats = Xa[:, cat]
        if np.isinf(num).any():
            raise ValueError("X contains infinity; replace it with a finite value or NaN (missing)")
        return num, cats, y

    def _categories(self, column) -> np.ndarray:
        """A categorical DataFrame column as objects, NaN for missing. The official
        preprocessing keeps ``None`` in an object column as a category of its own (as the
        official's encoder does) and maps ``pd.NA`` to missing (where the official fails)."""
        values = column.to_numpy(dtype=object)
        if self.preprocessing_ == "official":
            missing = np.array([v is not None for v in values]) & column.isna().to_numpy()
        else:
            missing = column.isna().to_numpy()
        values[missing] = np.nan
        return values

    def _encode(self, X, y=None, *, reset: bool):
        """X as a float64 matrix: numeric columns (NaN missing) and categorical codes;
        official preprocessing puts the categorical columns first, as the official."""
        num, cats, y = self._columns(X, y, reset=reset)
        official = self.preprocessing_ == "official"
        if reset:
            missing = -1 if official else np.nan
            self.encoder_ = (
                OrdinalEncoder(
                    handle_unknown="use_encoded_value",
                    unknown_value=missing,
                    encoded_missing_value=missing,
                )
                if cats.shape[1]
                else None
            )
            if self.encoder_ is not None:
                try:
                    self.encoder_.fit(cats)
                except TypeError as err:
                    raise ValueError(
                        f"a categorical column of X mixes value types ({err}); convert it to str"
                    ) from None
        codes = self.encoder_.transform(cats) if self.encoder_ is not None else cats
        codes = np.asarray(codes, dtype=np.float64)
        if official:
            return np.hstack([codes, num]), y
        out = np.empty((num.shape[0], self.categorical_mask_.size), dtype=np.float64)
        out[:, ~self.categorical_mask_] = num
        out[:, self.categorical_mask_] = codes
        return out, y

    # ------------------------------------------------------------------ API
    def fit(self, X, y):
        """Store the training table as the model's context.

        Parameters
        ----------
        X : array-like or DataFrame, shape (n_samples, n_features)
            NaN (or ``pd.NA``) marks a missing value; infinities are refused.
        y : array-like, shape (n_samples,)
            Class labels (any hashable values, e.g. strings).

        Returns
        -------
        self
        """
        self._validate_params()
        self.model_ = load_model(self.model_path, self.device)
        mode = self.preprocessing
        if mode == "auto":
            mode = "lite" if self.model_.config.standardize else "official"
        self._check_params(mode)
        self.preprocessing_ = mode
        Xf, y = self._encode(X, y, reset=True)
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        n_classes = self.classes_.size
        if n_classes < 2:
            raise ValueError(
                f"y has one class ({self.classes_[0]!r}); a classifier needs at least 2 classes"
            )
        max_classes = self.model_.config.max_classes
        self.tree_ = build_tree(n_classes, max_classes) if n_classes > max_classes else None
        generation = self.model_.config.generation
        key = (mode, generation) if mode == "official" else mode
        n_estimators = self.n_estimators or DEFAULT_ESTIMATORS[key]
        if mode == "official":
            self._fit_official(Xf, n_estimators, n_classes)
        else:
            rng = np.random.default_rng(check_random_state(self.random_state).randint(2**31))
            self.members_: list[Member] = make_members(
                n_estimators,
                Xf.shape[1],
                n_classes,
                tuple(self.norm_methods),
                self.feature_shuffle,
                self.class_shift and self.tree_ is None,
                rng,
            )
            self.clipper_ = OutlierClipper(self.outlier_threshold).fit(Xf)
            clipped = self.clipper_.transform(Xf)
            self.normalizers_ = {
                m: Normalizer(m, self.progress).fit(clipped) for m in set(self.norm_methods)
            }
            self.train_tables_ = self._tables(Xf)
        self.y_train_ = encoder.transform(y)
        self.context_ = self._context() if self.kv_cache else None
        return self

    def _labels(self, device) -> torch.Tensor:
        """(n_members, n_train) training labels as each member sees them (class shift)."""
        shifts = np.array([m.shift for m in self.members_])[:, None]
        return torch.from_numpy((self.y_train_[None, :] + shifts) % self.classes_.size).to(device)

    def _autocast(self, device):
        return torch.autocast(torch.device(device).type, torch.bfloat16, enabled=self.use_amp)

    @torch.inference_mode()
    def _context(self) -> Context:
        """The training rows run once for every member (``kv_cache``)."""
        device = next(self.model_.parameters()).device
        train = torch.from_numpy(self.train_tables_).to(device)
        keys_values = self.kv_cache in (True, "kv") and self.tree_ is None
        with self._autocast(device):
            return self.model_.context(
                train, self._labels(device), keys_values=keys_values, views=self._views(device)
            )

    def _fit_official(self, Xf: np.ndarray, n_estimators: int, n_classes: int) -> None:
        """The official pipeline on the encoded training rows ``Xf``: ``tabicl`` 0.1.4's for a
        v1 network, 2.2.0's for a v2 one (:func:`~tabicl_lite.official.official_members`)."""
        generation = self.model_.config.generation
        if self.official_shortcut and generation == 2:
            raise ValueError(
                "official_shortcut=True replicates the v1 classifier's column-embedding "
                "shortcut; the official v2 classifier embeds every member (feature groups "
                "depend on the order), so it has none: leave official_shortcut=False"
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-missing columns
            self.impute_ = np.nan_to_num(np.nanmean(Xf, axis=0))
        Xf = np.where(np.isnan(Xf), self.impute_, Xf)
        if Xf.shape[0] > 1:
            self.keep_ = np.array([np.unique(col).size > 1 for col in Xf.T], dtype=bool)
        else:
            self.keep_ = np.ones(Xf.shape[1], dtype=bool)
        if not self.keep_.any():  # as tabicl 2.x: keep one uninformative column
            self.keep_[0] = True
        Xf = Xf[:, self.keep_]
        seed = _seed(self.random_state)
        shuffle = self.feature_shuffle
        shuffle = ("latin" if shuffle else "none") if isinstance(shuffle, bool) else shuffle
        self.members_ = official_members(
            n_estimators,
            Xf.shape[1],
            n_classes,
            tuple(self.norm_methods),
            shuffle,
            self.class_shift,
            seed,
            shortcut=self.official_shortcut,
            generation=generation,
        )
        self.pipelines_ = {}
        normed = {}
        for norm in dict.fromkeys(m.norm for m in self.members_):
            self.pipelines_[norm] = OfficialPipeline(
                norm, self.outlier_threshold, seed, self.progress
            )
            normed[norm] = self.pipelines_[norm].fit_transform(Xf)
        self.train_tables_ = self._stack(normed)

    @property
    def _norms(self) -> list[str]:
        """The members' normalizations, each once, in the order of ``train_tables_``."""
        return list(dict.fromkeys(m.norm for m in self.members_))

    def _stack(self, normed: dict) -> np.ndarray:
        """(n_normalizations, n_rows, n_features) float32 from each normalization's rows."""
        tables = np.stack([normed[norm] for norm in self._norms])
        if self.preprocessing_ == "official" and not np.isfinite(tables).all():
            raise ValueError(
                "the preprocessing produced non-finite values (a column too extreme for its "
                "normalizer); try norm_methods=('none',)"
            )
        return tables.astype(np.float32)

    def _tables(self, X: np.ndarray) -> np.ndarray:
        """(n_normalizations, n_rows, n_features) float32: encoded rows ``X`` under each
        normalization the members use (a member's view is its feature order of one)."""
        if self.preprocessing_ == "official":
            X = np.where(np.isnan(X), self.impute_, X)[:, self.keep_]
            return self._stack({m: p.transform(X) for m, p in self.pipelines_.items()})
        clipped = self.clipper_.transform(X)
        return self._stack({m: n.transform(clipped) for m, n in self.normalizers_.items()})

    def _views(self, device) -> tuple[torch.Tensor, torch.Tensor]:
        """The members as views of the tables: (table of each member, its feature order)."""
        norms = self._norms
        tables = torch.tensor([norms.index(m.norm) for m in self.members_], device=device)
        columns = torch.from_numpy(np.stack([m.features for m in self.members_]).astype(np.int64))
        return tables, columns.to(device)

    def predict_log_proba(self, X) -> np.ndarray:
        """Log class probabilities, shape (n_samples, n_classes), columns as ``classes_``.

        Rows go through in blocks of ``batch_size`` (the member views included), so the
        working memory stays bounded however many rows ``X`` has; each row's result does
        not depend on the others.
        """
        check_is_fitted(self)
        Xf, _ = self._encode(X, reset=False)
        blocks = range(0, Xf.shape[0], self.batch_size)
        if show_progress(self.progress, len(blocks)):
            blocks = track(blocks, f"predict {Xf.shape[0]} rows", total=len(blocks))
        return np.concatenate([self._log_proba_block(Xf[s : s + self.batch_size]) for s in blocks])

    @torch.inference_mode()
    def _log_proba_block(self, Xf: np.ndarray) -> np.ndarray:
        """:meth:`predict_log_proba` of encoded rows ``Xf`` (n_rows, n_features)."""
        device = next(self.model_.parameters()).device
        test = torch.from_numpy(self._tables(Xf)).to(device)
        views = self._views(device)
        context = self.context_
        n_classes, n_train = self.classes_.size, self.y_train_.size
        y = self.y_train_
        shifts = np.array([m.shift for m in self.members_])
        temperature = self.softmax_temperature
        # member i saw class c as (c + s_i) mod K: its column (c + s_i) mod K is class c
        back = (np.arange(n_classes)[None, :] + shifts[:, None]) % n_classes  # (M, K)
        if context is None:
            X = torch.cat((torch.from_numpy(self.train_tables_).to(device), test), dim=1)
        if self.tree_ is None:
            with self._autocast(device):
                if context is None:
                    logits = self.model_(X, self._labels(device), views=views)
                else:
                    logits = self.model_.forward_context(test, context)
            logits = _float(logits[..., :n_classes]) / temperature
            logp = torch.log_softmax(logits.double(), dim=-1).cpu().numpy()
            mean = np.take_along_axis(logp, back[:, None, :], axis=2).mean(axis=0)
            return mean - np.logaddexp.reduce(mean, axis=1, keepdims=True)
        # the hierarchy: row representations once, then the in-context stage per tree node
        with self._autocast(device):
            if context is None:
                rows = self.model_.represent(X, n_train, views=views, y_train=self._labels(device))
            else:
                rows = torch.cat((context.rows, self.model_.represent_context(test, context)), 1)
        test = torch.arange(n_train, rows.shape[1], device=device)
        members = []
        for i, shift in enumerate(shifts):

            def classify(index: np.ndarray, groups: np.ndarray, k: int, i=i) -> np.ndarray:
                keep = torch.cat((torch.from_numpy(index).to(device), test))
                labels = torch.from_numpy(groups).to(device)[None]
                with self._autocast(device):
                    logits = self.model_.icl(rows[i : i + 1, keep], labels)[0, :, :k]
                logits = _float(logits) / temperature
                return torch.log_softmax(logits.double(), dim=-1).cpu().numpy()

            logp = tree_log_proba(self.tree_, (y + shift) % n_classes, n_classes, classify)
            if self.preprocessing_ == "official":
                logp = np.log(np.exp(logp) + HIERARCHY_FLOOR)
            members.append(logp[:, back[i]])
        mean = np.mean(members, axis=0)
        return mean - np.logaddexp.reduce(mean, axis=1, keepdims=True)

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities, shape (n_samples, n_classes), rows sum to 1."""
        return np.exp(self.predict_log_proba(X))

    def predict(self, X) -> np.ndarray:
        """Most probable class of each row, in the labels ``y`` used at fit."""
        logp = self.predict_log_proba(X)
        return self.classes_[np.argmax(logp, axis=1)]
