r"""The density-ratio labels: the best ``zeta`` fraction of observations is class 1.

With :math:`\gamma = \mathrm{quantile}_\zeta(y)` (NumPy's ``method="nearest"``), a point is
class 1 when :math:`y \le \gamma` (minimisation). The class-1 probability of a classifier
trained on these labels is a monotone transform of the density ratio
:math:`\ell(x)/g(x)` of good to bad points (BORE), which is what DRE-BO maximises.

NaN objective values (failed evaluations) are kept in the history and labelled 0 (bad):
they take no part in the quantile, and the optimiser learns to avoid their region.
"""

from __future__ import annotations

import numpy as np

from icml25_core import check_scalar


def quantile_labels(y, zeta: float = 0.33) -> tuple[np.ndarray, float]:
    """Labels ``(n,)`` in {0, 1} and the threshold; NaN entries get label 0.

    Raises
    ------
    ValueError
        ``zeta`` outside (0, 1), or no finite value in ``y``.
    """
    check_scalar(zeta, "zeta", low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
    y = np.asarray(y, dtype=float).ravel()
    finite = np.isfinite(y)
    if not finite.any():
        raise ValueError("y must contain at least one finite value to set the threshold")
    threshold = float(np.quantile(y[finite], zeta, method="nearest"))
    labels = np.zeros(y.shape, dtype=int)
    labels[finite] = (y[finite] <= threshold).astype(int)
    return labels, threshold
