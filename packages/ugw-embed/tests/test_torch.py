"""The torch backend gives the NumPy answer (on the best available device)."""

import sys

import numpy as np
import pytest

from ugw_embed import JointEmbedding, chain_sinkhorn

torch = pytest.importorskip("torch")


def test_chain_sinkhorn_torch_matches_numpy():
    rng = np.random.default_rng(0)
    a = np.full(6, 1 / 6)
    C = [rng.random((6, 5)), rng.random((5, 5)), rng.random((5, 6))]
    ref = chain_sinkhorn([a, None, None, a], C, 0.05, tol=1e-12)
    got = chain_sinkhorn(
        [torch.tensor(a), None, None, torch.tensor(a)],
        [torch.tensor(c) for c in C],
        0.05,
        tol=1e-12,
    )
    assert got.n_iter == ref.n_iter
    for p, q in zip(got.edge_plans, ref.edge_plans, strict=True):
        np.testing.assert_allclose(p.numpy(), q, rtol=1e-10, atol=1e-14)


def test_estimator_device_matches_numpy():
    rng = np.random.default_rng(1)
    X = rng.random((25, 3))
    kw = {"grid": 7, "lam": [1.0, 10.0], "eps": 1e-2, "n_iter": 4, "seed": 0}
    ref = JointEmbedding(**kw).fit(X, 2 * X)
    got = JointEmbedding(device="auto", **kw).fit(X, 2 * X)
    assert isinstance(got.plan1_, np.ndarray)
    np.testing.assert_allclose(got.plan1_, ref.plan1_, rtol=1e-8, atol=1e-14)
    np.testing.assert_allclose(got.embedding2_, ref.embedding2_, rtol=1e-8, atol=1e-12)


def test_a_device_without_torch_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    X = np.random.default_rng(2).random((10, 3))
    with pytest.raises(ImportError, match=r"pip install 'ugw-embed\[torch\]'"):
        JointEmbedding(device="cuda", grid=5, n_iter=1).fit(X, X)
