"""The fedavg-wide ``ClientApp`` (Flower Message API).

Each round the client loads the server's global parameters into a fresh model, takes
``local_steps`` steps of (stochastic) gradient descent on its partition with the same
update and the same mini-batch seed as :func:`~fedavg_wide.FedAvg`'s plain loop, and
replies with its parameters, its sample count (``num-examples``, the server's weight) and
its last local loss. ``flwr run`` reads ``fedavg_wide.client_app:app``;
:func:`make_client_app` bakes settings in for in-process runs. The client's data is chosen
by ``node_config`` (``partition-id``, ``num-partitions``).
"""

from __future__ import annotations

from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from .fedavg import _check_data, batch_seed, local_update
from .task import Settings, build_model, federated_data


def _partition(context: Context, settings: Settings) -> tuple[int, int]:
    try:
        pid = int(context.node_config["partition-id"])
        n = int(context.node_config["num-partitions"])
    except KeyError as err:
        raise ValueError(
            "the SuperNode needs --node-config 'partition-id=<i> num-partitions=<n>'"
        ) from err
    return pid, settings.n_clients or n


def train_step(
    received: dict, settings: Settings, partition_id: int, n_clients: int, server_round: int
):
    """One client round from the global parameters ``received``; returns ``(parameters,
    metrics)``."""
    clients, _ = federated_data(settings, n_clients)
    model = build_model(settings)
    model.load_state_dict(received)
    X, y = _check_data(f"partition {partition_id}", *clients[partition_id], settings.loss, model)
    loss = local_update(
        model,
        X,
        y,
        lr=settings.lr,
        local_steps=settings.local_steps,
        batch_size=settings.batch_size or None,
        weight_decay=settings.weight_decay,
        loss=settings.loss,
        seed=batch_seed(settings.seed, server_round, partition_id),
    )
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    return state, {"train-loss": loss, "num-examples": len(X)}


def make_client_app(mods=None, **overrides) -> ClientApp:
    """A ``ClientApp`` whose settings are ``context.run_config`` overlaid with
    ``overrides``; ``mods``: Flower mods wrapped around its train function."""
    app = ClientApp(mods=mods)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        settings = Settings.from_config(context.run_config, **overrides)
        pid, n = _partition(context, settings)
        server_round = int(msg.content["config"]["server-round"])
        received = msg.content["arrays"].to_torch_state_dict()
        state, metrics = train_step(received, settings, pid, n, server_round)
        reply = RecordDict({"arrays": ArrayRecord(state), "metrics": MetricRecord(metrics)})
        return Message(content=reply, reply_to=msg)

    return app


app = make_client_app()
