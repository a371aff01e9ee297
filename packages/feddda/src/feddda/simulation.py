"""Run the app on Flower's simulation runtime in this process, settings baked in.

Two engines run the same ``ServerApp`` and ``ClientApp`` through the same runtime (Flower's
in-memory LinkState, Grid and message workers); they differ only in where a ClientApp
call executes:

- ``"ray"``: Flower's own backend, one Ray actor per client CPU (what ``flwr run`` on the
  simulation engine does; about 18 s of start-up and tear-down per run on two cores);
- ``"inprocess"``: :class:`InProcessBackend`, one message at a time in this process (no Ray,
  no actor start-up). Clients seed their training from the settings, the round and their
  partition, so both engines return the same result (a test checks this).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from pathlib import Path
from unittest import mock

from flwr.server.superlink.fleet.vce.backend import Backend, BackendConfig

ENGINES = ("ray", "inprocess")


class InProcessBackend(Backend):
    """A Flower simulation backend that runs each ClientApp call in this process.

    One worker: messages are processed one after another, in the order Flower's runtime
    hands them out. Exceptions are wrapped as :class:`flwr.clientapp.client_app.ClientAppException`
    exactly as the Ray actors do, so the runtime turns them into error replies.
    """

    def __init__(self, backend_config: BackendConfig) -> None:
        super().__init__(backend_config)
        self._app_fn: Callable | None = None

    def build(self, app_fn: Callable) -> None:
        """Keep the function that returns the ClientApp."""
        self._app_fn = app_fn

    @property
    def num_workers(self) -> int:
        """One message at a time."""
        return 1

    def is_worker_idle(self) -> bool:
        """The single worker is free whenever the runtime asks (calls are synchronous)."""
        return True

    def terminate(self) -> None:
        """Nothing to stop."""

    def process_message(self, message, context):
        """Run the ClientApp on ``message`` with ``context``; returns ``(reply, context)``."""
        from flwr.clientapp.client_app import ClientAppException, LoadClientAppError

        if self._app_fn is None:
            raise ValueError("build() the backend before processing messages")
        try:
            reply = self._app_fn()(message=message, context=context)
        except LoadClientAppError:
            raise
        except Exception as ex:
            raise ClientAppException(str(ex)) from ex
        return reply, context


@contextmanager
def _inprocess_backend():
    # Flower's runtime builds its backend from this name (vce_api.start_vce imports it
    # lazily); there is no registry to add a backend to, so it is swapped for this run only.
    with mock.patch(
        "flwr.server.superlink.fleet.vce.backend.raybackend.RayBackend", InProcessBackend
    ):
        yield


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
    from flwr.simulation import run_simulation

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
        backend = {"client_resources": {"num_cpus": 1, "num_gpus": client_gpus}}
        if num_cpus:
            backend["init_args"] = {"num_cpus": num_cpus}
        with _inprocess_backend() if engine == "inprocess" else nullcontext():
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
