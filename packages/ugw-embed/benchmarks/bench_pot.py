"""ugw-embed against POT's entropic Gromov–Wasserstein on the same two views.

The peer a user would otherwise pick to relate two unaligned datasets is an entropic GW
coupling (``ot.gromov.entropic_gromov_wasserstein``, as in SCOT). Both run on the two views
of the claim experiment; ugw-embed with the quick profile's settings (plane grid 15 x 15,
lam schedule 1, 10, 100, 15 block steps each). Time and peak memory for n in
{100, 300, 1000}, FOSCTTM alongside; then the cost growth of ugw-embed with the grid size.

Run: ``icml25 bench ugw-embed`` (or ``--smoke``).
"""

from __future__ import annotations

from icml25_core import BenchReport, compare, make_report
from ugw_embed import JointEmbedding, foscttm, gw_barycentric_alignment
from ugw_embed.experiments import PROFILES, make_views

CFG = PROFILES["quick"]


def _fit(X1, X2, grid: int, out: dict, key: str, s1, s2):
    def go():
        m = JointEmbedding(
            grid=grid, lam=list(CFG["sweep"]), eps=CFG["eps"], n_iter=CFG["n_iter"], seed=0
        )
        m.fit(X1, X2)
        out[key] = {
            "foscttm": foscttm(m.embedding1_[s1], m.embedding2_[s2]),
            "grid_points": grid * grid,
        }

    return go


def run(smoke: bool = False) -> BenchReport:
    sizes = (60,) if smoke else (100, 300, 1000)
    grids = (6, 8) if smoke else (10, 15, 20, 30)
    repeats = 1 if smoke else 3
    grid = 6 if smoke else CFG["grid"]
    comparisons = []
    for n in sizes:
        X1, X2, s1, s2 = make_views(n + n // 10, n // 10, seed=0)
        out: dict = {}

        def peer(X1=X1, X2=X2, out=out, s1=s1, s2=s2):
            E1, E2, _ = gw_barycentric_alignment(X1, X2)
            out["POT entropic GW"] = {"foscttm": foscttm(E1[s1], E2[s2])}

        comp = compare(
            {
                "POT entropic GW": peer,
                "ugw-embed": _fit(X1, X2, grid, out, "ugw-embed", s1, s2),
            },
            reference="POT entropic GW",
            label=f"n={n}",
            repeats=repeats if n < 1000 else 1,
            warmup=0 if n >= 300 or smoke else 1,
            extra=out,
        )
        comparisons.append(comp)
    X1, X2, s1, s2 = make_views(110, 10, seed=0)
    for g in grids:
        out = {}
        comp = compare(
            {"ugw-embed": _fit(X1, X2, g, out, "ugw-embed", s1, s2)},
            reference="ugw-embed",
            label=f"grid={g}x{g}",
            size=g * g,
            repeats=repeats,
            warmup=0,
            extra=out,
        )
        comparisons.append(comp)
    notes = [
        "first rows: time ratio of ugw-embed to POT's entropic GW (SCOT-style baseline, epsilon 1e-2)",
        "grid rows: ugw-embed alone at n=100; the slope is the growth of time with grid points k",
    ]
    return make_report("ugw-embed vs POT entropic GW", comparisons, "ugw-embed", "pot", notes=notes)


if __name__ == "__main__":
    run().render()
