"""geo-tlp: cross-geometric (Euclidean + hyperbolic) temporal link prediction.

A reconstruction of Sun, Cao, Tsang and Shen, "Analytical Construction on Geometric
Architectures: Transitioning from Static to Temporal Link Prediction" (ICML 2025; no code
or full text is public). Each node's local hyperbolicity (the relative Gromov delta of its
k-hop ball) decides how much its links are modelled on the Poincare ball (geoopt) rather
than in Euclidean space (PyG); a GRU per geometry aggregates the node states over
snapshots; an evolution-driven objective reconstructs each snapshot and forecasts the
next. :class:`GeoTLP` is the estimator (``fit(snapshots)``, ``predict_links(t, pairs)``,
``score(snapshot)``), :func:`evaluate` the HTGN protocol; the baselines are
``GeoTLP(routing="euclidean")``, ``GeoTLP(routing="hyperbolic")`` (HTGN-like),
:class:`EvolveGCN` and :class:`StaticGAE`.
"""

from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from icml25_core.lazy import lazy_exports

if TYPE_CHECKING:  # the public API, imported on first use (the entry point stays light)
    from .data import (
        MixedGeometryGraph,
        check_snapshots,
        from_temporal_data,
        load_edge_csv,
        mixed_geometry_graph,
        snapshots_from_edges,
    )
    from .estimators import EvolveGCN, GeoTLP, StaticGAE, TemporalLinkPredictor
    from .geometry import HypGCNConv, poincare_ball, tangent_aggregate
    from .hyperbolicity import gromov_delta, hyperbolicity_sequence, local_hyperbolicity
    from .models import ROUTINGS, EvolveGCNNet, GeoTLPNet, StaticGAENet
    from .protocol import evaluate, group_negatives, link_metrics, seeded, undirected_pairs

__getattr__, __dir__ = lazy_exports(__name__, __file__)

__version__ = _version("geo-tlp")

__all__ = [
    "ROUTINGS",
    "EvolveGCN",
    "EvolveGCNNet",
    "GeoTLP",
    "GeoTLPNet",
    "HypGCNConv",
    "MixedGeometryGraph",
    "StaticGAE",
    "StaticGAENet",
    "TemporalLinkPredictor",
    "__version__",
    "check_snapshots",
    "evaluate",
    "from_temporal_data",
    "gromov_delta",
    "group_negatives",
    "hyperbolicity_sequence",
    "link_metrics",
    "load_edge_csv",
    "local_hyperbolicity",
    "mixed_geometry_graph",
    "poincare_ball",
    "seeded",
    "snapshots_from_edges",
    "tangent_aggregate",
    "undirected_pairs",
]
