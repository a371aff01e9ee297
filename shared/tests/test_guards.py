"""The shared guards: divergence, labels, float inputs, targets, weights."""

import numpy as np
import pytest

from icml25_core.guards import check_labels, check_loss

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from icml25_core.guards import (  # noqa: E402
    as_float_tensor,
    check_module_finite,
    check_state_dict,
    check_targets,
    load_state_dict_file,
)


def test_check_loss_names_the_learning_rate_argument():
    assert check_loss(torch.tensor(0.25), lr=0.1) == 0.25
    with pytest.raises(
        FloatingPointError,
        match=r"became nan at step 3 with lr_vae=1e\+09; "
        r"lower lr_vae",
    ):
        check_loss(float("nan"), lr=1e9, lr_name="lr_vae", step=3)
    with pytest.raises(FloatingPointError, match=r"beyond 1e\+06"):
        check_loss(1e13, lr=1.0, limit=1e6)
    assert check_loss(1e13, lr=1.0) == 1e13  # no limit: a large finite loss is allowed
    assert check_loss(9e5, lr=1.0, reference=0.5) == 9e5  # below RUNAWAY x max(1, 0.5)
    with pytest.raises(FloatingPointError, match=r"became 2e\+07 \(beyond 2e\+07\)|beyond"):
        check_loss(2.0e7, lr=1.0, reference=2.0 - 1e-9)


def test_check_module_finite_names_the_tensors():
    net = torch.nn.Linear(2, 2)
    check_module_finite(net, lr=0.1)
    with torch.no_grad():
        net.bias[0] = float("nan")
    with pytest.raises(FloatingPointError, match=r"non-finite weights in bias .*lower lr"):
        check_module_finite(net, lr=1e8)


def test_check_labels_accepts_whole_numbers_and_refuses_the_rest():
    np.testing.assert_array_equal(check_labels([0, 2, 1], "y", n_classes=3), [0, 2, 1])
    out = check_labels(np.array([1.0, 0.0]), "y", n_classes=2)
    assert out.dtype == np.int64
    t = check_labels(torch.tensor([1, 0]), "y")
    assert isinstance(t, torch.Tensor) and t.dtype == torch.int64
    cases = {
        "below n_classes=3, got 3": [0, 3],
        ">= 0, got -1": [0, -1],
        "whole-number class labels, got 0.5": [0.0, 0.5],
        "NaN or infinite": [0.0, float("nan")],
        "one-dimensional": [[0, 1]],
        "must not be empty": [],
        "one label per sample \\(3\\), got 2": [0, 1],
    }
    for message, y in cases.items():
        with pytest.raises(ValueError, match=f"labels.*{message}"):
            check_labels(y, "labels", n_classes=3, n_samples=3 if "per sample" in message else None)
    with pytest.raises(TypeError, match="labels must hold integer class labels, got dtype <U1"):
        check_labels(["a", "b"], "labels")
    with pytest.raises(TypeError, match="boolean"):
        check_labels([True, False], "labels")


def test_as_float_tensor_converts_explicitly_and_checks():
    x = as_float_tensor(np.arange(6, dtype=np.uint8).reshape(2, 3), "images", ndim=2)
    assert x.dtype == torch.float32 and x.tolist() == [[0, 1, 2], [3, 4, 5]]
    y = as_float_tensor(torch.ones(2, dtype=torch.float64), "x", dtype=torch.float32)
    assert y.dtype == torch.float32
    with pytest.raises(ValueError, match="x must be finite"):
        as_float_tensor([1.0, float("nan")], "x")
    with pytest.raises(ValueError, match=r"x must be 3-dimensional, got shape \(2,\)"):
        as_float_tensor([1.0, 2.0], "x", ndim=3)
    with pytest.raises(TypeError, match="x must be a real-valued array, got dtype <U"):
        as_float_tensor(["a"], "x")
    with pytest.raises(TypeError, match="x must be a real-valued tensor"):
        as_float_tensor(torch.zeros(2, dtype=torch.bool), "x")


def test_check_targets_never_broadcasts():
    assert check_targets(torch.zeros(4), "y", n_samples=4, n_outputs=1).shape == (4, 1)
    with pytest.raises(ValueError, match=r"y must have shape \(4, 1\) .* got \(4, 3\)"):
        check_targets(torch.zeros(4, 3), "y", n_samples=4, n_outputs=1)


def test_weights_are_checked_against_the_module(tmp_path):
    from safetensors.torch import save_file

    net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 1))
    state = {k: v.clone() for k, v in net.state_dict().items()}
    check_state_dict(net, state, "w.safetensors")
    bad = dict(state, **{"0.weight": torch.zeros(3, 4)})
    with pytest.raises(
        ValueError,
        match=r"w\.safetensors holds tensors of the wrong shape.*"
        r"0\.weight \(3, 4\) \(the model has \(3, 2\)\)",
    ):
        check_state_dict(net, bad, "w.safetensors")
    extra = dict(state, other=torch.zeros(1))
    with pytest.raises(ValueError, match="unexpected other"):
        check_state_dict(net, extra, "w.safetensors")
    check_state_dict(net, {"0.bias": state["0.bias"]}, "w.safetensors", strict=False)
    file = tmp_path / "w.safetensors"
    state["1.bias"][0] = float("inf")
    save_file(state, str(file))
    with pytest.raises(
        ValueError, match=r"w\.safetensors holds NaN or infinite weights in 1\.bias"
    ):
        load_state_dict_file(net, file)
    file.write_bytes(b"junk")
    with pytest.raises(ValueError, match=r"w\.safetensors is not a readable safetensors file"):
        load_state_dict_file(net, file)
    with pytest.raises(FileNotFoundError, match="no weights file"):
        load_state_dict_file(net, tmp_path / "none.safetensors")


def test_tied_weights_load_from_one_stored_tensor(tmp_path):
    from safetensors.torch import save_model

    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(2, 2, bias=False)
            self.b = torch.nn.Linear(2, 2, bias=False)
            self.b.weight = self.a.weight

    net = Tied()
    save_model(net, str(tmp_path / "t.safetensors"))
    fresh = Tied()
    load_state_dict_file(fresh, tmp_path / "t.safetensors")
    torch.testing.assert_close(fresh.b.weight, net.a.weight)


def test_the_kit_checks_divergence_and_labels():
    from icml25_core.testing import PackageConformance

    def fit(y, lr=0.1):
        y = check_labels(y, "y", n_classes=3)
        net = torch.nn.Linear(1, 3)
        opt = torch.optim.SGD(net.parameters(), lr=lr)
        x = torch.ones(len(y), 1)
        for step in range(20):
            loss = torch.nn.functional.cross_entropy(net(x) * 1e20, torch.as_tensor(y))
            check_loss(loss, lr=lr, step=step)
            opt.zero_grad()
            loss.backward()
            opt.step()

    class Check(PackageConformance):
        distribution = "unused"

        def divergent_training(self):
            return {"fit": (lambda: fit(np.array([0, 1, 2]), lr=1e30), "lr")}

        def label_consumers(self):
            return {"fit": (fit, "y", np.array([0, 1, 2]), 3)}

    Check().test_training_diverges_clearly()
    Check().test_bad_labels_are_refused()

    class Silent(Check):
        def label_consumers(self):
            return {"fit": (lambda y: None, "y", np.array([0, 1, 2]), 3)}

    with pytest.raises(AssertionError, match="too large labels were accepted"):
        Silent().test_bad_labels_are_refused()
