"""Tiny random components of the SVD architecture (no download)."""

import pytest

from mimicmotion.components import TINY_UNET, tiny_components

__all__ = ["TINY_UNET", "tiny_components"]


@pytest.fixture
def components():
    return tiny_components()
