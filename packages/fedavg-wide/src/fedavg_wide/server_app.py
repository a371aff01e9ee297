"""The fedavg-wide ``ServerApp`` (Flower Message API): FedAvg weighted by ``num-examples``.

Flower's own ``FedAvg`` strategy does the sampling (``fraction_train = participation``)
and the sample-weighted mean of the clients' parameters, which is the analysed server
step; the server evaluates the global model itself after every round (centralized
evaluation on all clients' training data pooled and on the held-out set), so no
evaluation messages are sent. ``flwr run`` reads ``fedavg_wide.server_app:app``;
:func:`make_server_app` bakes settings in for in-process runs.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import torch
from flwr.app import ArrayRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg as FlowerFedAvg

from icml25_core import check_loss

from .fedavg import _check_data, evaluate
from .task import Settings, build_model, federated_data, load_global


def _write_atomic(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def make_server_app(*, model_fn=build_model, data_fn=federated_data, **overrides) -> ServerApp:
    """A ``ServerApp`` whose settings are ``context.run_config`` overlaid with
    ``overrides``; ``model_fn`` / ``data_fn`` as in
    :func:`~fedavg_wide.client_app.make_client_app` (the server evaluates on every
    client's data pooled and on ``test``). With ``result_path`` set it writes there (atomically) the per-round
    metrics as JSON (``{"rounds": [...], "train_loss": [...], "train_accuracy": [...],
    "test_loss": [...], "test_accuracy": [...]}``, round 0 = the initial model) and the
    final parameters to ``<result_path>.safetensors``."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        from safetensors.torch import save_file

        settings = Settings.from_config(context.run_config, **overrides)
        nodes = settings.min_nodes or len(list(grid.get_node_ids())) or 1
        n_clients = settings.n_clients or nodes
        model = model_fn(settings)
        clients, test = data_fn(settings, n_clients)
        pooled = _check_data(
            "training data",
            torch.cat([c[0] for c in clients]),
            torch.cat([c[1] for c in clients]),
            settings.loss,
            model,
        )
        test = _check_data("test", *test, settings.loss, model)
        history: dict[str, list] = {
            k: [] for k in ("rounds", "train_loss", "train_accuracy", "test_loss", "test_accuracy")
        }

        def evaluate_fn(server_round: int, arrays: ArrayRecord) -> MetricRecord:
            load_global(model, arrays.to_torch_state_dict())
            tl, ta = evaluate(model, *pooled, settings.loss)
            vl, va = evaluate(model, *test, settings.loss)
            first = history["train_loss"][0] if history["train_loss"] else None
            check_loss(
                tl, lr=settings.lr, step=server_round, reference=first, what="global training loss"
            )
            for key, value in zip(history, (server_round, tl, ta, vl, va), strict=True):
                history[key].append(value)
            return MetricRecord({"train-loss": tl, "test-loss": vl})

        per_round = max(1, round(settings.participation * nodes))
        strategy = FlowerFedAvg(
            fraction_train=settings.participation,
            fraction_evaluate=0.0,
            min_train_nodes=per_round,
            min_evaluate_nodes=0,
            min_available_nodes=nodes,
        )
        result = strategy.start(
            grid=grid,
            initial_arrays=ArrayRecord(model.state_dict()),
            num_rounds=settings.num_server_rounds,
            evaluate_fn=evaluate_fn,
        )
        if settings.result_path:
            out = Path(settings.result_path)
            load_global(model, result.arrays.to_torch_state_dict())
            state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
            weights = out.with_name(out.name + ".safetensors")
            _write_atomic(weights, lambda p: save_file(state, str(p)))
            _write_atomic(out, lambda p: p.write_text(json.dumps(history, indent=1)))

    return app


app = make_server_app()
