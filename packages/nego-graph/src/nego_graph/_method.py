"""What nego-graph tells the icml25 CLI."""

from icml25_core import Method

METHOD = Method(
    name="nego-graph",
    title="Enhancing Graph Invariant Learning from a Negative Inference Perspective",
    authors=(),
    venue="ICML 2025",
    url="https://openreview.net/forum?id=0pUSBi1BjC",
    summary="planned",
    experiments={"claim": "nego_graph.experiments:CLAIM"},
)
