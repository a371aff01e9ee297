"""Run the app on Flower's simulation runtime in this process, settings baked in.

The engines are the core's (:mod:`icml25_core.flower`): ``"ray"`` (Flower's own backend,
one Ray actor per client CPU, what ``flwr run`` does) and ``"inprocess"`` (one message at a
time in this process, no Ray start-up). Clients seed their training from the settings, the
round and their partition, so both engines return the same result (a test checks this).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from icml25_core.flower import ENGINES, run_simulation


def simulate(
    settings: dict,
    num_supernodes: int = 4,
    num_cpus: int | None = None,
    client_gpus: float = 0.0,
    client_mods=None,
    engine: str = "ray",
) -> dict:
    """One run of the Flower app on the simulation runtime with ``settings`` baked in.

    Parameters
    ----------
    settings : dict
        :class:`feddda.Settings` fields (``method``, ``clip_path``, ``num_server_rounds``...).
    num_supernodes : int
        Clients; client ``i`` gets partition ``i`` of ``num_supernodes``.
    num_cpus : int, optional
        CPUs Ray may use (default: all); each client takes one. Ray engine only.
    client_gpus : float
        GPU share per client (e.g. 0.25 puts four clients on one GPU). Ray engine only.
    client_mods : list of Flower mods, optional
        Wrapped around every client's train and evaluate functions.
    engine : {"ray", "inprocess"}
        Where ClientApp calls run (see the module docstring): Ray actors, or this process
        one at a time (no Ray start-up; same result).

    Returns
    -------
    dict
        ``{"evaluate": {round: {"accuracy-client-<i>": ..., "mean-client-accuracy": ...}},
        "train": {round: {"train-loss": ...}}, "traffic": {round: {"down": bytes, "up":
        bytes, "seconds": s}}}`` (rounds as strings, as in the JSON file).
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if not isinstance(num_supernodes, int) or num_supernodes < 1:
        raise ValueError(f"num_supernodes must be a positive int, got {num_supernodes!r}")
    if int(settings.get("min_nodes", 0)) > num_supernodes:
        raise ValueError(
            f"settings min_nodes={settings['min_nodes']} exceeds num_supernodes="
            f"{num_supernodes}: the server would wait forever"
        )
    from .client_app import make_client_app
    from .server_app import make_server_app

    with tempfile.TemporaryDirectory() as tmp:
        # wait for every supernode before each round (min_nodes 0 would mean "those
        # registered when the ServerApp starts", which races with their registration)
        settings = {
            "min_nodes": num_supernodes,
            **settings,
            "result_path": str(Path(tmp) / "result.json"),
        }
        run_simulation(
            make_server_app(**settings),
            make_client_app(mods=client_mods, **settings),
            num_supernodes=num_supernodes,
            engine=engine,
            num_cpus=num_cpus,
            client_gpus=client_gpus,
        )
        result = Path(settings["result_path"])
        if not result.is_file():
            raise RuntimeError(
                "the simulation wrote no result: the ServerApp failed (see the log above)"
            )
        return json.loads(result.read_text())
