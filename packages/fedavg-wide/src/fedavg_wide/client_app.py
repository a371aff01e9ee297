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
from .task import Settings, build_model, federated_data, load_global


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
    received: dict,
    settings: Settings,
    partition_id: int,
    n_clients: int,
    server_round: int,
    *,
    model_fn=build_model,
    data_fn=federated_data,
):
    """One client round from the global state ``received``; returns ``(state, metrics)``.
    ``model_fn(settings)`` builds the model, ``data_fn(settings, n_clients)`` gives
    ``(clients, test)`` (see :func:`make_client_app`)."""
    clients, _ = data_fn(settings, n_clients)
    model = load_global(model_fn(settings), received)
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


def make_client_app(
    mods=None, *, model_fn=build_model, data_fn=federated_data, **overrides
) -> ClientApp:
    """A ``ClientApp`` whose settings are ``context.run_config`` overlaid with
    ``overrides``; ``mods``: Flower mods wrapped around its train function.

    Your own model and data: ``model_fn(settings) -> nn.Module`` (the same initial model
    on every call) and ``data_fn(settings, n_clients) -> (clients, test)`` (``clients`` a
    list of ``(X, y)``, client ``i`` trains ``clients[i]``), the same two on the server
    (:func:`~fedavg_wide.server_app.make_server_app`)."""
    app = ClientApp(mods=mods)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        settings = Settings.from_config(context.run_config, **overrides)
        pid, n = _partition(context, settings)
        server_round = int(msg.content["config"]["server-round"])
        received = msg.content["arrays"].to_torch_state_dict()
        state, metrics = train_step(
            received, settings, pid, n, server_round, model_fn=model_fn, data_fn=data_fn
        )
        reply = RecordDict({"arrays": ArrayRecord(state), "metrics": MetricRecord(metrics)})
        return Message(content=reply, reply_to=msg)

    return app


app = make_client_app()
