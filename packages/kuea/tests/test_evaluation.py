"""Evaluation against scikit-learn and hand-checked cases."""

import numpy as np
import pytest
import torch

from kuea import (
    WordTokenizer,
    image_embeddings,
    linear_probe,
    retrieval_recall_at_1,
    text_embeddings,
    tiny_clip,
    zero_shot_accuracy,
)


def test_linear_probe_equals_sklearn():
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 6))
    y = (x[:, 0] + 0.5 * rng.standard_normal(200) > 0).astype(int)
    sc = StandardScaler().fit(x[:100])
    clf = LogisticRegression(C=0.5, max_iter=2000).fit(sc.transform(x[:100]), y[:100])
    want = clf.score(sc.transform(x[100:]), y[100:])
    assert linear_probe(x[:100], y[:100], x[100:], y[100:], C=0.5) == pytest.approx(want)
    with pytest.raises(ValueError, match="train_labels"):
        linear_probe(x[:100], y[:99], x[100:], y[100:])


def test_retrieval():
    a = torch.randn(5, 3)
    assert retrieval_recall_at_1(a, a) == {"image_to_text": 1.0, "text_to_image": 1.0}
    swapped = a[[1, 0, 2, 3, 4]]
    r = retrieval_recall_at_1(a, swapped)
    assert r["image_to_text"] == pytest.approx(0.6) and r["text_to_image"] == pytest.approx(0.6)
    with pytest.raises(ValueError, match="paired"):
        retrieval_recall_at_1(a, a[:3])


def test_zero_shot_equals_manual_argmax():
    model = tiny_clip(seed=2)
    tok = WordTokenizer()
    prompts = tok(["a photo of a circle", "a photo of a square", "a photo of a triangle"])
    x = torch.randn(10, 3, 32, 32)
    with torch.no_grad():
        img = torch.nn.functional.normalize(
            model.get_image_features(pixel_values=x).pooler_output, dim=-1
        )
        txt = torch.nn.functional.normalize(
            model.get_text_features(**prompts).pooler_output, dim=-1
        )
    pred = (img @ txt.T).argmax(dim=1)
    labels = pred.clone()
    labels[:3] = (labels[:3] + 1) % 3
    assert zero_shot_accuracy(model, x, labels, prompts) == pytest.approx(0.7)
    torch.testing.assert_close(text_embeddings(model, prompts), txt)
    torch.testing.assert_close(image_embeddings(model, x, batch_size=3, normalize=True), img)
    with pytest.raises(ValueError, match="one prompt per class"):
        zero_shot_accuracy(model, x, torch.full((10,), 5), prompts)


def test_bad_labels_and_images_are_refused_clearly():
    model = tiny_clip(seed=2)
    prompts = WordTokenizer()(["a circle", "a square", "a triangle"])
    x = torch.randn(4, 3, 32, 32)
    with pytest.raises(ValueError, match=r"labels must hold whole-number class labels, got 0\.5"):
        zero_shot_accuracy(model, x, np.array([0.5, 1.0, 2.0, 0.0]), prompts)
    with pytest.raises(ValueError, match="labels must hold labels >= 0"):
        zero_shot_accuracy(model, x, [0, -1, 2, 0], prompts)
    with pytest.raises(
        TypeError, match=r"images must be float pixel values .* got dtype torch\.uint8"
    ):
        image_embeddings(model, torch.zeros(4, 3, 32, 32, dtype=torch.uint8))
    with pytest.raises(TypeError, match=r"images must be float pixel values .* got dtype uint8"):
        image_embeddings(model, np.zeros((4, 3, 32, 32), dtype=np.uint8))
    # float64 NumPy pixel values embed as the float32 tensor does
    torch.testing.assert_close(
        image_embeddings(model, x.double().numpy()), image_embeddings(model, x)
    )
