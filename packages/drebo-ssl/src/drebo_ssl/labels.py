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

from icml25_core import as_float_array, check_choice, check_scalar


def quantile_labels(y, zeta: float = 0.33, *, nan: str = "raise") -> tuple[np.ndarray, float]:
    """Labels ``(n,)`` in {0, 1} and the threshold.

    Parameters
    ----------
    y : array_like (n,)
        Objective values (minimised).
    zeta : float in (0, 1)
        Fraction of the finite values labelled 1.
    nan : {"raise", "bad"}
        What NaN entries mean: an error (the default), or failed evaluations labelled 0
        (the optimisers' use: they keep failures in their history).

    Raises
    ------
    ValueError
        ``zeta`` outside (0, 1), NaN in ``y`` with ``nan="raise"``, inf in ``y``, or no
        finite value in ``y``.
    TypeError
        ``y`` not numeric.
    """
    check_scalar(zeta, "zeta", low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
    check_choice(nan, "nan", ("raise", "bad"))
    y = as_float_array(y, "y", finite=False, nonempty=False).ravel()
    if np.isinf(y).any():
        raise ValueError("y must not contain inf")
    finite = np.isfinite(y)
    if nan == "raise" and not finite.all():
        raise ValueError(
            f"y holds {int((~finite).sum())} NaN value(s); pass nan='bad' to label failed "
            "evaluations 0"
        )
    if not finite.any():
        raise ValueError("y must contain at least one finite value to set the threshold")
    threshold = float(np.quantile(y[finite], zeta, method="nearest"))
    labels = np.zeros(y.shape, dtype=int)
    labels[finite] = (y[finite] <= threshold).astype(int)
    return labels, threshold
