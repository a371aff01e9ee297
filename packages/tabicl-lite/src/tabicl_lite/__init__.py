"""tabicl-lite: TabICL, a tabular foundation model for in-context learning (Qu et al., ICML 2025).

:class:`TabICLClassifier` is a scikit-learn classifier whose ``fit`` only stores the
training table: a pretrained :class:`TabICL` network predicts test rows with the training
rows as context. A small checkpoint, pretrained by :mod:`tabicl_lite.pretrain` on the SCM
prior of :mod:`tabicl_lite.prior`, ships inside the wheel; the official TabICL v1
checkpoints load through :mod:`tabicl_lite.convert` and run with the official
preprocessing (:mod:`tabicl_lite.official`).
"""

from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from icml25_core.lazy import lazy_exports

if TYPE_CHECKING:
    from .classifier import TabICLClassifier, load_model, shipped_checkpoint_path
    from .convert import from_official_checkpoint
    from .hierarchy import build_tree
    from .model import Context, TabICL, TabICLConfig
    from .prior import PriorConfig, sample_batch, sample_table

__getattr__, __dir__ = lazy_exports(__name__, __file__)

__version__ = _version("tabicl-lite")

__all__ = [
    "Context",
    "PriorConfig",
    "TabICL",
    "TabICLClassifier",
    "TabICLConfig",
    "__version__",
    "build_tree",
    "from_official_checkpoint",
    "load_model",
    "sample_batch",
    "sample_table",
    "shipped_checkpoint_path",
]
