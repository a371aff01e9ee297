"""Real timm ``features_only`` experts, the DataLoader path, augmentation and the
learning-rate schedules (the release's SGD recipe)."""

import copy

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from disc_coevo import RELEASE_SGD, Socialized, TinyResNet, accuracy, from_feature_net, train
from disc_coevo.training import _schedule

timm = pytest.importorskip("timm")


@pytest.mark.parametrize(
    ("name", "kwargs", "stages"),
    [
        # EfficientNetFeatures: conv_stem + bn1 + blocks, the stem not tapped
        ("efficientnet_b0", {}, ["blocks_0", "blocks_1", "blocks_2", "blocks_4", "blocks_6"]),
        ("efficientnet_b0", {"out_indices": (1, 3)}, ["blocks_1", "blocks_4"]),
        # MobileNetV3Features: the stem (after act1) is the first tap
        ("mobilenetv3_small_100", {}, ["bn1", "blocks_0", "blocks_1", "blocks_3", "blocks_5"]),
        # FeatureListNet
        ("resnet18", {}, ["act1", "layer1", "layer2", "layer3", "layer4"]),
    ],
)
def test_real_timm_feature_nets_give_their_own_features(name, kwargs, stages):
    torch.manual_seed(0)
    net = timm.create_model(name, pretrained=False, features_only=True, **kwargs).eval()
    expert = from_feature_net(net).eval()
    assert expert.stage_names == stages
    x = torch.rand(2, 3, 64, 64)
    with torch.no_grad():
        want, got = net(x), expert.features(x)
    assert len(want) == len(stages)
    for stage, w in zip(stages, want, strict=True):
        torch.testing.assert_close(got[stage], w, rtol=0, atol=0)
    shared = {id(p) for p in net.parameters()}
    assert all(id(p) in shared for p in expert.parameters())  # shared, not copied


def test_timm_efficientnet_in_both_roles_of_a_pair():
    torch.manual_seed(0)
    eff = from_feature_net(
        timm.create_model(
            "efficientnet_b0", pretrained=False, features_only=True, out_indices=(1, 2, 3)
        )
    )
    tiny = TinyResNet(3, widths=(8, 16, 112), in_channels=3)  # eff's last tap: 112 channels
    x, y = torch.rand(8, 3, 32, 32), torch.arange(8) % 3
    for main, aux in ((tiny, eff), (eff, tiny)):
        frozen = {k: v.clone() for k, v in aux.state_dict().items()}
        pair = Socialized(main, aux, 3, (3, 32, 32))
        history = train(pair, x, y, epochs=2, batch_size=4)
        assert len(history) == 2 and all(torch.isfinite(torch.tensor(history)))
        assert all(torch.equal(v, aux.state_dict()[k]) for k, v in frozen.items())  # aux frozen


def test_hooked_timm_feature_locations_are_refused():
    net = timm.create_model(
        "efficientnet_b0", pretrained=False, features_only=True, feature_location="expansion"
    )
    with pytest.raises(ValueError, match="bottleneck"):
        from_feature_net(net)


class _SameOrder(torch.utils.data.Sampler):
    """The batches the in-memory path draws: ``randperm(N, generator=seed)`` per epoch."""

    def __init__(self, n, batch_size, seed):
        self.n, self.batch_size, self.g = n, batch_size, torch.Generator().manual_seed(seed)

    def __iter__(self):
        order = torch.randperm(self.n, generator=self.g)
        return iter(order.split(self.batch_size))

    def __len__(self):
        return -(-self.n // self.batch_size)


def test_dataloader_path_equals_the_in_memory_path(experts):
    g = torch.Generator().manual_seed(0)
    x = torch.rand(22, 1, 8, 8, generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (22,), generator=g)
    a, b = experts()
    a2, b2 = copy.deepcopy(a), copy.deepcopy(b)
    kw = {"epochs": 3, "optimizer": "sgd", "lr": 0.05, "schedule": "step", "seed": 4}
    torch.manual_seed(1)  # the new head, transforms and confidence networks
    want = train(Socialized(a, b, 3, (1, 8, 8)), x, y, batch_size=4, **kw)
    loader = DataLoader(TensorDataset(x, y), batch_sampler=_SameOrder(22, 4, seed=4))
    torch.manual_seed(1)
    pair = Socialized(a2, b2, 3, (1, 8, 8))
    got = train(pair, loader, **kw)  # the last batch of 2 is trained, like in memory
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-12, atol=0)
    for p, q in zip(a.parameters(), a2.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-14)
    ordered = DataLoader(TensorDataset(x, y), batch_size=5)
    assert accuracy(pair, ordered) == accuracy(pair, x, y)


def test_augment_sees_every_training_batch_on_the_device(experts):
    a, _ = experts()
    x, y = torch.rand(10, 1, 8, 8, dtype=torch.float64), torch.arange(10) % 3
    seen = []

    def flip(batch):
        seen.append(len(batch))
        return batch.flip(-1)

    train(a, x, y, epochs=2, batch_size=4, augment=flip)
    assert seen == [4, 4, 2, 4, 4, 2]
    with pytest.raises(TypeError, match="augment"):
        train(a, x, y, epochs=1, augment="flip")


def test_step_schedule_is_the_release_recipe():
    assert RELEASE_SGD == {"optimizer": "sgd", "lr": 0.01, "weight_decay": 1e-3, "schedule": "step"}
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.01)
    sched = _schedule(opt, "step", 10_000)  # the release's 10000 iterations
    lrs = []
    for _ in range(10_000):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    # mmcv's step policy: lr x 0.1 at iterations 3000, 6000, 9000
    for it, want in [
        (0, 1e-2),
        (2999, 1e-2),
        (3000, 1e-3),
        (5999, 1e-3),
        (6000, 1e-4),
        (9000, 1e-5),
    ]:
        assert lrs[it] == pytest.approx(want, rel=1e-9), it
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.5)
    sched = _schedule(opt, "constant", 5)
    for _ in range(5):
        opt.step()
        sched.step()
    assert opt.param_groups[0]["lr"] == 0.5


def test_bad_dataloaders_are_refused(experts):
    a, _ = experts()
    x, y = torch.rand(6, 1, 8, 8, dtype=torch.float64), torch.arange(6) % 3
    loader = DataLoader(TensorDataset(x, y), batch_size=3)
    with pytest.raises(TypeError, match="y must be None"):
        train(a, loader, y, epochs=1)
    with pytest.raises(TypeError, match=r"\(images, labels\)"):
        train(a, DataLoader(TensorDataset(x), batch_size=3), epochs=1)
    with pytest.raises(ValueError, match="below the model's 3 classes"):
        train(a, DataLoader(TensorDataset(x, y + 3), batch_size=3), epochs=1)
    with pytest.raises(ValueError, match="schedule"):
        train(a, loader, epochs=1, schedule="linear")
