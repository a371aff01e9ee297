"""The quick claim test: what the quick profile measured on seed 0, with stated margins.

The quick profile (tiny SVD-architecture components on a CPU) measured: peak memory of
denoising flat in the video's length (x1.13-1.16 from 16 to 64 frames), and no effect of
regional loss amplification or of fusion on boundary smoothness beyond noise (hand-region
MSE 0.519 vs 0.521, boundary jump 1.09 vs 1.12). Time's growth with frames is a timing and
is left to the benchmark (no timed assertions here). Slower than the package budget (about
80 s on two cores): the quick profile trains the tiny model twice for 150 steps, the least
that separates amplified from plain training at all.
"""

import pytest

from icml25_core import mean_metric, run_experiment
from mimicmotion.experiments import AMPLIFIED, FUSED, LONG_VIDEO, PLAIN


@pytest.mark.claim
def test_long_video_quick(tmp_path):
    result = run_experiment(LONG_VIDEO, profile="quick", seeds=[0], out_dir=tmp_path)
    rows = result.rows
    peak = [mean_metric(rows, "peak_mib", FUSED, part="length", num_frames=n) for n in (16, 32, 64)]
    # held: 4x the frames, at most 1.5x the peak memory (the experiment's criterion)
    assert peak[-1] <= 1.5 * peak[0], peak
    hand_plain = mean_metric(rows, "hand_mse", PLAIN, part="training")
    hand_amp = mean_metric(rows, "hand_mse", AMPLIFIED, part="training")
    # did not hold at this scale: amplification moves hand-region error by under 5 %
    assert abs(hand_amp - hand_plain) <= 0.05 * hand_plain, (hand_amp, hand_plain)
    fused = mean_metric(rows, "boundary_jump", FUSED, part="smoothness")
    indep = mean_metric(rows, "boundary_jump", "independent windows", part="smoothness")
    # fused windows are not rougher than independent ones (within 5 %)
    assert fused <= 1.05 * indep, (fused, indep)
    assert "peak memory" in result.verdict.summary
