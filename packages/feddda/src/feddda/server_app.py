"""The FedDDA ``ServerApp`` (Flower Message API): sample-weighted FedAvg of the shared part.

Clients send only what their method shares (FedDDA: global context + shared adapter;
PromptFL: the whole prompt; local-only: their prompt back, unused), so averaging the
replies' arrays weighted by ``num-examples`` is the method's aggregation; replies carrying
an error (a client that failed mid-round) are logged and left out by the strategy.
``flwr run`` reads ``feddda.server_app:app``; :func:`make_server_app` bakes settings in.
"""

from __future__ import annotations

import json
from pathlib import Path

from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord, RecordDict
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


def make_server_app(result_path: str | None = None, **overrides) -> ServerApp:
    """A ``ServerApp``; with ``result_path`` the per-round evaluation metrics are written
    there as JSON."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        settings = Settings.from_config(context.run_config, **overrides)
        model = build_model(settings)
        nodes = len(list(grid.get_node_ids())) or 1
        strategy = FedAvg(
            fraction_train=1.0, fraction_evaluate=1.0, min_train_nodes=1,
            min_evaluate_nodes=1, min_available_nodes=nodes,
            evaluate_metrics_aggr_fn=per_client_metrics,
        )  # fmt: skip
        result = strategy.start(
            grid=grid,
            initial_arrays=ArrayRecord(shared_part(model, settings.method)),
            num_rounds=settings.num_server_rounds,
            train_config=ConfigRecord({"lr": settings.lr}),
        )
        if result_path:
            evaluate = {int(r): dict(m) for r, m in result.evaluate_metrics_clientapp.items()}
            train = {int(r): dict(m) for r, m in result.train_metrics_clientapp.items()}
            Path(result_path).write_text(json.dumps({"evaluate": evaluate, "train": train}))

    return app


app = make_server_app()
