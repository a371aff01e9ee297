"""nego-graph: graph invariant learning from a negative inference perspective (NeGo).

A causal-subgraph classifier whose invariance penalty runs over environments inferred by
learnable prompts trained to carry no label information (Yang et al., ICML 2025), with
ERM, IRM, VREx and GSAT baselines, a PyG trainer, and the Spurious-Motif generator.
"""

from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from icml25_core.lazy import lazy_exports

if TYPE_CHECKING:
    from .datasets import SpuriousMotif, load_local_dataset, make_graph
    from .layers import GNNEncoder, WeightedGINConv, edge_mask, grad_reverse
    from .models import ERM, GSAT, IRM, GNNClassifier, NeGo, SubgraphModel, VREx
    from .trainer import Trainer

__getattr__, __dir__ = lazy_exports(__name__, __file__)

__version__ = _version("nego-graph")

__all__ = [
    "ERM",
    "GSAT",
    "IRM",
    "GNNClassifier",
    "GNNEncoder",
    "NeGo",
    "SpuriousMotif",
    "SubgraphModel",
    "Trainer",
    "VREx",
    "WeightedGINConv",
    "__version__",
    "edge_mask",
    "grad_reverse",
    "load_local_dataset",
    "make_graph",
]
