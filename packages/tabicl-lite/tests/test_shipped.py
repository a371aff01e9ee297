"""The checkpoint shipped in the wheel: offline loading, accuracy floors, scikit-learn's
estimator checks."""

import socket

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.model_selection import train_test_split
from sklearn.utils.estimator_checks import parametrize_with_checks

from tabicl_lite import TabICLClassifier, load_model, shipped_checkpoint_path
from tabicl_lite.classifier import _load


def test_shipped_checkpoint_loads_without_network(monkeypatch):
    def no_network(*args, **kwargs):
        raise OSError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    _load.cache_clear()  # really read the files
    path = shipped_checkpoint_path()
    assert (path / "config.json").is_file() and (path / "model.safetensors").is_file()
    model = load_model(device="cpu")
    assert model.n_params > 100_000
    X, y = load_iris(return_X_y=True)
    TabICLClassifier(n_estimators=1).fit(X, y).predict(X[:3])


# Floors: far above the majority class (iris 0.33, breast_cancer 0.63) and below what
# LogisticRegression reaches on the same split (0.98, 0.98), so a broken checkpoint,
# preprocessing or label mapping fails while an honest small model passes.
@pytest.mark.parametrize(("loader", "floor"), [(load_iris, 0.9), (load_breast_cancer, 0.9)])
def test_shipped_checkpoint_beats_the_stated_accuracy_floor(loader, floor):
    X, y = loader(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.3, stratify=y, random_state=0
    )
    accuracy = TabICLClassifier().fit(X_train, y_train).score(X_test, y_test)
    assert accuracy >= floor


def test_in_context_learning_uses_the_labels():
    """Shuffling the training labels destroys accuracy: predictions come from the context."""
    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, stratify=y, random_state=0)
    shuffled = np.random.default_rng(0).permutation(y_train)
    clf = TabICLClassifier(n_estimators=2)
    good = clf.fit(X_train, y_train).score(X_test, y_test)
    bad = clf.fit(X_train, shuffled).score(X_test, y_test)
    assert good - bad > 0.2


@parametrize_with_checks([TabICLClassifier(n_estimators=2)])
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)
