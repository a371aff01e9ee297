"""Models and trainer: permutation invariance, switches, explanations, OOD drop, I/O."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from torch_geometric.data import Batch, Data, InMemoryDataset
from torch_geometric.loader import DataLoader

from nego_graph import (
    ERM,
    GSAT,
    IRM,
    GNNClassifier,
    NeGo,
    SpuriousMotif,
    Trainer,
    VREx,
    load_local_dataset,
)
from nego_graph.datasets import N_FEATURES

MODELS = {
    "ERM": lambda: ERM(N_FEATURES, 3, hidden=16),
    "IRM": lambda: IRM(N_FEATURES, 3, hidden=16),
    "VREx": lambda: VREx(N_FEATURES, 3, hidden=16),
    "GSAT": lambda: GSAT(N_FEATURES, 3, hidden=16),
    "NeGo": lambda: NeGo(N_FEATURES, 3, hidden=16),
    "NeGo-topr": lambda: NeGo(N_FEATURES, 3, hidden=16, mask="topr", ratio=0.3),
}


@pytest.fixture(scope="module")
def small():
    return SpuriousMotif(bias=0.7, num_graphs=60, seed=0)


def _permute(g: Data, seed: int) -> Data:
    perm = torch.from_numpy(np.random.default_rng(seed).permutation(g.num_nodes))
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(g.num_nodes)
    return Data(x=g.x[perm], edge_index=inv[g.edge_index], y=g.y, edge_gt=g.edge_gt, env=g.env)


@pytest.mark.parametrize("name", list(MODELS))
def test_predictions_are_permutation_invariant(name, small):
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    graphs = small.test[:8]
    a = torch.softmax(model(Batch.from_data_list(graphs))[0], 1)
    b = torch.softmax(
        model(Batch.from_data_list([_permute(g, i) for i, g in enumerate(graphs)]))[0], 1
    )
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "switches",
    [
        {},
        {"negative": False},
        {"informative": False},
        {"invariance": False},
        {"negative": False, "informative": False, "invariance": False},
        {"mask": "topr", "ratio": 0.4},
    ],
)
def test_every_component_switch_trains(switches, small):
    torch.manual_seed(0)
    model = NeGo(N_FEATURES, 3, hidden=16, **switches)
    batch = Batch.from_data_list(small.train[:16])
    logits, aux = model(batch)
    loss, parts = model.loss(batch, logits, aux)
    assert torch.isfinite(loss)
    loss.backward()
    assert ("neg" in parts) == switches.get("negative", True)
    assert ("info" in parts) == switches.get("informative", True)
    assert ("inv" in parts) == switches.get("invariance", True)
    assert model.scorer[0].weight.grad is not None
    assert torch.allclose(aux["assign"].sum(1), torch.ones(16))


def test_gradient_reversal_makes_the_environment_unpredictive(small):
    """The prompts receive the reversed gradient of the label head's loss."""
    from nego_graph import grad_reverse

    x = torch.ones(3, requires_grad=True)
    (grad_reverse(x, 2.0) * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    torch.testing.assert_close(x.grad, torch.tensor([-2.0, -4.0, -6.0]))


def _train(model, data, epochs=25):
    torch.manual_seed(0)
    train = DataLoader(
        data.train, batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(0)
    )
    val = DataLoader(data.val, batch_size=256)
    return Trainer(model, epochs=epochs, patience=epochs, seed=0).fit(train, val)


@pytest.mark.parametrize(
    "make", [lambda: GSAT(N_FEATURES, 3, hidden=32), lambda: NeGo(N_FEATURES, 3, hidden=32)]
)
def test_edge_mask_precision_on_an_easy_setting(make):
    data = SpuriousMotif(bias=1 / 3, num_graphs=600, seed=0)
    trainer = _train(make(), data)
    precision, chance = [], []
    for g in data.test[:60]:
        k = int(g.edge_gt.sum())
        top = torch.topk(trainer.explain(g), k).indices
        precision.append(float(g.edge_gt[top].mean()))
        chance.append(float(g.edge_gt.mean()))
    # stated margin: precision@k at least 0.1 above the motif's share of edges
    assert np.mean(precision) >= np.mean(chance) + 0.1


def test_checkpoint_loads_in_a_fresh_process_from_the_folder_alone(small, tmp_path):
    trainer = _train(NeGo(N_FEATURES, 3, hidden=16, n_envs=3), small, epochs=2)
    trainer.save_checkpoint(tmp_path / "ck")
    code = (
        "import sys\n"
        "from safetensors.torch import save_file\n"
        "from torch_geometric.loader import DataLoader\n"
        "from nego_graph import SpuriousMotif, Trainer\n"
        "t = Trainer.from_checkpoint(sys.argv[1], device='cpu')\n"
        "graphs = SpuriousMotif(bias=0.7, num_graphs=60, seed=0).test[:4]  # the `small` data\n"
        "save_file({'p': t.predict(DataLoader(graphs, batch_size=4))}, sys.argv[2])\n"
        "print(type(t.model).__name__, len(t.history_['epoch']), t.model.prompts.shape[0])\n"
    )
    args = [sys.executable, "-c", code, str(tmp_path / "ck"), str(tmp_path / "p.safetensors")]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()
    assert out == ["NeGo", str(len(trainer.history_["epoch"])), "3"]
    expected = trainer.predict(DataLoader(small.test[:4], batch_size=4))
    torch.testing.assert_close(load_file(tmp_path / "p.safetensors")["p"], expected)
    # the model alone, too
    again = NeGo.from_pretrained(tmp_path / "ck")
    torch.testing.assert_close(again.prompts, trainer.model.prompts.cpu())


@pytest.mark.parametrize("at", ["between-files", "between-renames"])
def test_a_checkpoint_save_killed_part_way_leaves_the_previous_one(small, tmp_path, at):
    """SIGKILL while ``save_checkpoint(overwrite=True)`` replaces a checkpoint (after its
    first file, or between the two renames): the previous files survive byte for byte
    and load as the trainer that wrote them."""
    from icml25_core.testing import kill_during_save

    trainer = _train(ERM(N_FEATURES, 3, hidden=8), small, epochs=1)
    ck = tmp_path / "ck"
    trainer.save_checkpoint(ck)
    before = {p.name: p.read_bytes() for p in ck.iterdir()}
    script = (
        "import torch\nfrom nego_graph import Trainer\n"
        f"t = Trainer.from_checkpoint({str(ck)!r}, device='cpu')\n"
        "with torch.no_grad():\n"
        "    for p in t.model.parameters():\n"
        "        p.add_(1.0)\n"
        f"t.save_checkpoint({str(ck)!r}, overwrite=True)\n"
    )
    kill_during_save(script, ck, at=at)
    loaded = Trainer.from_checkpoint(ck, device="cpu")
    assert {p.name: p.read_bytes() for p in ck.iterdir()} == before
    graphs = DataLoader(small.test[:8], batch_size=8)
    torch.testing.assert_close(loaded.predict(graphs), trainer.predict(graphs), rtol=0, atol=0)


def test_checkpoint_refuses_to_overwrite_and_names_bad_files(small, tmp_path):
    trainer = _train(ERM(N_FEATURES, 3, hidden=8), small, epochs=1)
    trainer.save_checkpoint(tmp_path / "ck")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        trainer.save_checkpoint(tmp_path / "ck")
    trainer.save_checkpoint(tmp_path / "ck", overwrite=True)
    meta = json.loads((tmp_path / "ck" / "trainer.json").read_text())
    for edit, match in (
        ({k: v for k, v in meta.items() if k != "best_epoch"}, r"lacks \['best_epoch'\]"),
        ({**meta, "best_epoch": "3"}, "'best_epoch' must be an integer or null"),
        ({**meta, "settings": [1]}, "'settings' must be JSON objects"),
    ):
        (tmp_path / "ck" / "trainer.json").write_text(json.dumps(edit))
        with pytest.raises(ValueError, match=match):
            Trainer.from_checkpoint(tmp_path / "ck")
    (tmp_path / "ck" / "trainer.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"trainer\.json is corrupt"):
        Trainer.from_checkpoint(tmp_path / "ck")
    (tmp_path / "ck" / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(ValueError, match=r"model\.safetensors is not a readable safetensors"):
        GNNClassifier.from_pretrained(tmp_path / "ck")
    with pytest.raises(FileNotFoundError, match=r"has no trainer\.json"):
        Trainer.from_checkpoint(tmp_path)


class Evil:
    """Stands for any pickled object that is not tensors or PyG data."""


def test_local_dataset_round_trip_and_refusal(small, tmp_path):
    InMemoryDataset.save(small.train[:5], str(tmp_path / "data.pt"))
    graphs = load_local_dataset(tmp_path / "data.pt")
    assert len(graphs) == 5
    torch.testing.assert_close(graphs[2].edge_index, small.train[2].edge_index)

    torch.save(Evil(), tmp_path / "evil.pt")
    with pytest.raises(ValueError, match="refusing to unpickle"):
        load_local_dataset(tmp_path / "evil.pt")
    with pytest.raises(FileNotFoundError):
        load_local_dataset(tmp_path / "missing.pt")
    for name, content in (("garbage.pt", b"not a torch file"), ("empty.pt", b"")):
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ValueError, match=f"{name} is not a readable torch dataset file"):
            load_local_dataset(tmp_path / name)


def test_bad_input(small):
    trainer = Trainer(NeGo(N_FEATURES, 3, hidden=16), epochs=1)
    g = small.train[0]
    no_edges = Data(x=g.x, edge_index=torch.zeros(2, 0, dtype=torch.long), y=g.y)
    with pytest.raises(ValueError, match="edges"):
        trainer.explain(no_edges)
    with pytest.raises(ValueError, match="edges"):
        trainer.fit([Batch.from_data_list([no_edges])], [Batch.from_data_list([g])])
    no_label = Data(x=g.x, edge_index=g.edge_index)
    with pytest.raises(ValueError, match="label"):
        trainer.fit([Batch.from_data_list([no_label])], [Batch.from_data_list([g])])
    wide = Data(x=torch.ones(g.num_nodes, 7), edge_index=g.edge_index, y=g.y)
    with pytest.raises(ValueError, match=f"{N_FEATURES} columns"):
        trainer.fit([Batch.from_data_list([wide])], [Batch.from_data_list([g])])
    with pytest.raises(TypeError, match="no edge mask"):
        Trainer(ERM(N_FEATURES, 3)).explain(g)
    with pytest.raises(ValueError, match="bias"):
        SpuriousMotif(bias=0.1)
    with pytest.raises(ValueError, match="shift"):
        SpuriousMotif(shift="mild")
    batch = [Batch.from_data_list(small.train[:4])]  # BatchNorm needs more than one graph
    with pytest.raises(ValueError, match="train_loader yielded no graphs"):
        trainer.fit([], batch)
    with pytest.raises(ValueError, match="val_loader yielded no graphs"):
        trainer.fit(batch, [])
    with pytest.raises(TypeError, match=r"train_loader must yield batches.*DataLoader\(graphs"):
        trainer.fit(small.train[:4], batch)  # a list of Data, not a loader
    with pytest.raises(ValueError, match="loader yielded no graphs"):
        trainer.predict([])
    for penalty in ("irm", "vrex"):
        model = GNNClassifier(N_FEATURES, 3, hidden=8, penalty=penalty)
        no_env = [Data(x=h.x, edge_index=h.edge_index, y=h.y) for h in small.train[:4]]
        with pytest.raises(ValueError, match=f"penalty='{penalty}' needs .*`env`"):
            Trainer(model, epochs=1).fit([Batch.from_data_list(no_env)], batch)
        floats = [
            Data(x=h.x, edge_index=h.edge_index, y=h.y, env=torch.tensor([0.5])) for h in no_env
        ]
        with pytest.raises(TypeError, match="env must hold integer environment ids"):
            Trainer(model, epochs=1).fit([Batch.from_data_list(floats)], batch)
    with pytest.raises(ValueError, match="lambda_inv must be finite"):
        NeGo(N_FEATURES, 3, lambda_inv=float("nan"))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"label": 7}, ValueError, "label must be <= 2"),
        ({"base": -1}, ValueError, "base must be >= 0"),
        ({"size": -5}, ValueError, "size must be >= 3"),
        ({"noise": float("nan")}, ValueError, "noise must be finite"),
        ({"noise": -0.1}, ValueError, "noise must be >= 0"),
    ],
)
def test_make_graph_checks_its_arguments(kwargs, error, match):
    from nego_graph.datasets import make_graph

    args = {"label": 0, "base": 0, "size": 10, "noise": 0.1, "rng": np.random.default_rng(0)}
    with pytest.raises(error, match=match):
        make_graph(**(args | kwargs))


def test_huge_datasets_are_refused_before_building(monkeypatch):
    with pytest.raises(ValueError, match="base_size=10000000 gives base graphs of up to"):
        SpuriousMotif(base_size=10**7)  # hung building the graphs before
    import icml25_core.validation as validation

    monkeypatch.setattr(validation, "available_memory", lambda device="cpu": 10**6)
    with pytest.raises(ValueError, match=r"num_graphs \* base_size: this request needs"):
        SpuriousMotif(num_graphs=3000)


@pytest.mark.parametrize("model", [GNNClassifier, GSAT, NeGo], ids=lambda m: m.__name__)
@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"in_dim": 0}, ValueError, "in_dim must be >= 1"),
        ({"n_classes": 1}, ValueError, "n_classes must be >= 2"),
        ({"hidden": 0}, ValueError, "hidden must be >= 1"),
        ({"layers": 0}, ValueError, "layers must be >= 1"),
        ({"dropout": 1.5}, ValueError, "dropout must be < 1.0"),
        ({"dropout": float("nan")}, ValueError, "dropout must be finite"),
        ({"hidden": 8.5}, TypeError, "hidden must be an integer"),
        ({"pool": "median"}, ValueError, "pool"),
    ],
)
def test_meaningless_sizes_are_refused_naming_the_argument(model, kwargs, error, match):
    with pytest.raises(error, match=match):
        model(**{"in_dim": 3, "n_classes": 2, **kwargs})


def test_bad_graphs_at_predict_and_explain_are_refused_naming_the_field(small):
    trainer = Trainer(NeGo(N_FEATURES, 3, hidden=16), epochs=1)
    g = small.train[0]
    nan = g.x.clone()
    nan[0, 0] = float("nan")
    cases = [
        (Data(x=nan, edge_index=g.edge_index, y=g.y), "x must be finite"),
        (Data(x=g.x.long(), edge_index=g.edge_index, y=g.y), "x must be floating point"),
        (Data(x=g.x, edge_index=g.edge_index + g.num_nodes, y=g.y), "edge_index must index"),
        (Data(x=g.x, edge_index=g.edge_index.float(), y=g.y), "edge_index must be a"),
    ]
    for graph, match in cases:
        with pytest.raises(ValueError, match=match):
            trainer.predict([Batch.from_data_list([graph])])
        with pytest.raises(ValueError, match=match):
            trainer.explain(graph)
    out_of_range = Data(x=g.x, edge_index=g.edge_index, y=torch.tensor([7]))
    with pytest.raises(ValueError, match=r"labels y must be in 0\.\.2"):
        trainer.accuracy([Batch.from_data_list([out_of_range])])
    floats = Data(x=g.x, edge_index=g.edge_index, y=g.y.float())
    with pytest.raises(ValueError, match="integer class indices"):
        trainer.fit([Batch.from_data_list([floats])], [Batch.from_data_list([g])])


def test_float64_features_are_cast_to_the_models_dtype(small):
    trainer = Trainer(NeGo(N_FEATURES, 3, hidden=16), epochs=1)
    batch = Batch.from_data_list(small.test[:4])
    double = batch.clone()
    double.x = double.x.double()
    torch.testing.assert_close(trainer.predict([double]), trainer.predict([batch]))
    assert double.x.dtype == torch.float64  # the caller's batch is left as it was


def test_importing_the_package_shows_no_dependency_deprecation_notice():
    import subprocess
    import sys

    code = (
        "import nego_graph\n"
        "nego_graph.NeGo, nego_graph.Trainer, nego_graph.SpuriousMotif\n"
        "import nego_graph.experiments\n"
    )
    proc = subprocess.run(
        [sys.executable, "-W", "error::FutureWarning", "-c", code],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
