"""Run the app on Flower's simulation runtime in this process, settings baked in.

The engines are the core's (:mod:`icml25_core.flower`): ``"ray"`` (Flower's own backend,
one Ray actor per client CPU, what ``flwr run`` does) and ``"inprocess"`` (one message at a
time in this process, no Ray start-up). Clients seed their training from the settings, the
round and their partition, so both engines return the same result (a test checks this).
"""

from __future__ import annotations

from icml25_core.flower import simulate_with_result


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
    from .client_app import make_client_app
    from .server_app import make_server_app

    return simulate_with_result(
        make_server_app,
        make_client_app,
        settings,
        num_supernodes,
        engine=engine,
        num_cpus=num_cpus,
        client_gpus=client_gpus,
        client_mods=client_mods,
    )
