"""ugw-embed: joint metric-space embedding by unbalanced OT with GW marginal penalties.

Two datasets without correspondences (point clouds of any dimension, or distance matrices)
are embedded together into one target space, a plane, sphere, torus, circle or any grid
with a metric, so that each embedding is close to an isometry and the two are aligned
(Beier, Piening, Beinert, Steidl, ICML 2025).
"""

from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from icml25_core.lazy import lazy_exports

if TYPE_CHECKING:
    from .baselines import gw_barycentric_alignment
    from .chain import ChainResult, chain_sinkhorn
    from .gromov import gw_cost
    from .metrics import distortion, embedded_wasserstein, foscttm
    from .model import JointEmbedding
    from .spaces import SPACES, TargetSpace, check_metric, grid_symmetries, make_space

__getattr__, __dir__ = lazy_exports(__name__, __file__)

__version__ = _version("ugw-embed")

__all__ = [
    "SPACES",
    "ChainResult",
    "JointEmbedding",
    "TargetSpace",
    "__version__",
    "chain_sinkhorn",
    "check_metric",
    "distortion",
    "embedded_wasserstein",
    "foscttm",
    "grid_symmetries",
    "gw_barycentric_alignment",
    "gw_cost",
    "make_space",
]
