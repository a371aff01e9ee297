"""The quick claim test: what the paper claims, at laptop scale, with a stated margin.

Seed 0 of the quick profile (default ``init="perturbed"``) measured distortion 0.274, 0.156,
0.118 for lam up to 1, 10, 100, FOSCTTM 0.005 at lam 100 against the GW baseline's 0.008 on
the sheet, and FOSCTTM 0.681 against 0.581 on the S-curve vs swiss roll pair.
"""

import numpy as np
import pytest

from icml25_core import run_experiment
from ugw_embed.experiments import BASELINE, HARD, JOINT_EMBEDDING, METHOD, SHEET


@pytest.mark.claim
def test_joint_embedding_quick(tmp_path):
    result = run_experiment(
        JOINT_EMBEDDING, method=METHOD, profile="quick", seeds=[0], out_dir=tmp_path
    )
    sheet = [r for r in result.rows if r.setting["pair"] == SHEET]
    ours = {r.setting["lam_max"]: r.metrics for r in sheet if r.method == METHOD}
    base = next(r.metrics for r in sheet if r.method == BASELINE)
    # distortion falls from the first to the last value of lam. At every step (the
    # experiment's criterion) on seeds 0 and 100 (0.274 -> 0.156 -> 0.118, 0.271 -> 0.141
    # -> 0.125) but not on seed 200 (0.171 -> 0.202 -> 0.118), so the steps are not
    # asserted (issue 77); last / first: 0.43 (Xeon and AVX2 path alike), 0.46, 0.69 (mean
    # 0.50, sd 0.13; "at most half" failed on seed 200): the bound is mean + 2 sd
    lams = sorted(ours)
    assert ours[lams[-1]]["distortion"] <= 0.8 * ours[lams[0]]["distortion"]
    # near-isometric at the end of the schedule (stated margin: distortion below 0.2), and
    # GW aligns this easy pair (FOSCTTM below 0.03). With the paper's product start the
    # alignment was bimodal (a view mirrored on some seeds, chosen by rounding: the result
    # changed with the BLAS thread count); the perturbed start fixes the orientation
    assert ours[lams[-1]]["distortion"] < 0.2
    # ugw-embed's FOSCTTM at lam 100: 0.005 on seed 0 (Xeon and AVX2 path alike), 0.155 on
    # seed 100 (partly mirrored), 0.002 on seed 200 (the README's seeds 0-9 end at 0.002-0.013 but seed 9 at
    # 0.518): whether one seed aligns this closely is inside the spread; what held in
    # these runs is an alignment far from chance (0.5): mean + 2 sd 0.19
    assert ours[lams[-1]]["foscttm"] < 0.25
    assert base["foscttm"] < 0.03  # GW: 0.008 / 0.007 / 0.008 on seeds 0 / 100 / 200
    assert np.isfinite(ours[lams[-1]]["distance"])
    # the hard pair (S-curve vs swiss roll, geodesic distances): on seed 0 neither method
    # aligns it; both match the curve reversed (measured FOSCTTM ugw-embed 0.681, GW 0.581;
    # 0.5 is chance), the S-curve being symmetric under u -> 1 - u
    hard = {r.method: r.metrics["foscttm"] for r in result.rows if r.setting["pair"] == HARD}
    assert hard[METHOD] > 0.4 and hard[BASELINE] > 0.4
    assert not result.verdict.held
    assert (tmp_path / "embeddings.png").exists()
