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

from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from unittest import mock

from flwr.server.superlink.fleet.vce.backend import Backend, BackendConfig

__all__ = ["ENGINES", "InProcessBackend", "run_simulation"]

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
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if not isinstance(num_supernodes, int) or num_supernodes < 1:
        raise ValueError(f"num_supernodes must be a positive int, got {num_supernodes!r}")
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
