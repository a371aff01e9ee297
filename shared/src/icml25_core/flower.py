"""Run a Flower app (Message API) on the simulation runtime, with or without Ray.

Needs the ``flower`` extra (``pip install icml25-core[flower]``). Two engines run the same
``ServerApp`` and ``ClientApp`` through the same runtime (Flower's in-memory LinkState,
Grid and message workers); they differ only in where a ClientApp call executes:

- ``"ray"``: Flower's own backend, one Ray actor per client CPU (what ``flwr run`` on the
  simulation engine does; about 18 s of start-up and tear-down per run on two cores);
- ``"inprocess"``: :class:`InProcessBackend`, one message at a time in this process (no Ray,
  no actor start-up). A client whose work is seeded by its settings, round and partition
  returns the same result on both engines.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any
from unittest import mock

from flwr.server.superlink.fleet.vce.backend import Backend, BackendConfig

__all__ = ["ENGINES", "InProcessBackend", "run_simulation", "simulate_with_result"]

ENGINES = ("ray", "inprocess")


class InProcessBackend(Backend):
    """A Flower simulation backend that runs each ClientApp call in this process.

    One worker: messages are processed one after another, in the order Flower's runtime
    hands them out. Exceptions are wrapped as
    :class:`flwr.clientapp.client_app.ClientAppException` exactly as the Ray actors do, so
    the runtime turns them into error replies.
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


def _check_run(engine: str, num_supernodes: int) -> None:
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if not isinstance(num_supernodes, int) or num_supernodes < 1:
        raise ValueError(f"num_supernodes must be a positive int, got {num_supernodes!r}")


def run_simulation(
    server_app,
    client_app,
    num_supernodes: int,
    engine: str = "inprocess",
    num_cpus: int | None = None,
    client_gpus: float = 0.0,
) -> None:
    """Run ``server_app`` against ``num_supernodes`` copies of ``client_app``.

    Parameters
    ----------
    server_app, client_app : flwr.serverapp.ServerApp, flwr.clientapp.ClientApp
        The apps; results come back through whatever the server app writes.
    num_supernodes : int
        Clients; node ``i`` gets ``node_config`` ``partition-id=i``,
        ``num-partitions=num_supernodes``.
    engine : {"inprocess", "ray"}
        Where ClientApp calls run (see the module docstring).
    num_cpus : int, optional
        CPUs Ray may use (default: all); each client takes one. Ray engine only.
    client_gpus : float
        GPU share per client (0.25 puts four clients on one GPU). Ray engine only.
    """
    _check_run(engine, num_supernodes)
    from flwr.simulation import run_simulation as flwr_run_simulation

    backend = {"client_resources": {"num_cpus": 1, "num_gpus": client_gpus}}
    if num_cpus:
        backend["init_args"] = {"num_cpus": num_cpus}
    with _inprocess_backend() if engine == "inprocess" else nullcontext():
        flwr_run_simulation(
            server_app=server_app,
            client_app=client_app,
            num_supernodes=num_supernodes,
            backend_config=backend,
        )


def simulate_with_result(
    make_server_app: Callable[..., Any],
    make_client_app: Callable[..., Any],
    settings: dict,
    num_supernodes: int,
    *,
    engine: str = "inprocess",
    num_cpus: int | None = None,
    client_gpus: float = 0.0,
    client_mods=None,
    read: Callable[[Path], Any] | None = None,
) -> Any:
    """One run of a Flower app, whose server writes its result to a file, on the simulation
    runtime (``engine`` as :func:`run_simulation`).

    The apps are built as ``make_server_app(**baked)`` and ``make_client_app(mods=
    client_mods, **baked)``, where ``baked`` is ``settings`` with ``min_nodes`` defaulting
    to ``num_supernodes`` (so every round waits for every client: "the clients connected
    when the server starts" races with their registration) and ``result_path`` set to a
    file in a temporary folder, which the server app must write.

    Parameters
    ----------
    read : callable, optional
        ``read(result_path)`` while the folder exists (the server may write files beside
        it); default: the JSON it holds.

    Returns
    -------
    What ``read`` returns.
    """
    _check_run(engine, num_supernodes)
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
            make_client_app(mods=client_mods, **baked),
            num_supernodes=num_supernodes,
            engine=engine,
            num_cpus=num_cpus,
            client_gpus=client_gpus,
        )
        result = Path(baked["result_path"])
        if not result.is_file():
            raise RuntimeError(
                "the simulation wrote no result: the ServerApp failed (see the log above)"
            )
        return read(result) if read is not None else json.loads(result.read_text())
