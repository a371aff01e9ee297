"""Run the fedavg-wide Flower app on the simulation runtime, settings baked in
(engines: :mod:`icml25_core.flower`)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from icml25_core.flower import run_simulation

from .task import Settings


def simulate(
    settings: dict,
    num_supernodes: int = 4,
    *,
    engine: str = "inprocess",
    num_cpus: int | None = None,
) -> dict:
    """One run of the Flower app with ``settings`` (:class:`~fedavg_wide.task.Settings`
    fields) on ``num_supernodes`` clients (client ``i`` trains partition ``i``).

    Parameters
    ----------
    engine : {"inprocess", "ray"}
        ``"inprocess"``: ClientApp calls one after another in this process (no Ray
        start-up); ``"ray"``: Flower's Ray actors, as ``flwr run`` does.
    num_cpus : int, optional
        CPUs Ray may use (Ray engine only).

    Returns
    -------
    dict
        The server's per-round metrics (``rounds``, ``train_loss``, ``train_accuracy``,
        ``test_loss``, ``test_accuracy``; round 0 = the initial model) and ``state_dict``,
        the final global parameters.
    """
    from safetensors.torch import load_file

    from .client_app import make_client_app
    from .server_app import make_server_app

    Settings(
        **{k: v for k, v in settings.items() if k != "result_path"}
    )  # refuse bad settings early
    if int(settings.get("min_nodes", 0)) > num_supernodes:
        raise ValueError(
            f"settings min_nodes={settings['min_nodes']} exceeds num_supernodes="
            f"{num_supernodes}: the server would wait forever"
        )
    with tempfile.TemporaryDirectory() as tmp:
        baked = {
            "min_nodes": num_supernodes,
            **settings,
            "result_path": str(Path(tmp) / "result.json"),
        }
        run_simulation(
            make_server_app(**baked),
            make_client_app(**baked),
            num_supernodes=num_supernodes,
            engine=engine,
            num_cpus=num_cpus,
        )
        result = Path(baked["result_path"])
        if not result.is_file():
            raise RuntimeError(
                "the simulation wrote no result: the ServerApp failed (see the log above)"
            )
        out = json.loads(result.read_text())
        out["state_dict"] = load_file(str(result) + ".safetensors")
        return out
