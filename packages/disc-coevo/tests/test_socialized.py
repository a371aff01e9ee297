"""Socialized pairs, experts, training, persistence and bad input."""

import pytest
import torch
from torch import nn

from disc_coevo import (
    Socialized,
    StagedExpert,
    TinyResNet,
    accuracy,
    coevolve,
    from_feature_net,
    from_resnet,
    load_weights,
    save_weights,
    train,
)


def test_fusion_modes_have_the_right_widths(experts, images):
    a, b = experts()
    x, _ = images
    for fusion in ("disc", "mean", "concat", "none"):
        pair = Socialized(a, b, 3, (1, 8, 8), fusion=fusion).eval()
        assert pair(x).shape == (10, 3)
    assert Socialized(a, b, 3, (1, 8, 8), fusion="concat").head.in_features == 16


def test_resnet_layout_adapter_shares_modules():
    class ResNetLike(nn.Module):  # torchvision's attribute names
        def __init__(self):
            super().__init__()
            self.conv1, self.bn1, self.relu = (
                nn.Conv2d(1, 4, 3, padding=1),
                nn.BatchNorm2d(4),
                nn.ReLU(),
            )
            self.maxpool = nn.Identity()
            self.layer1, self.layer2 = nn.Conv2d(4, 4, 3, padding=1), nn.Conv2d(4, 8, 3, 2, 1)
            self.fc = nn.Linear(8, 5)

    net = ResNetLike()
    expert = from_resnet(net, stages=("layer1", "layer2"))
    assert expert.stages["layer1"] is net.layer1 and expert.head is net.fc
    assert expert(torch.rand(2, 1, 8, 8)).shape == (2, 5)
    with pytest.raises(TypeError, match="lacks"):
        from_resnet(nn.Linear(2, 2))


def test_timm_features_only_layout_adapter():
    class FeatureListNetLike(nn.ModuleDict):  # timm's features_only layout
        def __init__(self):
            super().__init__(
                {
                    "conv1": nn.Conv2d(1, 4, 3, padding=1),
                    "act1": nn.ReLU(),
                    "layer1": nn.Conv2d(4, 4, 3, padding=1),
                    "layer2": nn.Conv2d(4, 8, 3, 2, 1),
                }
            )
            self.return_layers = {"act1": "0", "layer2": "1"}

        def forward(self, x):
            out = []
            for name, module in self.items():
                x = module(x)
                if name in self.return_layers:
                    out.append(x)
            return out

    net = FeatureListNetLike()
    expert = from_feature_net(net)
    assert expert.stage_names == ["act1", "layer2"]
    x = torch.rand(2, 1, 8, 8)
    feats = expert.features(x)
    for got, want in zip((feats["act1"], feats["layer2"]), net(x), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    a = TinyResNet(3, widths=(4, 4, 8))
    pair = Socialized(a, expert, 3, (1, 8, 8), stages=["layer1", "layer2"])
    assert pair(x).shape == (2, 3)
    with pytest.raises(TypeError, match="features_only"):
        from_feature_net(nn.Sequential(nn.Identity()))


def test_training_learns_and_coevolve_trains_both_directions(experts):
    a, b = experts()
    g = torch.Generator().manual_seed(0)
    x = torch.rand(48, 1, 8, 8, generator=g, dtype=torch.float64)
    y = (x.mean(dim=(1, 2, 3)) > x.mean()).long()  # brightness: learnable
    pair = Socialized(a, b, 2, (1, 8, 8))
    history = train(pair, x, y, epochs=15, batch_size=16, lr=3e-3)
    assert history[-1] < history[0] and pair.step == 15 * 3
    assert accuracy(pair, x, y) > 0.8
    a, b = experts()
    b_before = {k: v.clone() for k, v in b.state_dict().items()}
    sa, sb = coevolve(a, b, (x, y, 3), (x, y, 2), (1, 8, 8), epochs=2, batch_size=16)
    assert sa.main is a and sb.main is b and sa.aux is not b and sb.aux is not a
    assert sa.head is a.head  # A's own 3-class head keeps training
    assert any(not torch.equal(v, b_before[k]) for k, v in b.state_dict().items())  # B learnt too


def test_save_and_load_weights(experts, tmp_path):
    a, b = experts()
    pair = Socialized(a, b, 3, (1, 8, 8))
    save_weights(pair, tmp_path / "ck", epoch=3)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        save_weights(pair, tmp_path / "ck")
    c, d = experts(seed=1)
    other = Socialized(c, d, 3, (1, 8, 8))
    assert load_weights(other, tmp_path / "ck") == {"epoch": 3}
    for k, v in pair.state_dict().items():
        torch.testing.assert_close(other.state_dict()[k], v, rtol=0, atol=0)
    (tmp_path / "ck" / "model.safetensors").write_bytes(b"broken")
    with pytest.raises(ValueError, match=r"model\.safetensors"):
        load_weights(other, tmp_path / "ck")
    with pytest.raises(FileNotFoundError, match="no weights"):
        load_weights(other, tmp_path / "missing")


def test_checkpoint_dir_never_deletes_a_users_files(experts, tmp_path):
    """The data-loss case: a folder holding the user's thesis is refused before training,
    with and without overwrite=True, and the thesis survives; another run's checkpoint
    is replaced only with overwrite=True."""
    a, b = experts()
    x, y = torch.rand(8, 1, 8, 8), torch.arange(8) % 2
    mine = tmp_path / "my_results"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    pair = Socialized(a, b, 2, (1, 8, 8))
    before = {k: v.clone() for k, v in pair.state_dict().items()}
    for overwrite in (False, True):
        with pytest.raises(FileExistsError, match="my_results"):
            train(pair, x, y, epochs=1, checkpoint_dir=mine, overwrite=overwrite)
    assert [p.name for p in mine.iterdir()] == ["thesis.tex"]
    assert (mine / "thesis.tex").read_text() == "years of work"
    assert all(torch.equal(v, before[k]) for k, v in pair.state_dict().items())  # not trained
    train(pair, x, y, epochs=1, checkpoint_dir=tmp_path / "run")
    with pytest.raises(FileExistsError, match="overwrite=True"):  # another run's weights
        train(pair, x, y, epochs=1, checkpoint_dir=tmp_path / "run")
    train(pair, x, y, epochs=2, checkpoint_dir=tmp_path / "run", overwrite=True)
    assert (tmp_path / "run" / "meta.json").read_text() == '{"epoch": 2}'


def test_float64_or_numpy_images_train_a_float32_model(tmp_path):
    from disc_coevo import TinyResNet

    torch.manual_seed(0)
    model = TinyResNet(2, widths=(4, 8, 8))
    x = torch.rand(8, 1, 8, 8, dtype=torch.float64)
    history = train(model, x.numpy(), (torch.arange(8) % 2).numpy(), epochs=1)
    assert len(history) == 1 and history[0] > 0
    assert 0.0 <= accuracy(model, x, torch.arange(8) % 2) <= 1.0


def test_load_weights_checks_shapes_and_finiteness(experts, tmp_path):
    from safetensors.torch import save_file

    a, b = experts()
    pair = Socialized(a, b, 3, (1, 8, 8))
    save_weights(pair, tmp_path / "ck")
    other = Socialized(*experts(seed=1), 2, (1, 8, 8))  # another class count
    with pytest.raises(
        ValueError,
        match=r"ck/model\.safetensors holds tensors of the wrong "
        r"shape.*head\.bias \(3,\) \(the model has \(2,\)\)",
    ):
        load_weights(other, tmp_path / "ck")
    state = {k: v.clone() for k, v in pair.state_dict().items()}
    state["head.bias"][0] = float("nan")
    save_file(state, str(tmp_path / "ck" / "model.safetensors"))
    with pytest.raises(ValueError, match=r"holds NaN or infinite weights in head\.bias"):
        load_weights(pair, tmp_path / "ck")
    (tmp_path / "ck" / "meta.json").write_text("[1]")
    save_weights(pair, tmp_path / "ck2")
    (tmp_path / "ck2" / "meta.json").write_text("{oops")
    with pytest.raises(ValueError, match=r"ck2/meta\.json is not valid JSON"):
        load_weights(pair, tmp_path / "ck2")


def test_training_writes_checkpoints(experts, tmp_path):
    a, b = experts()
    x = torch.rand(8, 1, 8, 8, dtype=torch.float64)
    train(
        Socialized(a, b, 2, (1, 8, 8)),
        x,
        torch.arange(8) % 2,
        epochs=2,
        checkpoint_dir=tmp_path / "run",
    )
    assert (tmp_path / "run" / "model.safetensors").is_file()
    assert (tmp_path / "run" / "meta.json").read_text() == '{"epoch": 2}'


def test_bad_input_is_refused(experts, images):
    a, b = experts()
    x, y = images
    with pytest.raises(TypeError, match="StagedExpert"):
        Socialized(nn.Linear(2, 2), b, 3, (1, 8, 8))
    with pytest.raises(ValueError, match=r"stages \['layer9'\] are not stages"):
        Socialized(a, b, 3, (1, 8, 8), stages=["layer9"])
    with pytest.raises(ValueError, match="not stages of the auxiliary expert"):
        Socialized(a, b, 3, (1, 8, 8), sources={"layer1": ["conv"], "layer2": ["layer1"]})
    with pytest.raises(ValueError, match=r"input_shape \(3, 8, 8\) does not fit"):
        Socialized(a, b, 3, (3, 8, 8))
    with pytest.raises(ValueError, match=r"input_shape must be \(C, H, W\)"):
        Socialized(a, b, 3, (8, 8))
    wide = TinyResNet(2, widths=(4, 8, 16)).double()
    with pytest.raises(ValueError, match="fusion='concat'"):
        Socialized(a, wide, 3, (1, 8, 8))
    with pytest.raises(ValueError, match="fusion must be one of"):
        Socialized(a, b, 3, (1, 8, 8), fusion="sum")
    pair = Socialized(a, b, 3, (1, 8, 8))
    with pytest.raises(ValueError, match=r"X must be 4-dimensional"):
        train(pair, x[:, 0], y)
    with pytest.raises(ValueError, match="X must be finite"):
        train(pair, torch.full_like(x, float("nan")), y)
    with pytest.raises(ValueError, match=r"y must hold one label per sample \(10\), got 5"):
        train(pair, x, y[:5])
    with pytest.raises(ValueError, match="y must hold labels below the model's 3 classes, got 7"):
        train(pair, x, torch.full_like(y, 7))
    with pytest.raises(ValueError, match="y must hold whole-number class labels"):
        train(pair, x, y + 0.5)
    with pytest.raises(ValueError, match="y must hold labels >= 0"):
        accuracy(pair, x, -y - 1)
    with pytest.raises(ValueError, match="optimizer must be one of"):
        train(pair, x, y, optimizer="lbfgs")
    with pytest.raises(ValueError, match="at least 2 images"):
        train(pair, x[:1], y[:1])
    with pytest.raises(ValueError, match="stages must name at least one stage"):
        StagedExpert(nn.Identity(), {}, nn.Identity())


def test_pairs_built_by_hand_in_both_directions_leave_the_experts_trainable(experts):
    a, b = experts()
    g = torch.Generator().manual_seed(3)
    x = torch.rand(32, 1, 8, 8, generator=g, dtype=torch.float64)
    y = (x.mean(dim=(1, 2, 3)) > x.mean()).long()
    ab, ba = Socialized(a, b, 2, (1, 8, 8)), Socialized(b, a, 2, (1, 8, 8))
    assert all(p.requires_grad for p in (*a.parameters(), *b.parameters()))  # not mutated
    b_ids = {id(p) for p in b.parameters()}
    assert not any(id(p) in b_ids for p in ab.trainable_parameters())
    a_before = {k: v.clone() for k, v in a.state_dict().items()}
    b_before = {k: v.clone() for k, v in b.state_dict().items()}
    train(ab, x, y, epochs=1, batch_size=16)
    assert any(not torch.equal(v, a_before[k]) for k, v in a.state_dict().items())  # A learnt
    assert all(torch.equal(v, b_before[k]) for k, v in b.state_dict().items())  # B untouched
    train(ba, x, y, epochs=1, batch_size=16)  # B still trains (it was frozen in place before)
    assert any(not torch.equal(v, b_before[k]) for k, v in b.state_dict().items())
    train(b, x, y, epochs=1, batch_size=16)  # and alone
