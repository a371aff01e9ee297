"""Fixtures: a tiny random TabICL checkpoint folder for tests that do not need the shipped one."""

import pytest
import torch

from tabicl_lite import TabICL, TabICLConfig

TINY = TabICLConfig(
    embed_dim=8,
    col_blocks=1,
    col_heads=2,
    n_inducing=4,
    row_blocks=1,
    row_heads=2,
    n_cls=2,
    icl_blocks=1,
    icl_heads=2,
)


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory):
    torch.manual_seed(0)
    return TabICL(TINY).save_pretrained(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture
def tiny_config():
    """The tiny architecture of ``tiny_model_path``."""
    return TINY
