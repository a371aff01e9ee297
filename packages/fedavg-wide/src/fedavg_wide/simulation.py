"""Run the fedavg-wide Flower app on the simulation runtime, settings baked in
(engines: :mod:`icml25_core.flower`)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from icml25_core.flower import simulate_with_result

from .task import Settings


def simulate(
    settings: dict,
    num_supernodes: int = 4,
    *,
    engine: str = "inprocess",
    num_cpus: int | None = None,
    model_fn=None,
    data_fn=None,
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
    model_fn, data_fn : callable, optional
        Your own model and data (see :func:`~fedavg_wide.client_app.make_client_app`);
        default: the bundled ones the settings describe.

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

    Settings(**{k: v for k, v in settings.items() if k != "result_path"})  # refuse early

    def read(path: Path) -> dict:
        out = json.loads(path.read_text())
        out["state_dict"] = load_file(str(path) + ".safetensors")
        return out

    hooks = {k: v for k, v in (("model_fn", model_fn), ("data_fn", data_fn)) if v is not None}
    return simulate_with_result(
        functools.partial(make_server_app, **hooks),
        functools.partial(make_client_app, **hooks),
        settings,
        num_supernodes,
        engine=engine,
        num_cpus=num_cpus,
        read=read,
    )
