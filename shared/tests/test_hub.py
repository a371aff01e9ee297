"""PretrainedModelMixin and atomic_directory (needs the torch extra)."""

import json
from dataclasses import dataclass

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("huggingface_hub")

from icml25_core.hub import PretrainedModelMixin, atomic_directory  # noqa: E402


@dataclass
class Sizes:
    width: int = 3


class Net(torch.nn.Module, PretrainedModelMixin):
    def __init__(self, config: Sizes | None = None, scale: float = 1.0):
        super().__init__()
        self.config = config or Sizes()
        self._hub_mixin_config = self.config
        self.lin = torch.nn.Linear(self.config.width, 2)


def test_round_trip_from_the_folder_alone(tmp_path):
    torch.manual_seed(0)
    net = Net(Sizes(width=5))
    assert net.save_pretrained(tmp_path / "m") == tmp_path / "m"
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [
        "config.json",
        "model.safetensors",
    ]
    assert json.loads((tmp_path / "m" / "config.json").read_text()) == {"width": 5}
    again = Net.from_pretrained(tmp_path / "m")
    assert again.config == Sizes(width=5)
    torch.testing.assert_close(again.lin.weight, net.lin.weight)


def test_no_silent_overwrite_and_clear_errors(tmp_path):
    Net().save_pretrained(tmp_path / "m")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        Net().save_pretrained(tmp_path / "m")
    Net(Sizes(width=4)).save_pretrained(tmp_path / "m", overwrite=True)
    assert Net.from_pretrained(tmp_path / "m").config.width == 4
    (tmp_path / "m" / "config.json").write_text('{"width": 4, "depth": 2}')
    with pytest.raises(ValueError, match=r"unknown fields .* \['depth'\]"):
        Net.from_pretrained(tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text("{oops")
    with pytest.raises(ValueError, match="is not valid JSON"):
        Net.from_pretrained(tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text('{"width": 4}')
    (tmp_path / "m" / "model.safetensors").write_bytes(b"not a tensor file")
    with pytest.raises(ValueError, match="not a readable safetensors file"):
        Net.from_pretrained(tmp_path / "m")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"without config\.json and model\.safetensors"):
        Net.from_pretrained(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        Net.from_pretrained(tmp_path / "missing")


def test_atomic_directory_leaves_nothing_on_failure(tmp_path):
    def interrupted_save():
        with atomic_directory(tmp_path / "out") as tmp:
            (tmp / "half").write_text("x")
            raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        interrupted_save()
    assert list(tmp_path.iterdir()) == []


def test_non_finite_weights_are_refused_naming_file_and_tensor(tmp_path):
    net = Net()
    with torch.no_grad():
        net.lin.bias[1] = float("inf")
    net.save_pretrained(tmp_path / "m")  # saving what a user has is allowed
    with pytest.raises(
        ValueError, match=r"model\.safetensors holds NaN or infinite weights in lin\.bias$"
    ):
        Net.from_pretrained(tmp_path / "m")


def test_the_kit_checks_persistence(tmp_path):
    from icml25_core.testing import PackageConformance

    class Check(PackageConformance):
        distribution = "unused"

        def pretrained_models(self):
            return [Net(Sizes(width=4))]

    Check().test_pretrained_models_save_and_load_safely(tmp_path)
