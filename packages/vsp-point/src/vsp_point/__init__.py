"""vsp-point: vision semantic prompts for parameter-efficient point-cloud models (Zha et al., ICML 2025).

A frozen Point-MAE-style 3-D transformer (:class:`PointTransformer`, official checkpoints
through :meth:`PointTransformer.from_point_mae`) is fine-tuned through a few per cent of
its parameters. VSP projects each cloud to three depth maps (:func:`depth_maps`), reads
them with a frozen 2-D ViT from transformers (:class:`SemanticPrompter`), and lets the
resulting per-layer semantic prompts steer the Hybrid Attention Adapter
(:class:`HybridAttentionAdapter`) in every 3-D block. :func:`attach` builds it, or the
paper's 3-D baseline DAPT (:class:`DynamicAdapter` with internal prompts and SSF), or a head
on frozen features. Point ops are pure torch (:func:`farthest_point_sample`, :func:`knn`);
:class:`PointMAE` pretrains a backbone; :func:`fit` fine-tunes; :class:`ShapeWorld` makes
labelled synthetic clouds and :func:`load_h5` / :func:`load_modelnet40` read real ones.
"""

from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from icml25_core.lazy import lazy_exports

if TYPE_CHECKING:  # the public API, imported on first use (the entry point stays light)
    from .adapters import SSF, DynamicAdapter, HybridAttentionAdapter
    from .backbone import PointMAE, PointMAEConfig, PointTransformer, convert_point_mae_state_dict
    from .data import SHAPES, ShapeWorld, load_h5, load_modelnet40
    from .model import ADAPTERS, AdapterConfig, PointAdapterModel, attach
    from .ops import chamfer_distance, farthest_point_sample, group_points, knn
    from .projection import depth_maps
    from .training import augment, evaluate, fit, pretrain_point_mae, pretrain_vit
    from .vision import SemanticPrompter, layer_map

__getattr__, __dir__ = lazy_exports(__name__, __file__)

__version__ = _version("vsp-point")

__all__ = [
    "ADAPTERS",
    "SHAPES",
    "SSF",
    "AdapterConfig",
    "DynamicAdapter",
    "HybridAttentionAdapter",
    "PointAdapterModel",
    "PointMAE",
    "PointMAEConfig",
    "PointTransformer",
    "SemanticPrompter",
    "ShapeWorld",
    "__version__",
    "attach",
    "augment",
    "chamfer_distance",
    "convert_point_mae_state_dict",
    "depth_maps",
    "evaluate",
    "farthest_point_sample",
    "fit",
    "group_points",
    "knn",
    "layer_map",
    "load_h5",
    "load_modelnet40",
    "pretrain_point_mae",
    "pretrain_vit",
]
