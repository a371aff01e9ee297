"""DISC's modules against their definitions: zero at init, weights that sum to one,
no gradient to the auxiliary expert or (from the task loss) to the confidence networks,
resampling that follows the real feature maps."""

import math

import pytest
import torch

from disc_coevo import CosineSchedule, Socialized, fusion_weights, stage_transform


def test_zero_init_reproduces_the_main_expert(experts, images):
    a, b = experts()
    x, _ = images
    pair = Socialized(a, b, 3, (1, 8, 8), fusion="none", head=a.head).eval()
    torch.testing.assert_close(pair(x), a(x), rtol=0, atol=0)
    # lambda = 0 does the same after the transforms have moved away from zero
    pair = Socialized(a, b, 3, (1, 8, 8), fusion="none", head=a.head, lam=0.0).eval()
    for p in pair.collaboration.parameters():
        p.data.normal_()
    torch.testing.assert_close(pair(x), a(x), rtol=0, atol=0)


def test_fusion_weights_sum_to_one_and_equal_confidences_split_evenly():
    c = torch.tensor([0.1, 0.5, 0.9, 0.999])
    torch.testing.assert_close(fusion_weights(c, c), torch.full((4, 2), 0.5))
    cm, ca = torch.rand(50), torch.rand(50)
    w = fusion_weights(cm, ca)
    torch.testing.assert_close(w.sum(1), torch.ones(50))
    # the holographic terms sum to one, so the more confident expert gets more weight
    assert ((w[:, 0] > 0.5) == (cm > ca)).all()
    hm = torch.log(ca) / torch.log(cm * ca)
    torch.testing.assert_close(w[:, 0], torch.sigmoid((cm + hm) - (ca + 1 - hm)))


def test_fusion_weights_stay_finite_at_full_confidence():
    w = fusion_weights(torch.ones(3), torch.ones(3))
    assert torch.isfinite(w).all()
    torch.testing.assert_close(w, torch.full((3, 2), 0.5))


def test_no_gradient_reaches_the_aux_expert_and_the_task_loss_spares_the_confidence_nets(
    experts, images
):
    a, b = experts()
    x, y = images
    pair = Socialized(a, b, 3, (1, 8, 8)).train()
    for p in pair.collaboration.parameters():  # a live collaboration path
        p.data.normal_(0, 0.1)
    out = pair.outputs(x)
    torch.nn.functional.cross_entropy(out["logits"], y).backward()
    assert all(p.grad is None for p in b.parameters())
    assert all(p.grad is None for p in pair.confidence_main.parameters())
    assert all(p.grad is None for p in pair.confidence_aux.parameters())
    assert any(
        p.grad is not None and p.grad.abs().sum() > 0 for p in pair.collaboration.parameters()
    )
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in a.parameters())
    pair.zero_grad(set_to_none=True)
    loss, parts = pair.loss(x, y)
    loss.backward()
    assert set(parts) == {"task", "probe", "confidence"}
    assert all(p.grad is None for p in b.parameters())
    assert all(p.grad is not None for p in pair.confidence_main.parameters())


def test_aux_expert_stays_frozen_in_train_mode(experts, images):
    a, b = experts()
    pair = Socialized(a, b, 3, (1, 8, 8)).train()
    stats = {k: v.clone() for k, v in b.state_dict().items()}
    pair(images[0])
    assert not b.training and pair.main.training
    for k, v in b.state_dict().items():
        torch.testing.assert_close(v, stats[k], rtol=0, atol=0)


@pytest.mark.parametrize(
    ("source", "target", "convs"),
    [
        ((8, 8, 8), (8, 8, 8), 1),
        ((8, 4, 4), (4, 8, 8), 1),
        ((4, 8, 8), (8, 2, 2), 2),
        ((4, 8, 8), (8, 3, 3), 2),
    ],
)
def test_transforms_resample_to_the_target_and_start_at_zero(source, target, convs):
    t = stage_transform(source, target).eval()
    n = sum(isinstance(m, torch.nn.Conv2d) for m in t.modules())
    assert n == convs
    out = t(torch.randn(2, *source))
    assert out.shape == (2, *target)
    assert (out == 0).all()


def test_stage_shapes_come_from_the_real_feature_maps(experts):
    a, _ = experts(widths=(4, 8, 8))
    from disc_coevo import TinyResNet

    wide = TinyResNet(2, widths=(6, 12, 8)).double()
    pair = Socialized(a, wide, 3, (1, 8, 8))
    # aux layer2 (12 ch, 4x4) into main layer2 (8 ch, 4x4): a 1x1 conv from 12 to 8
    conv = pair.collaboration.transforms["layer2"]["layer2"][0]
    assert (conv.in_channels, conv.out_channels, conv.kernel_size) == (12, 8, (1, 1))
    # aux layer1 (6 ch, 8x8) into main layer2 (4x4): one stride-2 3x3 conv
    conv = pair.collaboration.transforms["layer2"]["layer1"][0]
    assert (conv.in_channels, conv.stride) == (6, (2, 2))
    assert pair.collaboration.sources == {"layer1": ["layer1"], "layer2": ["layer1", "layer2"]}


def test_cosine_schedule():
    s = CosineSchedule(1.0, 0.0, 100)
    assert s(0) == 1.0 and s(100) == 0.0 and s(1000) == 0.0
    assert s(50) == pytest.approx(0.5)
    assert s(25) == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))
    with pytest.raises(ValueError, match="steps must be >= 1"):
        CosineSchedule(1, 0, 0)


def test_fusion_weights_are_the_releases_wherever_it_is_defined():
    def release(c_m, c_a):  # the release's holographic fusion, written out
        denominator = torch.log(c_m) + torch.log(c_a) + 1e-8
        logits = torch.stack(
            [c_m + torch.log(c_a) / denominator, c_a + torch.log(c_m) / denominator], 1
        )
        return torch.softmax(logits, 1)

    # both near 1: the release's weights (0.77 / 0.23 here), not an even split
    c_m, c_a = torch.tensor([1.0, 0.3, 0.999]), torch.tensor([1 - 6e-8, 0.8, 1.0])
    want = release(c_m, c_a)
    torch.testing.assert_close(fusion_weights(c_m, c_a), want)
    assert float(want[0, 0]) == pytest.approx(0.77, abs=0.01)
    # a confidence of exactly 0: the release gives NaN, here finite weights favouring the other
    assert torch.isnan(release(torch.tensor([0.0]), torch.tensor([0.5]))).all()
    w = fusion_weights(torch.tensor([0.0]), torch.tensor([0.5]))
    assert torch.isfinite(w).all() and float(w[0, 1]) > 0.5
