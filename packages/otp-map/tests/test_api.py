"""API contract: shapes and types, persistence, resuming, custom costs, images, bad input."""

import numpy as np
import pytest
import torch

from otp_map import OTP, ConstantSchedule, GeometricSchedule, SemiDualOT
from otp_map import datasets as D

SMALL = {"hidden": (16, 16), "seed": 0}


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(300, 2)), rng.normal(size=(300, 2)) + 2.0


@pytest.fixture(scope="module")
def fitted(data):
    return OTP(**SMALL).fit(*data, n_iter=30, batch_size=32)


def test_shapes_and_types(fitted):
    x64 = np.zeros((5, 2))
    out = fitted.transport(x64, seed=0)
    assert out.shape == (5, 2)
    assert out.dtype == np.float64
    assert fitted.transport(x64.astype(np.float32)).dtype == np.float32
    many = fitted.transport(x64, n_samples=3, seed=0)
    assert many.shape == (3, 5, 2)
    np.testing.assert_allclose(many[0], out, rtol=1e-6)  # same seed, same first draw
    xt = torch.zeros(5, 2, dtype=torch.float64)
    out_t = fitted.transport(xt, n_samples=4)
    assert isinstance(out_t, torch.Tensor)
    assert out_t.shape == (4, 5, 2)
    assert out_t.dtype == torch.float64
    assert fitted.potential(x64).shape == (5,)
    assert fitted.map(x64).shape == (5, 2)
    # OTP's plan is stochastic at eps > 0; the map network alone is not
    assert fitted.eps_ > 0
    assert not np.allclose(many[0], many[1])
    np.testing.assert_array_equal(fitted.map(x64), fitted.map(x64))


def test_repr_of_fresh_and_fitted_models(fitted):
    # printing a fresh model (a notebook's first cell) must not raise
    assert repr(OTP()) == "OTP(step=0, not fitted)"
    assert repr(SemiDualOT()) == "SemiDualOT(step=0, eps=0)"  # its schedule is fixed
    assert repr(fitted) == f"OTP(step=30, eps={fitted.eps_:.3g})"


def test_semidual_is_deterministic_and_has_no_noise(data):
    model = SemiDualOT(**SMALL).fit(*data, n_iter=20, batch_size=32)
    assert model.eps_ == 0.0
    many = model.transport(data[0][:7], n_samples=3)
    np.testing.assert_array_equal(many[0], many[2])
    np.testing.assert_array_equal(many[0], model.map(data[0][:7]))
    with pytest.raises(TypeError, match="no noise"):
        SemiDualOT(schedule=ConstantSchedule(0.1))


def test_history_is_recorded(data):
    model = OTP(log_every=5, **SMALL).fit(*data, n_iter=20, batch_size=16)
    h = model.history_
    assert h["step"] == [5, 10, 15, 20]
    assert len(h["eps"]) == len(h["map_loss"]) == len(h["potential_loss"]) == 4
    # the noise falls along the default geometric schedule, in units of the target's scale
    scale = model.noise_scale_
    assert h["eps"][0] == pytest.approx(scale * GeometricSchedule()(4))
    assert h["eps"] == sorted(h["eps"], reverse=True)


@pytest.mark.parametrize("cls", [SemiDualOT, OTP])
def test_save_load_round_trip(cls, data, tmp_path):
    model = cls(**SMALL).fit(*data, n_iter=25, batch_size=32)
    model.save_pretrained(tmp_path / "m")
    again = cls.from_pretrained(tmp_path / "m")
    x = data[0][:50]
    np.testing.assert_array_equal(again.map(x), model.map(x))
    np.testing.assert_array_equal(again.potential(x), model.potential(x))
    np.testing.assert_array_equal(
        again.transport(x, n_samples=2, seed=3), model.transport(x, n_samples=2, seed=3)
    )
    assert again.step_ == model.step_
    assert again.history_ == model.history_
    assert again.schedule_ == model.schedule_
    other = SemiDualOT if cls is OTP else OTP
    with pytest.raises(ValueError, match="not a"):
        other.from_pretrained(tmp_path / "m")
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        cls.from_pretrained(tmp_path / "missing")


def test_resume_matches_an_uninterrupted_run(data, tmp_path):
    straight = OTP(**SMALL).fit(*data, n_iter=40, batch_size=32)
    OTP(**SMALL).fit(*data, n_iter=20, batch_size=32, checkpoint_dir=tmp_path / "ck")
    resumed = OTP(**SMALL).fit(
        *data, n_iter=40, batch_size=32, checkpoint_dir=tmp_path / "ck", resume=True
    )
    assert resumed.step_ == 40
    for a, b in zip(
        straight.map_net_.state_dict().values(), resumed.map_net_.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert resumed.history_ == straight.history_
    with pytest.raises(ValueError, match="other settings"):
        OTP(lr_map=0.5, **SMALL).fit(
            *data, n_iter=60, batch_size=32, checkpoint_dir=tmp_path / "ck", resume=True
        )


def test_resume_refuses_a_checkpoint_assembled_from_different_steps(data, tmp_path):
    import shutil

    OTP(**SMALL).fit(*data, n_iter=10, batch_size=32, checkpoint_dir=tmp_path / "a")
    OTP(**SMALL).fit(*data, n_iter=20, batch_size=32, checkpoint_dir=tmp_path / "b")
    for name in ("optimizer.safetensors", "model.safetensors", "config.json"):
        mixed = tmp_path / f"mixed-{name}"
        shutil.copytree(tmp_path / "a", mixed)
        shutil.copy(tmp_path / "b" / name, mixed / name)
        with pytest.raises(ValueError, match=rf"{name}.*parts disagree"):
            OTP(**SMALL).fit(*data, n_iter=30, batch_size=32, checkpoint_dir=mixed, resume=True)
    gone = tmp_path / "gone"
    shutil.copytree(tmp_path / "a", gone)
    (gone / "optimizer.safetensors").unlink()
    with pytest.raises(ValueError, match=r"optimizer\.safetensors is missing"):
        OTP(**SMALL).fit(*data, n_iter=30, batch_size=32, checkpoint_dir=gone, resume=True)


def test_requests_that_cannot_fit_are_refused_with_the_estimate(data, fitted, monkeypatch):
    import icml25_core.validation as validation

    # far beyond any machine: refused from the estimate, before sampling a batch
    with pytest.raises(ValueError, match=r"batch_size: .* at least .*TiB"):
        OTP(**SMALL).fit(*data, n_iter=1, batch_size=10**13)
    with pytest.raises(
        ValueError, match=r"n_samples: .* TiB \(1000000000000 samples of 5 points\)"
    ):
        fitted.transport(data[0][:5], n_samples=10**12)
    # against a small machine: 1 MiB available
    monkeypatch.setattr(validation, "available_memory", lambda device="cpu": 2**20)
    with pytest.raises(ValueError, match=r"batch_size: .*more than the 1\.0 MiB available"):
        OTP(**SMALL).fit(*data, n_iter=1, batch_size=2**15)
    assert fitted.transport(data[0][:5]).shape == (5, 2)  # small requests still run


def test_callable_samplers(data):
    rng = np.random.default_rng(1)
    model = OTP(**SMALL).fit(lambda n: rng.normal(size=(n, 2)), data[1], n_iter=10, batch_size=8)
    assert model.transport(np.zeros((3, 2))).shape == (3, 2)
    with pytest.raises(ValueError, match="n samples"):
        OTP(**SMALL).fit(lambda n: np.zeros((n + 1, 2)), data[1], n_iter=2)


def test_custom_cost_between_spaces_of_different_dimension(tmp_path):
    def cost(x, y):  # x in R^1, y in R^2: compare x with y's first coordinate
        return (y[:, :1] - x).pow(2).sum(1) + 0.1 * y[:, 1].pow(2)

    rng = np.random.default_rng(0)
    src, tgt = rng.normal(size=(200, 1)), rng.normal(size=(200, 2))
    with pytest.raises(ValueError, match="same shape"):
        OTP(**SMALL).fit(src, tgt, n_iter=2)
    model = OTP(cost=cost, **SMALL).fit(src, tgt, n_iter=10, batch_size=16)
    assert model.transport(src[:4], n_samples=2).shape == (2, 4, 2)
    model.save_pretrained(tmp_path / "c")
    with pytest.raises(ValueError, match="custom cost"):
        OTP.from_pretrained(tmp_path / "c")
    again = OTP.from_pretrained(tmp_path / "c", cost=cost)
    np.testing.assert_array_equal(again.map(src[:4]), model.map(src[:4]))
    with pytest.raises(ValueError, match="shaped"):
        OTP(cost=lambda x, y: x.sum(), **SMALL).fit(src, tgt, n_iter=2)


def test_images_use_the_unet():
    grey, colour = D.digits_gray_and_colour(seed=0)
    model = OTP(channels=(4, 8), seed=0).fit(grey[:64], colour[:64], n_iter=3, batch_size=8)
    assert model.net_config_["arch"] == "conv"
    assert model.transport(grey[:5]).shape == (5, 3, 8, 8)
    assert model.transport(grey[:5], n_samples=2).shape == (2, 5, 3, 8, 8)
    assert model.potential(colour[:5]).shape == (5,)
    with pytest.raises(ValueError, match="conv"):
        OTP(arch="conv", **SMALL).fit(np.zeros((10, 2)), np.ones((10, 2)), n_iter=1)


def test_divergence_names_the_learning_rate(data):
    model = OTP(lr_map=1e8, lr_potential=1e8, **SMALL)
    with pytest.raises(FloatingPointError, match=r"lr_map=100000000\.0"):
        model.fit(*data, n_iter=200, batch_size=32)
    with pytest.raises(RuntimeError, match="not fitted"):
        model.transport(data[0][:3])


@pytest.mark.parametrize(
    ("source", "target", "match"),
    [
        (np.zeros((10, 2)), np.zeros((10, 3)), "same shape"),
        (np.full((10, 2), np.nan), np.zeros((10, 2)), "source must be finite"),
        (np.zeros((10, 2)), np.zeros((0, 2)), "target must not be empty"),
        (np.zeros(10), np.zeros((10, 1)), "at least 2 dimensions"),
        (np.zeros((10, 2)), np.array([[np.inf, 0.0]]), "target must be finite"),
    ],
)
def test_bad_data(source, target, match):
    with pytest.raises(ValueError, match=match):
        OTP(**SMALL).fit(source, target, n_iter=1)


def test_bad_arguments(fitted):
    with pytest.raises(RuntimeError, match="not fitted"):
        OTP().transport(np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"x must be shaped \(n, 2\)"):
        fitted.transport(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="n_samples"):
        fitted.transport(np.zeros((3, 2)), n_samples=0)
    with pytest.raises(ValueError, match="n_iter"):
        OTP().fit(np.zeros((3, 2)), np.zeros((3, 2)), n_iter=0)
    with pytest.raises(TypeError, match="schedule"):
        OTP(schedule=0.1)
    with pytest.raises(ValueError, match="arch"):
        OTP(arch="transformer")
    with pytest.raises(ValueError, match="hidden"):
        OTP(hidden=())
    with pytest.raises(ValueError, match="tau"):
        OTP(tau=0.0)


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda est: est.update(noise_scale=float("nan")), "noise_scale must be a finite"),
        (lambda est: est.update(noise_scale=-1.0), "noise_scale must be a finite"),
        (lambda est: est.update(step="3"), "step must be an integer"),
        (lambda est: est.pop("schedule"), r"missing estimator keys \['schedule'\]"),
    ],
)
def test_a_tampered_config_is_refused_naming_the_file(fitted, tmp_path, edit, match):
    import json

    folder = tmp_path / "m"
    fitted.save_pretrained(folder)
    config_file = folder / "config.json"
    config = json.loads(config_file.read_text(), parse_constant=float)
    edit(config["estimator"])
    config_file.write_text(json.dumps(config))  # NaN is written as the JSON token NaN
    with pytest.raises(ValueError, match=match) as err:
        OTP.from_pretrained(folder)
    assert str(config_file) in str(err.value)


@pytest.mark.parametrize("at", ["between-files", "between-renames"])
def test_fit_killed_while_replacing_its_checkpoint_resumes_from_the_previous_one(
    data, tmp_path, monkeypatch, at
):
    """SIGKILL during ``fit(checkpoint_every=5)`` as it replaces the step-10 checkpoint
    (after its first file, or between the two renames): the step-10 files survive byte
    for byte, and ``resume=True`` continues from them (it never builds a fresh network),
    ending equal to an uninterrupted run."""
    from icml25_core.testing import kill_during_save

    ck = tmp_path / "ck"
    OTP(**SMALL).fit(*data, n_iter=10, batch_size=32, checkpoint_dir=ck)
    before = {p.name: p.read_bytes() for p in ck.iterdir()}
    script = (
        "import numpy as np\nfrom otp_map import OTP\n"
        "rng = np.random.default_rng(0)\n"
        "x, y = rng.normal(size=(300, 2)), rng.normal(size=(300, 2)) + 2.0\n"
        f"OTP(**{SMALL!r}).fit(x, y, n_iter=20, batch_size=32, checkpoint_dir={str(ck)!r},"
        " checkpoint_every=5, resume=True)\n"
    )
    kill_during_save(script, ck, at=at)
    assert ck.is_dir() is (at == "between-files")

    def no_fresh_network(*args, **kwargs):
        raise AssertionError("fit(resume=True) built a fresh network")

    monkeypatch.setattr(OTP, "_build", no_fresh_network)
    resumed = OTP(**SMALL).fit(*data, n_iter=10, batch_size=32, checkpoint_dir=ck, resume=True)
    assert resumed.step_ == 10
    assert {p.name: p.read_bytes() for p in ck.iterdir()} == before
    resumed = OTP(**SMALL).fit(*data, n_iter=20, batch_size=32, checkpoint_dir=ck, resume=True)
    monkeypatch.undo()
    straight = OTP(**SMALL).fit(*data, n_iter=20, batch_size=32)
    for a, b in zip(
        straight.map_net_.state_dict().values(), resumed.map_net_.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
