"""Pretraining: a few steps run, checkpoint, resume bit for bit, and run under torchrun."""

import json
import os
import subprocess
import sys

import pytest
import torch

from tabicl_lite import TabICL
from tabicl_lite.pretrain import CURRICULA, Stage, draw_batch, main, pretrain
from tabicl_lite.prior import PriorConfig

from .conftest import TINY


def test_batches_are_a_pure_function_of_seed_step_and_rank():
    stage = CURRICULA["smoke"][0]
    a = draw_batch(stage, 0, 5, 0, 10, PriorConfig())
    b = draw_batch(stage, 0, 5, 0, 10, PriorConfig())
    c = draw_batch(stage, 0, 5, 1, 10, PriorConfig())
    for x, y in zip(a[:3], b[:3], strict=True):
        torch.testing.assert_close(x, y, rtol=0, atol=0, equal_nan=True)
    assert a[0].shape != c[0].shape or not torch.allclose(a[0], c[0], equal_nan=True)


def test_few_steps_checkpoint_and_resume_equal_an_uninterrupted_run(tmp_path):
    straight = pretrain(tmp_path / "a", "smoke", TINY, seed=1, progress=False)
    pretrain(tmp_path / "b", "smoke", TINY, seed=1, progress=False, stop_after=3)
    assert not (tmp_path / "b" / "model").exists()
    state = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)
    assert state["step"] == 3
    resumed = pretrain(tmp_path / "b", "smoke", seed=1, resume=True, progress=False)
    for (name, p), q in zip(
        straight.state_dict().items(), resumed.state_dict().values(), strict=True
    ):
        assert torch.equal(p, q), name
    # the exported folder is what the classifier loads
    loaded = TabICL.from_pretrained(tmp_path / "b" / "model")
    assert torch.equal(
        next(iter(loaded.state_dict().values())), next(iter(resumed.state_dict().values()))
    )
    record = json.loads((tmp_path / "a" / "record.json").read_text())
    assert record["steps"] == 5 and record["seed"] == 1
    log = [json.loads(line) for line in (tmp_path / "a" / "log.jsonl").read_text().splitlines()]
    assert [entry["stage"] for entry in log][-1] == 2
    assert all(entry["loss"] > 0 for entry in log)


def test_frozen_stage_leaves_column_and_row_stages_unchanged(tmp_path):
    stages = (
        Stage(steps=2, rows=(16, 32), features=(2, 4), cells=2000, lr=1e-3),
        Stage(steps=2, rows=(16, 32), features=(2, 4), cells=2000, lr=1e-3, freeze_embedding=True),
    )
    before = pretrain(tmp_path / "s", stages[:1], TINY, progress=False)
    after = pretrain(tmp_path / "t", stages, TINY, progress=False)
    for name, p in before.state_dict().items():
        q = after.state_dict()[name]
        if name.startswith(("col.", "row.")):
            assert torch.equal(p, q), name
    assert not torch.equal(before.icl.decoder[0].weight, after.icl.decoder[0].weight)


def test_cli_runs_and_refuses_resume_without_checkpoint(tmp_path):
    main(["--out", str(tmp_path / "cli"), "--curriculum", "smoke", "--device", "cpu"])
    assert (tmp_path / "cli" / "model" / "model.safetensors").is_file()
    with pytest.raises(FileNotFoundError, match="checkpoint"):
        pretrain(tmp_path / "missing", "smoke", resume=True)
    with pytest.raises(ValueError, match="curriculum"):
        pretrain(tmp_path / "x", "nope")
    # a second run into the same folder without --resume is refused, files untouched
    before = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "cli").iterdir()}
    with pytest.raises(FileExistsError, match=r"already holds files.*--resume"):
        main(["--out", str(tmp_path / "cli"), "--curriculum", "smoke", "--device", "cpu"])
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "cli").iterdir()} == before


def test_two_process_torchrun_on_cpu(tmp_path):
    out = tmp_path / "ddp"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "tabicl_lite.pretrain",
        "--out",
        str(out),
        "--curriculum",
        "smoke",
        "--device",
        "cpu",
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((out / "record.json").read_text())
    assert record["processes"] == 2 and record["steps"] == 5
    TabICL.from_pretrained(out / "model")


_KILLED_SAVE = """
import sys, time
from pathlib import Path
import torch
from tabicl_lite.pretrain import pretrain

real_save = torch.save

def partial_save(obj, f, *a, **k):  # write half a checkpoint, then wait to be killed
    Path(f).write_bytes(b"half a checkpoint")
    Path(sys.argv[2]).write_text("saving")
    time.sleep(600)

torch.save = partial_save
pretrain(Path(sys.argv[1]), "smoke", seed=1, resume=True, progress=False, stop_after=4)
"""


def test_pretraining_killed_while_saving_resumes_from_the_previous_checkpoint(tmp_path):
    from icml25_core.testing import kill_when_marked

    out, mark = tmp_path / "run", tmp_path / "mark"
    pretrain(out, "smoke", TINY, seed=1, progress=False, stop_after=2)
    before = (out / "checkpoint.pt").read_bytes()
    kill_when_marked(_KILLED_SAVE, mark, str(out), str(mark), what="pretraining")
    # the half-written file is the temporary one; the step-2 checkpoint is intact
    assert (out / "checkpoint.pt").read_bytes() == before
    assert torch.load(out / "checkpoint.pt", weights_only=True)["step"] == 2
    straight = pretrain(tmp_path / "straight", "smoke", TINY, seed=1, progress=False)
    resumed = pretrain(out, "smoke", seed=1, resume=True, progress=False)
    for (name, p), q in zip(
        straight.state_dict().items(), resumed.state_dict().values(), strict=True
    ):
        assert torch.equal(p, q), name
