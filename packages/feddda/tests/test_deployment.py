"""Flower's deployment engine on loopback: a SuperLink and two SuperNodes started here,
``flwr run`` of this package's app against them, everything stopped at the end."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[1]  # the folder whose pyproject has [tool.flwr.app]
BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on port {port} after {timeout} s")


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:  # each was started in its own session: stop its whole process group
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


@pytest.mark.skipif(not (BIN / "flower-superlink").exists(), reason="flwr CLI not installed")
@pytest.mark.skipif(
    not (APP / "pyproject.toml").is_file(), reason="needs the package's source folder"
)
def test_flwr_run_on_a_loopback_superlink_with_two_supernodes(clip_path, tmp_path):
    home = tmp_path / "flwr-home"
    home.mkdir()
    link = _free_port()
    (home / "config.toml").write_text(
        f'[superlink]\ndefault = "loopback"\n\n'
        f'[superlink.loopback]\naddress = "127.0.0.1:{link}"\ninsecure = true\n'
    )
    env = {**os.environ, "FLWR_HOME": str(home), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    result = tmp_path / "result.json"
    overrides = tmp_path / "run-config.toml"
    overrides.write_text(
        f'clip-path = "{clip_path}"\nresult-path = "{result}"\nnum-server-rounds = 1\n'
        "min-nodes = 2\nn-global = 4\nn-local = 4\nlocal-epochs = 1\n"
    )
    log = (tmp_path / "processes.log").open("w")
    procs: list[subprocess.Popen] = []
    start = {"env": env, "stdout": log, "stderr": subprocess.STDOUT, "start_new_session": True}
    try:
        procs.append(
            subprocess.Popen(
                [
                    BIN / "flower-superlink",
                    "--insecure",
                    "--port",
                    str(link),
                    "--disable-runtime-dependency-installation",
                ],
                **start,
            )
        )
        _wait_for_port(link, procs[0])
        for i in range(2):
            procs.append(
                subprocess.Popen(
                    [
                        BIN / "flower-supernode",
                        "--insecure",
                        "--superlink",
                        f"127.0.0.1:{link}",
                        "--port",
                        str(_free_port()),
                        "--node-config",
                        f"partition-id={i} num-partitions=2",
                    ],
                    **start,
                )
            )
        run = subprocess.run(
            [BIN / "flwr", "run", str(APP), "loopback", "--run-config", str(overrides), "--stream"],
            env=env,
            capture_output=True,
            text=True,
            timeout=400,
        )
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    finally:
        _stop(procs)
        log.close()
    assert result.is_file(), (tmp_path / "processes.log").read_text()[-3000:]
    out = json.loads(result.read_text())
    metrics = out["evaluate"]["1"]
    assert {"accuracy-client-0", "accuracy-client-1"} <= set(metrics)
    assert 0.0 <= metrics["mean-client-accuracy"] <= 1.0
    # FedDDA moved the shared part only: 2 clients x (train down + up + evaluate down)
    assert out["traffic"]["1"]["up"] > 0 and out["traffic"]["1"]["down"] > 0
