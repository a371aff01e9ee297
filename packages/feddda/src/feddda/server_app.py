"""The FedDDA ``ServerApp`` (Flower Message API): sample-weighted FedAvg of the shared part.

Clients send only what their method shares (FedDDA: global context + shared adapter;
PromptFL: the whole prompt; local-only: nothing), so averaging the replies' arrays weighted
by ``num-examples`` is the method's aggregation. Replies carrying an error (a client that
failed mid-round) are logged and left out by the strategy; the round completes with the
others. ``flwr run`` reads ``feddda.server_app:app``; :func:`make_server_app` bakes
settings in for in-process runs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path

from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from .federated import Settings, build_model, shared_part


def per_client_metrics(records: list[RecordDict], weighting_key: str) -> MetricRecord:
    """Every client's accuracy (``accuracy-client-<id>``) and their unweighted mean."""
    out, accs = MetricRecord(), []
    for record in records:
        metrics = next(iter(record.metric_records.values()))
        accs.append(float(metrics["accuracy"]))
        out[f"accuracy-client-{int(metrics['client-id'])}"] = accs[-1]
    out["mean-client-accuracy"] = sum(accs) / len(accs)
    return out


def array_bytes(messages: Iterable[Message]) -> int:
    """Bytes of array payload in ``messages`` (what crosses the network, less framing)."""
    total = 0
    for msg in messages:
        if msg.has_error():
            continue
        for record in msg.content.array_records.values():
            total += sum(len(array.data) for array in record.values())
    return total


class SharedPartFedAvg(FedAvg):
    """``FedAvg`` over the arrays clients reply with (each method's shared part), weighted
    by ``num-examples``, that also records per round the array bytes it sends and receives
    and the wall time from sending the training messages to aggregating the evaluation
    replies: ``traffic[round] = {"down": bytes, "up": bytes, "seconds": s}``."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.traffic: dict[int, dict[str, float]] = {}
        self._started: dict[int, float] = {}

    def _count(self, server_round: int, direction: str, messages: list[Message]) -> list[Message]:
        row = self.traffic.setdefault(server_round, {"down": 0, "up": 0, "seconds": 0.0})
        row[direction] += array_bytes(messages)
        return messages

    def configure_train(self, server_round, arrays, config, grid):
        self._started[server_round] = time.perf_counter()
        return self._count(
            server_round, "down", list(super().configure_train(server_round, arrays, config, grid))
        )

    def aggregate_evaluate(self, server_round, replies):
        out = super().aggregate_evaluate(server_round, replies)
        if server_round in self._started:
            self.traffic[server_round]["seconds"] = (
                time.perf_counter() - self._started[server_round]
            )
        return out

    def aggregate_train(self, server_round, replies):
        replies = self._count(server_round, "up", list(replies))
        return super().aggregate_train(server_round, replies)

    def configure_evaluate(self, server_round, arrays, config, grid):
        return self._count(
            server_round,
            "down",
            list(super().configure_evaluate(server_round, arrays, config, grid)),
        )


def make_server_app(**overrides) -> ServerApp:
    """A ``ServerApp`` whose settings are ``context.run_config`` overlaid with
    ``overrides``; with ``result_path`` set, the per-round client metrics (train loss,
    per-client accuracy) and array bytes moved are written there as JSON."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        settings = Settings.from_config(context.run_config, **overrides)
        model = build_model(settings)
        shared = shared_part(model, settings.method)
        nodes = settings.min_nodes or len(list(grid.get_node_ids())) or 1
        # every round trains and evaluates all `nodes` clients: Flower's FedAvg sizes its
        # sample from the nodes connected when it asks (fraction x connected) and only then
        # waits for `min_available_nodes`, so a node registering a moment late would be
        # left out of that round; the minimum sample sizes close that race
        strategy = SharedPartFedAvg(
            fraction_train=1.0,
            fraction_evaluate=1.0,
            min_train_nodes=nodes,
            min_evaluate_nodes=nodes,
            min_available_nodes=nodes,
            evaluate_metrics_aggr_fn=per_client_metrics,
        )
        result = strategy.start(
            grid=grid,
            initial_arrays=ArrayRecord(shared),
            num_rounds=settings.num_server_rounds,
        )
        if settings.result_path:
            out = {
                "evaluate": {int(r): dict(m) for r, m in result.evaluate_metrics_clientapp.items()},
                "train": {int(r): dict(m) for r, m in result.train_metrics_clientapp.items()},
                "traffic": strategy.traffic,
            }
            Path(settings.result_path).write_text(json.dumps(out, indent=1))

    return app


app = make_server_app()
