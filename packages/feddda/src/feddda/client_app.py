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

from .federated import Settings, build_model, client_data, evaluate, local_train, shared_part
from .model import FedDDAModel

PERSONAL = "personal"


def _personal(model: FedDDAModel, method: str) -> dict:
    if method == "feddda":
        return model.personal_state()
    if method == "local":
        return model.trainable_state()
    return {}


def _model(msg: Message, context: Context, settings: Settings) -> FedDDAModel:
    model = build_model(settings)
    model.load_partial(msg.content["arrays"].to_torch_state_dict())
    if PERSONAL in context.state:
        model.load_partial(context.state[PERSONAL].to_torch_state_dict())
    return model


def _partition(context: Context) -> tuple[int, int]:
    try:
        return int(context.node_config["partition-id"]), int(context.node_config["num-partitions"])
    except KeyError as err:
        raise ValueError(
            "the SuperNode needs --node-config 'partition-id=<i> num-partitions=<n>'"
        ) from err


def make_client_app(**overrides) -> ClientApp:
    """A ``ClientApp`` whose settings are ``context.run_config`` overlaid with ``overrides``."""
    app = ClientApp()

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        settings = Settings.from_config(context.run_config, **overrides)
        pid, n = _partition(context)
        server_round = int(msg.content["config"]["server-round"])
        if pid == settings.fail_partition and server_round == 2:
            raise RuntimeError(f"client {pid} failed on purpose in round {server_round}")
        data, _ = client_data(settings, pid, n)
        model = _model(msg, context, settings)
        loss = local_train(model, data, settings, round_seed=settings.seed * 1000 + server_round * 10 + pid)
        personal = _personal(model, settings.method)
        if personal:
            context.state[PERSONAL] = ArrayRecord({k: v.cpu().clone() for k, v in personal.items()})
        reply = RecordDict(
            {
                "arrays": ArrayRecord(shared_part(model, settings.method)),
                "metrics": MetricRecord({"train-loss": loss, "num-examples": len(data)}),
            }
        )
        return Message(content=reply, reply_to=msg)

    @app.evaluate()
    def evaluate_fn(msg: Message, context: Context) -> Message:
        settings = Settings.from_config(context.run_config, **overrides)
        pid, n = _partition(context)
        _, test = client_data(settings, pid, n)
        acc = evaluate(_model(msg, context, settings), test)
        metrics = MetricRecord({"accuracy": acc, "client-id": pid, "num-examples": len(test)})
        return Message(content=RecordDict({"metrics": metrics}), reply_to=msg)

    return app


app = make_client_app()
