"""Aggregation oracles, personal state across rounds, and a 2-round Flower simulation."""

import json

import pytest
import torch
from flwr.app import ArrayRecord, MetricRecord, RecordDict
from flwr.serverapp.strategy.strategy_utils import aggregate_arrayrecords

from feddda.data import STYLES, partition, synthetic_images
from feddda.federated import Settings, build_model, client_data, shared_part
from feddda.model import FedDDAModel

from .conftest import tiny_clip


@pytest.fixture(scope="module")
def clip_path(tmp_path_factory):
    from feddda.data import caption_words
    from feddda.text import word_tokenizer

    path = tmp_path_factory.mktemp("clip")
    tiny_clip().save_pretrained(path)
    word_tokenizer(caption_words()).save_pretrained(path)
    return str(path)


def test_server_average_is_the_weighted_mean_of_the_shared_part_only(clip_path):
    settings = Settings(clip_path=clip_path, n_global=4, n_local=4)
    models = []
    for seed in range(3):
        torch.manual_seed(seed)
        m = build_model(settings)
        with torch.no_grad():
            for p in m.parameters():
                if p.requires_grad:
                    p.normal_()
        models.append(m)
    counts = [5, 10, 25]
    replies = [RecordDict({"arrays": ArrayRecord(shared_part(m, "feddda")),
                           "metrics": MetricRecord({"num-examples": n})})
               for m, n in zip(models, counts, strict=True)]  # fmt: skip
    avg = aggregate_arrayrecords(replies, "num-examples").to_torch_state_dict()
    assert set(avg) == set(models[0].shared_state())
    for k, v in avg.items():
        expected = sum(n * m.shared_state()[k] for m, n in zip(models, counts, strict=True)) / 40
        torch.testing.assert_close(v, expected)
    personal = [{k: v.clone() for k, v in m.personal_state().items()} for m in models]
    for m, mine in zip(models, personal, strict=True):
        m.load_partial(avg)  # what a client does with the server's reply
        assert all(torch.equal(m.personal_state()[k], v) for k, v in mine.items())
    a, b = models[0].shared_state(), models[2].shared_state()
    assert all(torch.equal(a[k], b[k]) for k in a)  # identical on all clients


def test_partition_gives_one_style_per_client_and_few_shot():
    data = synthetic_images(400, 32, seed=0)
    clients = partition(data, 4, shots=2, seed=0)
    assert [set(c.styles) for c in clients] == [{s} for s in STYLES]
    for c in clients:
        assert torch.bincount(c.labels, minlength=6).max() <= 2
    skewed = partition(data, 4, alpha=0.1, seed=0)
    assert all(len(c) > 0 for c in skewed)
    with pytest.raises(ValueError, match="exceeds the number of styles"):
        partition(data, 5)


def test_settings_and_client_data_errors(clip_path):
    with pytest.raises(ValueError, match="method"):
        Settings.from_config({"method": "fedavg"})
    s = Settings.from_config({"method": "promptfl", "clip-path": clip_path, "shots": 1})
    assert s.method == "promptfl" and s.shots == 1
    with pytest.raises(ValueError, match="partition"):
        client_data(s, 4, 4)
    with pytest.raises(ValueError, match="clip_path"):
        build_model(Settings(clip_path="/nonexistent"))
    model = build_model(s)
    assert isinstance(model, FedDDAModel) and not model.adapters


def test_two_round_simulation_runs_and_tolerates_a_failing_client(clip_path, tmp_path):
    from flwr.simulation import run_simulation

    from feddda.client_app import make_client_app
    from feddda.server_app import make_server_app

    out = tmp_path / "result.json"
    common = {"clip_path": clip_path, "num_server_rounds": 2, "n_global": 4, "n_local": 4,
              "train_pool": 200, "test_per_client": 20, "fail_partition": 1, "result_path": str(out)}  # fmt: skip
    run_simulation(
        server_app=make_server_app(**common),
        client_app=make_client_app(**common),
        num_supernodes=2,
        backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                        "init_args": {"num_cpus": 2}},
    )  # fmt: skip
    result = json.loads(out.read_text())
    assert set(result["evaluate"]) == {"1", "2"}
    # client 1 raised during round-2 training: the round still aggregated client 0
    assert set(result["train"]) == {"1", "2"}
    assert {"accuracy-client-0", "accuracy-client-1"} <= set(result["evaluate"]["2"])
