"""LinearTCA on embeddings: closed forms, identities and a peer (scikit-learn)."""

import numpy as np
import pytest
import torch
from sklearn.covariance import ledoit_wolf_shrinkage as sklearn_lw

from linear_tca import (
    LinearTCA,
    adam_matrix,
    class_proportions,
    coral_loss,
    coral_matrix,
    covariance,
    ledoit_wolf_shrinkage,
    select_pseudo_source,
    softmax_entropy,
)


def _data(n=300, d=6, c=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    Z = torch.randn(n, d, generator=g, dtype=torch.float64) @ torch.randn(
        d, d, generator=g, dtype=torch.float64
    )
    logits = torch.randn(n, c, generator=g, dtype=torch.float64) * 3
    return Z, logits


def _spd(d, seed, spread=1.0):
    g = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    return (Q * torch.exp(spread * (torch.rand(d, generator=g, dtype=torch.float64) - 0.5))) @ Q.T


def test_keeping_every_sample_gives_identity_and_unchanged_embeddings():
    Z, logits = _data()
    for shrinkage in (None, "ledoit-wolf", 0.3):
        tca = LinearTCA(k=None, shrinkage=shrinkage).fit(Z, logits)
        torch.testing.assert_close(tca.W_, torch.eye(6, dtype=torch.float64), atol=1e-9, rtol=0)
        torch.testing.assert_close(tca.transform(Z), Z, atol=1e-9, rtol=0)


def test_closed_form_matches_target_covariance_to_source():
    Z, logits = _data()
    tca = LinearTCA(k=10, shrinkage=None).fit(Z, logits)
    W = tca.W_
    torch.testing.assert_close(W.T @ tca.cov_target_ @ W, tca.cov_source_, atol=1e-9, rtol=1e-9)
    assert coral_loss(W, tca.cov_source_, tca.cov_target_) < 1e-12
    # the aligned embeddings have the pseudo-source mean and covariance
    Zp = tca.transform(Z)
    torch.testing.assert_close(Zp.mean(0), tca.mean_source_, atol=1e-9, rtol=0)
    torch.testing.assert_close(covariance(Zp), tca.cov_source_, atol=1e-9, rtol=1e-9)


def test_symmetric_positive_definite_affine_shift_is_recovered():
    # a whitened source (sample covariance exactly I) shifted by z -> z A + b, A SPD:
    # W = (A^2)^{-1/2} = A^{-1}, and the map sends every target point back to its source
    g = torch.Generator().manual_seed(1)
    X = torch.randn(500, 5, generator=g, dtype=torch.float64)
    X = X - X.mean(0)
    X = X @ torch.linalg.inv(torch.linalg.cholesky(covariance(X))).T + 2.0
    A, b = _spd(5, 2, spread=2.0), torch.randn(5, generator=g, dtype=torch.float64)
    Zt = X @ A + b
    W = coral_matrix(covariance(X), covariance(Zt))
    torch.testing.assert_close(W, torch.linalg.inv(A), atol=1e-8, rtol=1e-8)
    torch.testing.assert_close((Zt - Zt.mean(0)) @ W + X.mean(0), X, atol=1e-8, rtol=1e-8)


def test_ledoit_wolf_equals_scikit_learn():
    for n, d, seed in ((40, 8, 0), (15, 30, 1), (200, 3, 2)):
        Z, _ = _data(n, d, seed=seed)
        assert ledoit_wolf_shrinkage(Z) == pytest.approx(sklearn_lw(Z.numpy()), rel=1e-10)
        assert ledoit_wolf_shrinkage(Z.float()) == pytest.approx(sklearn_lw(Z.numpy()), rel=1e-4)


def test_coral_loss_is_the_frobenius_distance_by_hand():
    Cs, Ct = _spd(4, 0), _spd(4, 1)
    W = _spd(4, 3)
    by_hand = np.sum((W.numpy().T @ Ct.numpy() @ W.numpy() - Cs.numpy()) ** 2)
    assert float(coral_loss(W, Cs, Ct)) == pytest.approx(by_hand, rel=1e-12)


def test_adam_solver_is_the_official_few_small_steps():
    Cs, Ct = _spd(5, 0, 3.0), _spd(5, 1, 3.0)
    W = adam_matrix(Cs, Ct, n_iter=20, lr=1e-3)
    # Adam moves each entry by about lr per step (a little more while its moment
    # estimates warm up): W stays within 0.022 of I
    moved = float((W - torch.eye(5, dtype=W.dtype)).abs().max())
    assert 0.01 <= moved <= 20 * 1e-3 * 1.1
    eye = torch.eye(5, dtype=W.dtype)
    assert coral_loss(W, Cs, Ct) < coral_loss(eye, Cs, Ct)
    closed = coral_matrix(Cs, Ct)
    assert coral_loss(closed, Cs, Ct) < 1e-12 < coral_loss(W, Cs, Ct)


def test_pseudo_source_keeps_the_lowest_entropy_predictions_per_class():
    _, logits = _data(n=200, c=4)
    picked = select_pseudo_source(logits, 5, "uniform")
    predicted, entropy = logits.argmax(1), softmax_entropy(logits)
    for c in range(4):
        members = torch.nonzero(predicted == c).flatten()
        mine = picked[predicted[picked] == c]
        assert mine.numel() == min(5, members.numel())
        threshold = entropy[mine].max()
        others = members[~torch.isin(members, mine)]
        assert bool((entropy[others] >= threshold).all())


def test_proportions_scale_k_by_class_share():
    logits = torch.zeros(12, 3)
    logits[:6, 0] = 5  # 6 predicted as 0, 3 as 1, 3 as 2
    logits[6:9, 1] = 5
    logits[9:, 2] = 5
    torch.testing.assert_close(
        class_proportions(logits, "predicted"), torch.tensor([1.5, 0.75, 0.75], dtype=torch.float64)
    )
    torch.testing.assert_close(
        class_proportions(logits, "uniform"), torch.ones(3, dtype=torch.float64)
    )
    labels = torch.tensor([0, 1, 2] * 4)
    torch.testing.assert_close(
        class_proportions(logits, "oracle", labels), torch.ones(3, dtype=torch.float64)
    )
    assert select_pseudo_source(logits, 2, "predicted").tolist() == [0, 1, 2, 6, 9]


def test_rank_deficient_pseudo_source_is_shrunk_and_finite():
    Z, logits = _data(n=400, d=40, c=4)
    tca = LinearTCA(k=3).fit(Z, logits)  # 12 pseudo-source samples in 40 dimensions
    assert tca.support_.numel() == 12
    assert tca.shrinkage_[0] > 0.0
    assert torch.linalg.matrix_rank(tca.cov_source_) == 40
    assert bool(torch.isfinite(tca.transform(Z)).all())
    raw = LinearTCA(k=3, shrinkage=None).fit(Z, logits)
    assert bool(torch.isfinite(raw.W_).all())


def test_types_round_trip():
    Z, logits = _data()
    out = LinearTCA().fit_transform(Z.numpy(), logits.numpy())
    assert isinstance(out, np.ndarray) and out.dtype == np.float64
    out32 = LinearTCA().fit_transform(Z.float(), logits.float())
    assert isinstance(out32, torch.Tensor) and out32.dtype == torch.float32
    np.testing.assert_allclose(out32.numpy(), out, rtol=1e-3, atol=1e-3)


def test_mean_only_ablation_shifts_without_rotating():
    Z, logits = _data()
    tca = LinearTCA(align="mean").fit(Z, logits)
    torch.testing.assert_close(tca.W_, torch.eye(6, dtype=torch.float64))
    torch.testing.assert_close(
        tca.transform(Z) - Z, (tca.mean_source_ - tca.mean_target_).expand_as(Z)
    )


@pytest.mark.parametrize(
    ("kwargs", "fit_args", "match"),
    [
        ({}, "nan", "Z must be finite"),
        ({}, "mismatch", "one row per embedding"),
        ({"k": 0}, None, "k must be >= 1"),
        ({"k": 2.5}, None, "k must be an integer"),
        ({"proportions": "true"}, None, "proportions must be one of"),
        ({"solver": "sgd"}, None, "solver must be one of"),
        ({"shrinkage": 1.5}, None, "shrinkage must be <= 1"),
        ({"shrinkage": "oas"}, None, "shrinkage must be one of"),
        ({"proportions": "oracle"}, None, "needs labels"),
        ({}, "one-class", "at least 2 classes"),
    ],
)
def test_bad_input_is_refused_naming_the_argument(kwargs, fit_args, match):
    Z, logits = _data()
    if fit_args == "nan":
        Z = Z.clone()
        Z[3, 2] = float("nan")
    elif fit_args == "mismatch":
        logits = logits[:-1]
    elif fit_args == "one-class":
        logits = logits[:, :1]
    with pytest.raises((ValueError, TypeError), match=match):
        LinearTCA(**kwargs).fit(Z, logits)


def test_transform_checks():
    Z, logits = _data()
    with pytest.raises(RuntimeError, match="not fitted"):
        LinearTCA().transform(Z)
    tca = LinearTCA().fit(Z, logits)
    with pytest.raises(ValueError, match="6 columns"):
        tca.transform(Z[:, :5])
    with pytest.raises(ValueError, match="at least 2"):
        LinearTCA(k=None).fit(Z[:1], logits[:1])


def test_oracle_labels_and_a_runaway_adam_solver_are_named():
    Z, logits = _data()
    y = logits.argmax(1)
    LinearTCA(proportions="oracle").fit(Z, logits, labels=y)
    with pytest.raises(ValueError, match="labels must hold labels below n_classes=4, got 9"):
        LinearTCA(proportions="oracle").fit(Z, logits, labels=np.full(len(Z), 9))
    with pytest.raises(ValueError, match="labels must hold whole-number class labels"):
        LinearTCA(proportions="oracle").fit(Z, logits, labels=y.double() + 0.5)
    with pytest.raises(FloatingPointError, match=r"CORAL loss became .* lr=1e\+06; lower lr"):
        LinearTCA(solver="adam", lr=1e6).fit(Z, logits)


def test_coral_matches_deep_coral_by_hand():
    # pytorch-adapt's CORALLoss (the peer) does not import beside this workspace
    # (torchmetrics 0.9 needs pkg_resources); its formula by hand in NumPy: covariance
    # (X^T X - s s^T / n) / (n - 1) with s the column sums, loss ||C_x - C_y||_F^2 / (4 d^2)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(50, 4)), rng.normal(size=(40, 4)) * 2 + 1

    def cov(a):
        s = a.sum(0)
        return (a.T @ a - np.outer(s, s) / len(a)) / (len(a) - 1)

    expected = np.sum((cov(x) - cov(y)) ** 2) / (4 * 4**2)
    cx, cy = covariance(torch.from_numpy(x)), covariance(torch.from_numpy(y))
    np.testing.assert_allclose(cx.numpy(), cov(x), rtol=1e-12)
    eye = torch.eye(4, dtype=torch.float64)
    assert float(coral_loss(eye, cx, cy)) / (4 * 4**2) == pytest.approx(expected, rel=1e-12)


def test_official_proportions_divide_by_class_zero_and_differ_from_oracle_when_imbalanced():
    from linear_tca.alignment import select_pseudo_source

    logits = torch.eye(3).repeat(40, 1)[:100]  # predictions 0, 1, 2, 0, ... (34 / 33 / 33)
    labels = torch.tensor([0] * 20 + [1] * 40 + [2] * 40)  # class 0 under-represented
    official = class_proportions(logits, "official", labels)
    oracle = class_proportions(logits, "oracle", labels)
    torch.testing.assert_close(official, torch.tensor([1.0, 2.0, 2.0], dtype=torch.float64))
    torch.testing.assert_close(oracle, torch.tensor([0.6, 1.2, 1.2], dtype=torch.float64))
    # k = 10: official keeps 10 / 20 / 20 (capped by the 33 members), oracle 6 / 12 / 12
    assert len(select_pseudo_source(logits, 10, "official", labels)) == 50
    assert len(select_pseudo_source(logits, 10, "oracle", labels)) == 30
    balanced = torch.arange(3).repeat(30)
    torch.testing.assert_close(
        class_proportions(logits[:90], "official", balanced),
        class_proportions(logits[:90], "oracle", balanced),
    )
    with pytest.raises(ValueError, match="class 0, which has no sample"):
        class_proportions(logits, "official", labels.clamp(min=1))
    with pytest.raises(ValueError, match="'official' needs labels"):
        class_proportions(logits, "official")
