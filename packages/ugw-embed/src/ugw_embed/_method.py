"""What ugw-embed tells the icml25 CLI (imported without the solver's dependencies)."""

from icml25_core import Method

METHOD = Method(
    name="ugw-embed",
    title=(
        "Joint Metric Space Embedding by Unbalanced OT with Gromov-Wasserstein "
        "Marginal Penalization"
    ),
    authors=("Florian Beier", "Moritz Piening", "Robert Beinert", "Gabriele Steidl"),
    venue="ICML 2025",
    url="https://arxiv.org/abs/2502.07510",
    summary="Embed two unaligned datasets jointly into a plane, sphere, torus or grid",
    experiments={"joint-embedding": "ugw_embed.experiments:JOINT_EMBEDDING"},
    status="available",
    claim=(
        "did not hold (quick and full): on isometric views within 0.02 of the GW baseline "
        "(FOSCTTM 0.006 vs 0.011; full 0.003 vs 0.009), but on S-curve vs swiss roll "
        "(geodesic) not better (0.420 vs 0.398; full 0.487 vs 0.380)"
    ),
)
