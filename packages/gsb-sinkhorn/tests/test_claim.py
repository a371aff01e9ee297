"""The quick claim test: linear convergence for every divergence."""

import numpy as np
import pytest

from gsb_sinkhorn.experiments import LINEAR_CONVERGENCE, R2_MIN, fit_rate
from icml25_core import run_experiment


def test_fit_rate_recovers_a_geometric_sequence():
    rate, r2, max_ratio = fit_rate(3.0 * 0.7 ** np.arange(20))
    assert rate == pytest.approx(0.7, rel=1e-12)
    assert r2 == pytest.approx(1.0)
    assert max_ratio == pytest.approx(0.7)


@pytest.mark.claim
def test_linear_convergence_quick(tmp_path):
    result = run_experiment(LINEAR_CONVERGENCE, profile="quick", seeds=[0], out_dir=tmp_path)
    ours = [
        r
        for r in result.rows
        if r.method == "gsb-sinkhorn"
        and r.setting["divergence"] in ("kl", "logistic", "contingency")
    ]
    assert len(ours) == 6
    # margin: every fitted rate is at most 0.95 (well below 1) and the fit is a straight line
    for row in ours:
        assert row.metrics["converged"] == 1.0
        assert row.metrics["rate"] <= 0.95, row
        assert row.metrics["r2"] >= R2_MIN, row
    assert result.method == "gsb-sinkhorn"
    assert result.held
    assert (tmp_path / "residuals.png").exists()
    # the KL rate agrees with POT's log-domain Sinkhorn (same algorithm) within 5%
    for n in (50, 200):
        mine = next(r for r in ours if r.setting == {"divergence": "kl", "n": n}).metrics["rate"]
        pot = next(
            r for r in result.rows if r.method == "POT sinkhorn_log" and r.setting["n"] == n
        ).metrics["rate"]
        assert mine == pytest.approx(pot, rel=0.05)
