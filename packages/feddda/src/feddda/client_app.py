"""The FedDDA ``ClientApp`` (Flower Message API).

Each round the client loads the server's shared tensors over a fresh model, restores its
personal part (FedDDA: local context, specific adapter, gate; local-only: its whole prompt)
from ``context.state``, which Flower keeps per client across rounds, trains locally, stores
the personal part back and replies with the shared part and its sample count. ``flwr run``
reads ``feddda.client_app:app``; :func:`make_client_app` bakes settings in for in-process
runs. The client's data is chosen by ``node_config`` (``partition-id``, ``num-partitions``).
"""

from __future__ import annotations

from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from .federated import (
    Settings,
    build_model,
    client_data,
    evaluate,
    local_train,
    personal_part,
    shared_part,
)
from .model import FedDDAModel

PERSONAL = "personal"


def _model(received: dict, state: RecordDict, settings: Settings) -> FedDDAModel:
    model = build_model(settings)
    model.load_partial(received)
    if PERSONAL in state:
        model.load_partial(state[PERSONAL].to_torch_state_dict())
    return model


def train_step(
    received: dict,
    state: RecordDict,
    settings: Settings,
    partition_id: int,
    num_partitions: int,
    server_round: int,
) -> tuple[dict, dict]:
    """One client round: the server's shared tensors ``received`` plus the personal part
    kept in ``state`` (updated in place), local training; returns ``(shared part to send,
    metrics)``."""
    data, _ = client_data(settings, partition_id, num_partitions)
    model = _model(received, state, settings)
    seed = settings.seed * 1000 + server_round * 10 + partition_id
    loss = local_train(model, data, settings, round_seed=seed)
    personal = personal_part(model, settings.method)
    if personal:
        state[PERSONAL] = ArrayRecord({k: v.cpu().clone() for k, v in personal.items()})
    return shared_part(model, settings.method), {"train-loss": loss, "num-examples": len(data)}


def evaluate_step(
    received: dict, state: RecordDict, settings: Settings, partition_id: int, num_partitions: int
) -> dict:
    """Test accuracy of the server's shared tensors + this client's personal part."""
    _, test = client_data(settings, partition_id, num_partitions)
    acc = evaluate(_model(received, state, settings), test)
    return {"accuracy": acc, "client-id": partition_id, "num-examples": len(test)}


def _partition(context: Context) -> tuple[int, int]:
    try:
        return int(context.node_config["partition-id"]), int(context.node_config["num-partitions"])
    except KeyError as err:
        raise ValueError(
            "the SuperNode needs --node-config 'partition-id=<i> num-partitions=<n>'"
        ) from err


def make_client_app(mods=None, **overrides) -> ClientApp:
    """A ``ClientApp`` whose settings are ``context.run_config`` overlaid with ``overrides``;
    ``mods``: Flower mods wrapped around its train and evaluate functions."""
    app = ClientApp(mods=mods)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        settings = Settings.from_config(context.run_config, **overrides)
        pid, n = _partition(context)
        server_round = int(msg.content["config"]["server-round"])
        received = msg.content["arrays"].to_torch_state_dict()
        shared, metrics = train_step(received, context.state, settings, pid, n, server_round)
        reply = RecordDict({"arrays": ArrayRecord(shared), "metrics": MetricRecord(metrics)})
        return Message(content=reply, reply_to=msg)

    @app.evaluate()
    def evaluate_fn(msg: Message, context: Context) -> Message:
        settings = Settings.from_config(context.run_config, **overrides)
        pid, n = _partition(context)
        received = msg.content["arrays"].to_torch_state_dict()
        metrics = evaluate_step(received, context.state, settings, pid, n)
        return Message(content=RecordDict({"metrics": MetricRecord(metrics)}), reply_to=msg)

    return app


app = make_client_app()
