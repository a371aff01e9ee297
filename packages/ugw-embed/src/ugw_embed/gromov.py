r"""The linearised Gromov–Wasserstein cost (square loss).

For metric matrices :math:`M_Y` (n × n) and :math:`M_Z` (k × k), weights :math:`\upsilon`
(n) and :math:`z` (k) and a coupling :math:`P` (n × k), the gradient of the square-loss GW
energy :math:`\sum (M_Y(x, x') - M_Z(y, y'))^2 P(x, y) P(x', y')` in :math:`P` is (up to the
factor 2) the cost

.. math::
    c_{GW}(x, y) = (M_Y^{\circ 2}\upsilon)(x) + (M_Z^{\circ 2} z)(y) - 2\,(M_Y P M_Z^\top)(x, y),

and :math:`\langle c_{GW}, P\rangle` is the GW energy of :math:`P` when its marginals are
:math:`\upsilon, z`. It equals POT's ``tensor_product(*init_matrix(M_Y, M_Z, υ, z), P)``.
"""

from __future__ import annotations

from typing import Any

from ot.backend import get_backend

__all__ = ["gw_cost"]


def gw_cost(MY: Any, MZ: Any, ups: Any, z: Any, P: Any) -> Any:
    """Linearised square-loss GW cost, shape (n, k); see the module docstring.

    Parameters
    ----------
    MY : array, shape (n, n)
    MZ : array, shape (k, k)
    ups : array, shape (n,)
    z : array, shape (k,)
    P : array, shape (n, k)
    """
    nx = get_backend(MY, MZ, P)
    return (
        nx.dot(MY**2, ups)[:, None] + nx.dot(MZ**2, z)[None, :] - 2.0 * nx.dot(nx.dot(MY, P), MZ.T)
    )
