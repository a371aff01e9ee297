"""Default settings on Gaussian pairs other than the experiment's, against closed forms.

SemiDualOT's map against the OT map (``ot.gaussian``). OTP's barycentric projection (the
mean of its plan's samples at a point) against the closed form of the problem it solves
at its final noise level: the OT map from N(m_s, C_s + eps^2 I) to the target, averaged
over the noise, which is ``A_eps (x - m_s) + m_t``; and against the unsmoothed map, which
it misses by the smoothing bias (large when the target is much wider than the source).
Errors are ``metrics.map_error``: squared error over the reference map's variance.
"""

import numpy as np
import pytest

from otp_map import OTP, SemiDualOT
from otp_map.metrics import gaussian_map, map_error

PAIRS = {
    # means 3.4 apart, anisotropic and differently oriented covariances (issue 31's pair)
    "shifted-anisotropic": (
        [0.0, 0.0],
        [[1.0, 0.6], [0.6, 0.8]],
        [2.04, 2.72],
        [[0.3, -0.2], [-0.2, 1.5]],
    ),
    "scaled": ([0.0, 0.0], np.eye(2), [0.0, 0.0], 9 * np.eye(2)),  # T(x) = 3x
    "small-shifted": ([1.0, -1.0], 0.01 * np.eye(2), [1.5, -0.5], np.diag([0.04, 0.0025])),
}
SETTINGS = {"hidden": (64, 64, 64), "seed": 0}  # everything else default
N_ITER = 2000


def _pair(name):
    ms, cs, mt, ct = (np.asarray(v, float) for v in PAIRS[name])
    rng = np.random.default_rng(0)
    xs = rng.multivariate_normal(ms, cs, 4000)
    xt = rng.multivariate_normal(mt, ct, 4000)
    return xs, xt, (ms, cs, mt, ct)


@pytest.mark.parametrize("name", list(PAIRS))
def test_semidual_learns_the_gaussian_map(name):
    xs, xt, (ms, cs, mt, ct) = _pair(name)
    model = SemiDualOT(**SETTINGS).fit(xs, xt, n_iter=N_ITER)
    x = xs[:1000]
    # measured with 0.2.3: 0.0028, 0.0025, 0.0024 (0.2.2 on the scaled pair: 0.18)
    assert map_error(model.transport(x), gaussian_map(ms, cs, mt, ct)(x)) < 0.01


@pytest.mark.parametrize("name", list(PAIRS))
def test_otp_learns_the_smoothed_gaussian_plan(name):
    xs, xt, (ms, cs, mt, ct) = _pair(name)
    model = OTP(**SETTINGS).fit(xs, xt, n_iter=N_ITER)
    x = xs[:1000]
    eps = model.eps_  # the final noise, 0.2 of the target's scale (no atoms here)
    assert eps == pytest.approx(0.2 * np.sqrt(np.trace(ct) / 2), rel=0.1)
    projection = model.transport(x, n_samples=256, seed=0).mean(0)
    smoothed = gaussian_map(ms, cs + eps**2 * np.eye(2), mt, ct)(x)
    assert map_error(projection, smoothed) < 0.01  # measured: 0.0023, 0.0019, 0.0021
    # the unsmoothed map: within 0.05, the experiment's bound (measured 0.0055, 0.025,
    # 0.0049; the smoothing bias alone is 0.020 of the variance on the scaled pair, where
    # the final noise is 0.6 of the source's spread)
    assert map_error(projection, gaussian_map(ms, cs, mt, ct)(x)) < 0.05
