"""PretrainedModelMixin and atomic_directory (needs the torch extra)."""

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("huggingface_hub")

from icml25_core.hub import (  # noqa: E402
    PretrainedModelMixin,
    atomic_directory,
    recover_directory,
)
from icml25_core.testing import kill_during_save  # noqa: E402


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


def test_overwrite_replaces_only_a_previous_save(tmp_path):
    """A user's own file in the folder stops the replacement and survives it."""
    mine = tmp_path / "my_results"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    with pytest.raises(FileExistsError, match=r"not empty; pass overwrite=True"):
        Net().save_pretrained(mine)
    with pytest.raises(FileExistsError, match=r"did not write \(thesis\.tex\)"):
        Net().save_pretrained(mine, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my_results"]
    assert [p.name for p in mine.iterdir()] == ["thesis.tex"]
    with pytest.raises(FileExistsError, match=r"thesis\.tex"):
        atomic_directory(mine, overwrite=True, contents=("*.json",)).__enter__()
    old_style = tmp_path / "old-style"
    old_style.mkdir()
    (old_style / "x").write_text("x")
    with pytest.warns(DeprecationWarning, match="contents="):
        atomic_directory(old_style, overwrite=True).__enter__()


def test_edited_config_or_weights_name_the_file_and_tensor(tmp_path):
    from safetensors.torch import save_file

    Net(Sizes(width=3)).save_pretrained(tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text('{"width": 5}')
    with pytest.raises(
        ValueError,
        match=r"model\.safetensors holds tensors of the wrong shape"
        r".*lin\.weight \(2, 3\) \(the model has \(2, 5\)\)",
    ):
        Net.from_pretrained(tmp_path / "m")
    save_file({"lin.weight": torch.zeros(2, 5)}, str(tmp_path / "m" / "model.safetensors"))
    with pytest.raises(ValueError, match=r"model\.safetensors does not hold .* missing lin\.bias"):
        Net.from_pretrained(tmp_path / "m")


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


def _folder(path, text):
    with atomic_directory(path, overwrite=True, contents=("*.txt",)) as tmp:
        (tmp / "a.txt").write_text(text)
        (tmp / "b.txt").write_text(text)


_SAVE = """
from icml25_core.hub import atomic_directory
with atomic_directory({target!r}, overwrite=True, contents=("*.txt",)) as tmp:
    (tmp / "a.txt").write_text("new")
    (tmp / "b.txt").write_text("new")
"""


@pytest.mark.parametrize("at", ["between-files", "between-renames"])
def test_a_save_killed_part_way_leaves_the_previous_folder(tmp_path, at):
    """SIGKILL between the two files, and between the two renames of the replacement:
    the next load or save finds the previous folder complete and nothing else."""
    target = tmp_path / "out"
    _folder(target, "old")
    kill_during_save(_SAVE.format(target=str(target)), target, at=at)
    if at == "between-renames":  # the kill left the previous folder aside
        assert not target.exists()
        left = sorted(p.name.split("-")[0] for p in tmp_path.iterdir())
        assert left == [".out.old", ".out.saving"]
    assert recover_directory(target) is (at == "between-renames")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no leftovers
    assert {p.name: p.read_text() for p in target.iterdir()} == {"a.txt": "old", "b.txt": "old"}
    _folder(target, "new")  # and the folder can be replaced again
    assert (target / "b.txt").read_text() == "new"


def test_from_pretrained_recovers_a_model_whose_replacement_was_killed(tmp_path):
    net = Net()
    net.save_pretrained(tmp_path / "m")
    kill_during_save(
        "import sys, torch\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from test_hub import Net\n"
        f"Net().save_pretrained({str(tmp_path / 'm')!r}, overwrite=True)\n",
        tmp_path / "m",
        at="between-renames",
    )
    loaded = Net.from_pretrained(tmp_path / "m")
    torch.testing.assert_close(loaded.lin.weight, net.lin.weight, rtol=0, atol=0)


def test_kill_during_save_fails_when_the_save_is_never_interrupted(tmp_path):
    with pytest.raises(AssertionError, match="before reaching between-files"):
        kill_during_save("print('no save here')", tmp_path / "x")
