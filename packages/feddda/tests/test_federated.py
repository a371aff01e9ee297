"""Aggregation oracles, personal state across rounds, and a 2-round Flower simulation."""

import pytest
import torch
from flwr.app import ArrayRecord, MetricRecord, RecordDict
from flwr.serverapp.strategy.strategy_utils import aggregate_arrayrecords

from feddda.data import STYLES, partition, synthetic_images
from feddda.federated import Settings, build_model, client_data, shared_part
from feddda.model import FedDDAModel


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
    replies = [
        RecordDict(
            {
                "arrays": ArrayRecord(shared_part(m, "feddda")),
                "metrics": MetricRecord({"num-examples": n}),
            }
        )
        for m, n in zip(models, counts, strict=True)
    ]
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

    # Dirichlet label skew: a small alpha concentrates a client's labels on few classes
    def top_share(alpha):
        clients = partition(data, 4, alpha=alpha, seed=0)
        return sum(float(torch.bincount(c.labels, minlength=6).max()) / len(c) for c in clients) / 4

    assert top_share(0.1) > 0.6 > 0.35 > top_share(1000.0)  # uniform labels: about 1/6
    with pytest.raises(ValueError, match="exceeds the number of styles"):
        partition(data, 5)


def test_settings_and_client_data_errors(clip_path):
    with pytest.raises(ValueError, match="method"):
        Settings.from_config({"method": "fedavg"})
    with pytest.raises(ValueError, match=r"unknown setting.*num_rounds"):
        Settings.from_config({}, num_rounds=3)  # a typo is not silently ignored
    with pytest.raises(ValueError, match="local_epochs must be >= 1"):
        Settings.from_config({"local-epochs": 0})
    s = Settings.from_config({"method": "promptfl", "clip-path": clip_path, "shots": 1})
    assert s.method == "promptfl" and s.shots == 1
    with pytest.raises(ValueError, match="partition"):
        client_data(s, 4, 4)
    with pytest.raises(ValueError, match="clip_path"):
        build_model(Settings(clip_path="/nonexistent"))
    model = build_model(s)
    assert isinstance(model, FedDDAModel) and not model.adapters


def fail_client_1_in_round_2(msg, context, call_next):
    """A Flower mod: client 1 raises while training in round 2."""
    if (
        msg.metadata.message_type == "train"
        and context.node_config["partition-id"] == 1
        and msg.content["config"]["server-round"] == 2
    ):
        raise RuntimeError("client 1 failed on purpose in round 2")
    return call_next(msg, context)


SMALL = {"num_server_rounds": 2, "n_global": 4, "n_local": 4, "train_pool": 200}


def test_two_round_simulation_runs_and_tolerates_a_failing_client(clip_path):
    """On Flower's Ray engine (the real actor pool): a client raising in round 2 becomes
    an error reply, the round aggregates the other client; the in-process engine returns
    the same traffic and losses (up to rounding) for the same run."""
    from feddda import simulate

    settings = {"clip_path": clip_path, **SMALL, "test_per_client": 20}
    kwargs = {"num_supernodes": 2, "client_mods": [fail_client_1_in_round_2]}
    result = simulate(settings, num_cpus=2, **kwargs)
    assert set(result["evaluate"]) == {"1", "2"}
    # client 1 raised during round-2 training: the round still aggregated client 0 ...
    assert set(result["train"]) == {"1", "2"}
    assert result["traffic"]["2"]["up"] == result["traffic"]["1"]["up"] / 2
    # ... and both clients were evaluated
    assert {"accuracy-client-0", "accuracy-client-1"} <= set(result["evaluate"]["2"])
    # FedDDA sends its shared part only: global context (4 x 32) + shared adapter (16 -> 4 -> 16)
    settings_ = Settings(clip_path=clip_path, n_global=4, n_local=4)
    arrays = ArrayRecord(shared_part(build_model(settings_), "feddda"))
    assert sum(a.numpy().size for a in arrays.values()) == 4 * 32 + 16 * 4 + 4 * 16
    wire = sum(len(a.data) for a in arrays.values())  # float32 + a small header per array
    assert result["traffic"]["1"]["up"] == 2 * wire
    assert result["traffic"]["1"]["down"] == 2 * 2 * wire  # train + evaluate messages

    # the same run in-process: identical traffic, training losses equal up to float
    # rounding; accuracies within one test image (the tiny random CLIP's logits are nearly
    # tied, so a rounding difference between processes can flip one prediction)
    inproc = simulate(settings, engine="inprocess", **kwargs)
    one_image = 1 / len(client_data(Settings(clip_path=clip_path, test_per_client=20), 0, 2)[1])
    for r in ("1", "2"):
        for key in ("down", "up"):
            assert inproc["traffic"][r][key] == result["traffic"][r][key]
        for key, value in result["train"][r].items():
            assert inproc["train"][r][key] == pytest.approx(value, rel=1e-4), (r, key)
        for key, value in result["evaluate"][r].items():
            assert abs(inproc["evaluate"][r][key] - value) <= one_image + 1e-9, (r, key)


def test_simulate_refuses_bad_engine_and_supernodes(clip_path):
    from feddda import simulate

    with pytest.raises(ValueError, match="engine"):
        simulate({"clip_path": clip_path}, engine="threads")
    with pytest.raises(ValueError, match="num_supernodes"):
        simulate({"clip_path": clip_path}, num_supernodes=0)
    with pytest.raises(ValueError, match="min_nodes=3 exceeds num_supernodes=2"):
        simulate({"clip_path": clip_path, "min_nodes": 3}, num_supernodes=2)


def test_client_keeps_its_personal_part_across_rounds_and_takes_the_servers_shared_part(clip_path):
    from flwr.app import RecordDict

    from feddda.client_app import PERSONAL, train_step

    settings = Settings(clip_path=clip_path, n_global=4, n_local=4, train_pool=200, local_epochs=1)
    state = RecordDict()
    server = shared_part(build_model(settings), "feddda")
    sent, metrics = train_step(server, state, settings, 0, 2, server_round=1)
    assert set(sent) == set(server) and metrics["num-examples"] > 0
    kept = state[PERSONAL].to_torch_state_dict()
    assert set(kept) == {k for k in build_model(settings).personal_state()}
    # round 2: the server's new shared part and the kept personal part are what the model starts from
    new_server = {k: torch.randn_like(v) for k, v in server.items()}
    from feddda.client_app import _model

    model = _model(new_server, state, settings)
    assert all(torch.equal(model.shared_state()[k], v) for k, v in new_server.items())
    assert all(torch.equal(model.personal_state()[k], v) for k, v in kept.items())
    # PromptFL keeps nothing; local-only keeps everything and sends nothing
    promptfl = Settings(
        clip_path=clip_path, method="promptfl", n_global=4, n_local=4, train_pool=200
    )
    state = RecordDict()
    sent, _ = train_step(shared_part(build_model(promptfl), "promptfl"), state, promptfl, 1, 2, 1)
    assert PERSONAL not in state and set(sent) == {"prompt.global_ctx"}
    local = Settings(clip_path=clip_path, method="local", n_global=4, n_local=4, train_pool=200)
    sent, _ = train_step({}, state, local, 1, 2, 1)
    assert sent == {} and "prompt.global_ctx" in state[PERSONAL]


def test_user_image_folders_per_client_and_bad_input(clip_path, tmp_path):
    from PIL import Image

    from feddda.data import image_folder

    for client, split, cls, n in [
        (0, "train", "circle", 2),
        (0, "train", "square", 1),
        (0, "test", "circle", 1),
        (0, "test", "square", 2),
    ]:
        folder = tmp_path / str(client) / split / cls
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(n):
            Image.new("RGB", (40, 30), (255 * (cls == "circle"), 0, 0)).save(folder / f"{i}.png")
    settings = Settings.from_config(
        {"data-root": str(tmp_path), "classnames": "square, circle"}, clip_path=clip_path
    )
    train, test = client_data(settings, 0, 2)
    assert train.images.shape == (3, 3, 32, 32) and test.labels.tolist() == [1, 0, 0]
    assert train.labels.tolist() == [1, 1, 0]  # class order from classnames, not the folders
    model = build_model(settings)
    assert model.classnames == ["square", "circle"]
    with pytest.raises(ValueError, match="client 1 has no data"):
        client_data(settings, 1, 2)
    with pytest.raises(ValueError, match="not among the class names"):
        image_folder(tmp_path / "0" / "train", ["circle"])
    with pytest.raises(ValueError, match="needs classnames"):
        Settings.from_config({"data-root": str(tmp_path)})
    with pytest.raises(ValueError, match="unknown class name"):
        build_model(
            Settings.from_config(
                {"data-root": str(tmp_path), "classnames": "circle,blob"}, clip_path=clip_path
            )
        )
