"""nego-graph: Enhancing Graph Invariant Learning from a Negative Inference Perspective (planned)."""

from importlib.metadata import version as _version

__version__ = _version("nego-graph")

__all__ = ["__version__"]
