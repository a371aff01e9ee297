"""LinearTCA on whole models: adapt(), LinearTCA+, the zero-shot head."""

import copy

import pytest
import torch
import torch.nn.functional as F

from linear_tca import (
    AffineFeatureShift,
    BNAdapt,
    LinearTCA,
    LinearTCAPlus,
    Tent,
    ZeroShotHead,
    adapt,
    corrupt,
)


def _accuracy(logits, labels):
    return float((logits.argmax(1) == labels).float().mean())


def test_defaults_work_on_clean_data_and_change_no_parameter(digits, batches, state, same_state):
    model, x, y = digits
    model.train()  # the caller's mode is restored afterwards
    before = state(model)
    out = adapt(model, model.featurizer, model.head, batches(x, y))
    assert same_state(before, state(model))
    assert all(m.training for m in model.modules())
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(out.base_logits, model(x))
    assert out.logits.shape == (len(x), 10) and bool(torch.isfinite(out.logits).all())
    # on the training distribution the alignment costs at most 2 points
    assert _accuracy(out.logits, y) >= _accuracy(out.base_logits, y) - 0.02
    assert _accuracy(out.base_logits, y) > 0.85
    torch.testing.assert_close(out.labels, y)


def test_k_all_on_the_source_distribution_leaves_predictions_unchanged(digits, batches):
    model, x, y = digits
    out = adapt(model, model.featurizer, model.head, batches(x, y), tca=LinearTCA(k=None))
    assert torch.equal(out.predictions, out.base_logits.argmax(1))
    torch.testing.assert_close(out.logits, out.base_logits, atol=1e-4, rtol=1e-4)


def test_alignment_undoes_part_of_an_affine_embedding_shift(digits, batches):
    model, x, y = digits
    with torch.no_grad():
        scale = model.featurizer(x).std(0)
    g = torch.Generator().manual_seed(0)
    shifted = AffineFeatureShift(model.featurizer, 32, 2.0, scale=scale, generator=g)
    out = adapt(model, shifted, model.head, batches(x, y))
    # margin: the shift costs the source model about 5 points, LinearTCA wins back at
    # least 1 (measured 2.2)
    assert _accuracy(out.logits, y) >= _accuracy(out.base_logits, y) + 0.01


def test_bare_tensor_batches_have_no_labels_and_oracle_then_refuses(digits, batches):
    model, x, _ = digits
    out = adapt(model, model.featurizer, model.head, batches(x))
    assert out.labels is None
    with pytest.raises(ValueError, match="oracle"):
        adapt(model, model.featurizer, model.head, batches(x), tca=LinearTCA(proportions="oracle"))


def test_linear_tca_plus_aligns_the_base_methods_stream(digits, batches):
    model, x, y = digits
    shifted = corrupt(x, "contrast", 2)
    base = Tent(model.featurizer, model.head)
    out = LinearTCAPlus(base, tca=LinearTCA(k=None)).run(batches(shifted, y))
    # k = all on the base's own stream: the alignment is the identity
    torch.testing.assert_close(out.logits, out.base_logits, atol=1e-4, rtol=1e-4)
    plus = LinearTCAPlus(BNAdapt(model.featurizer, model.head)).run(batches(shifted, y))
    assert plus.tca.W_.shape == (32, 32)
    with pytest.raises(TypeError, match="TTAMethod"):
        LinearTCAPlus(model)


def test_bad_inputs(digits, batches):
    model, x, y = digits
    nan = x.clone()
    nan[0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="loader batch must be finite"):
        adapt(model, model.featurizer, model.head, batches(nan, y))
    with pytest.raises(ValueError, match="no batch"):
        adapt(model, model.featurizer, model.head, [])
    with pytest.raises(TypeError, match="loader must yield"):
        adapt(model, model.featurizer, model.head, [{"x": x}])
    with pytest.raises(TypeError, match="model must be"):
        adapt(lambda t: t, model.featurizer, model.head, batches(x))


def test_nan_embeddings_are_refused(digits, batches):
    model, x, y = digits
    broken = copy.deepcopy(model)
    with torch.no_grad():
        broken.featurizer[0].weight[0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="Z must be finite"):
        adapt(broken, broken.featurizer, broken.head, batches(x, y))


def test_zero_shot_head_is_scaled_cosine_similarity():
    g = torch.Generator().manual_seed(0)
    text, z = torch.randn(5, 8, generator=g), torch.randn(3, 8, generator=g)
    head = ZeroShotHead(text, logit_scale=50.0)
    expected = 50.0 * F.cosine_similarity(z[:, None], text[None], dim=2)
    torch.testing.assert_close(head(z), expected)
    with pytest.raises(ValueError, match="text_embeddings"):
        ZeroShotHead(torch.randn(5))
    nan = text.clone()
    nan[2, 3] = float("nan")
    with pytest.raises(ValueError, match="text_embeddings must be finite"):
        ZeroShotHead(nan)
    with pytest.raises(ValueError, match=r"text_embeddings rows \[1\] are zero"):
        ZeroShotHead(torch.cat([text[:1], torch.zeros(1, 8)]))


def test_train_source_model_takes_numpy_and_refuses_nan_images_and_bad_labels():
    from linear_tca import digits_split, train_source_model

    x, y, _, _ = digits_split(0)
    x, y = x[:64], y[:64]
    model = train_source_model(x.numpy(), y.numpy(), seed=0, width=16, epochs=1)
    assert model.head.out_features == int(y.max()) + 1
    bad = x.clone()
    bad[0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="x must be finite"):
        train_source_model(bad, y, seed=0, width=16, epochs=1)
    with pytest.raises(ValueError, match="y must hold labels >= 0"):
        train_source_model(x, -y - 1, seed=0, width=16, epochs=1)
