"""Small temporal graphs shared by the tests of this package."""

import pytest

from geo_tlp import mixed_geometry_graph


@pytest.fixture(scope="session")
def small_graph():
    """A 60-node, 6-snapshot mixed-geometry graph (seed 0)."""
    return mixed_geometry_graph(60, 6, seed=0)
