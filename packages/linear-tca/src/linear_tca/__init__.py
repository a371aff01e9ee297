"""linear-tca: test-time correlation alignment (You, Lu & Huang, ICML 2025).

A trained classifier meets shifted test data. LinearTCA picks the test samples the model
is most certain about as a pseudo-source, and linearly maps all test embeddings so their
mean and covariance match that pseudo-source's; the model's own head classifies the
result. No back-propagation, no parameter change: one pass over the stream and a
``d x d`` eigendecomposition. LinearTCA+ does the same on top of any test-time adaptation
method. The package ships BN adaptation, Tent, T3A, EATA and SAR as baselines, the
corruptions of the laptop experiment, and a device-agnostic tensor-memory meter.
"""

from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from icml25_core.lazy import lazy_exports

if TYPE_CHECKING:
    from .adaptation import Adaptation, LinearTCAPlus, ZeroShotHead, adapt, classify
    from .alignment import (
        LinearTCA,
        adam_matrix,
        class_proportions,
        coral_loss,
        coral_matrix,
        covariance,
        ledoit_wolf_shrinkage,
        select_pseudo_source,
        shrink,
        softmax_entropy,
    )
    from .baselines import EATA, SAR, T3A, BNAdapt, SourceOnly, Stream, Tent, TTAMethod
    from .corruptions import (
        AFFINE_LEVELS,
        CORRUPTIONS,
        SEVERITY_LEVELS,
        AffineFeatureShift,
        corrupt,
    )
    from .digits import DigitsCNN, digits_split, train_source_model
    from .memory import TensorMemoryTracker

__getattr__, __dir__ = lazy_exports(__name__, __file__)

__version__ = _version("linear-tca")

__all__ = [
    "AFFINE_LEVELS",
    "CORRUPTIONS",
    "EATA",
    "SAR",
    "SEVERITY_LEVELS",
    "T3A",
    "Adaptation",
    "AffineFeatureShift",
    "BNAdapt",
    "DigitsCNN",
    "LinearTCA",
    "LinearTCAPlus",
    "SourceOnly",
    "Stream",
    "TTAMethod",
    "TensorMemoryTracker",
    "Tent",
    "ZeroShotHead",
    "__version__",
    "adam_matrix",
    "adapt",
    "class_proportions",
    "classify",
    "coral_loss",
    "coral_matrix",
    "corrupt",
    "covariance",
    "digits_split",
    "ledoit_wolf_shrinkage",
    "select_pseudo_source",
    "shrink",
    "softmax_entropy",
    "train_source_model",
]
