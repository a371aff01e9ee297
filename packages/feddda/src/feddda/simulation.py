"""Run the app on Flower's simulation engine in this process (Ray), settings baked in."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path


def simulate(
    settings: dict,
    num_supernodes: int = 4,
    num_cpus: int | None = None,
    client_gpus: float = 0.0,
    client_mods=None,
) -> dict:
    """One run of the Flower app on the simulation engine with ``settings`` baked in.

    Parameters
    ----------
    settings : dict
        :class:`feddda.Settings` fields (``method``, ``clip_path``, ``num_server_rounds``...).
    num_supernodes : int
        Clients; client ``i`` gets partition ``i`` of ``num_supernodes``.
    num_cpus : int, optional
        CPUs Ray may use (default: all); each client takes one.
    client_gpus : float
        GPU share per client (e.g. 0.25 puts four clients on one GPU).
    client_mods : list of Flower mods, optional
        Wrapped around every client's train and evaluate functions.

    Returns
    -------
    dict
        ``{"evaluate": {round: {"accuracy-client-<i>": ..., "mean-client-accuracy": ...}},
        "train": {round: {"train-loss": ...}}, "traffic": {round: {"down": bytes, "up":
        bytes, "seconds": s}}}`` (rounds as strings, as in the JSON file).
    """
    from flwr.simulation import run_simulation

    from .client_app import make_client_app
    from .server_app import make_server_app

    with tempfile.TemporaryDirectory() as tmp:
        settings = {**settings, "result_path": str(Path(tmp) / "result.json")}
        backend = {"client_resources": {"num_cpus": 1, "num_gpus": client_gpus}}
        if num_cpus:
            backend["init_args"] = {"num_cpus": num_cpus}
        run_simulation(
            server_app=make_server_app(**settings),
            client_app=make_client_app(mods=client_mods, **settings),
            num_supernodes=num_supernodes,
            backend_config=backend,
        )
        result = Path(settings["result_path"])
        if not result.is_file():
            raise RuntimeError(
                "the simulation wrote no result: the ServerApp failed (see the log above)"
            )
        return json.loads(result.read_text())
