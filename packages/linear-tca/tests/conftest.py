"""A small trained digits model shared by the tests of this package."""

import pytest
import torch

from linear_tca import digits_split, train_source_model


@pytest.fixture(scope="session")
def digits():
    """``(model, x_test, y_test)``: a DigitsCNN (width 32) trained 8 epochs on seed 0."""
    x_train, y_train, x_test, y_test = digits_split(0)
    model = train_source_model(x_train, y_train, seed=0, width=32, epochs=8)
    return model, x_test, y_test


@pytest.fixture
def batches():
    """``batches(x, y=None, size=64)``: a list of ``(x, y)`` batches (bare ``x`` batches
    without ``y``)."""

    def make(x, y=None, size=64):
        if y is None:
            return [x[i : i + size] for i in range(0, len(x), size)]
        return [(x[i : i + size], y[i : i + size]) for i in range(0, len(x), size)]

    return make


@pytest.fixture
def state():
    """``state(module)``: a bitwise copy of ``module.state_dict()``."""
    return lambda module: {k: v.detach().clone() for k, v in module.state_dict().items()}


@pytest.fixture
def same_state():
    """``same_state(a, b)``: two state copies are bitwise equal."""
    return lambda a, b: a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
