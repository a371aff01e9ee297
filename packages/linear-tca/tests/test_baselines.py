"""The TTA baselines: each against a hand computation or an invariant."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from linear_tca import EATA, SAR, T3A, BNAdapt, SourceOnly, Tent, corrupt, softmax_entropy


@pytest.fixture
def shifted(digits):
    model, x, y = digits
    return model, corrupt(x, "contrast", 2), y


def test_source_only_is_the_model_in_eval_mode(shifted, batches):
    model, x, y = shifted
    out = SourceOnly(model.featurizer, model.head).run(batches(x, y))
    with torch.no_grad():
        torch.testing.assert_close(out.logits, model.eval()(x))


def test_bn_adapt_normalises_with_each_batch(shifted, batches):
    model, x, y = shifted
    out = BNAdapt(model.featurizer, model.head).run(batches(x, y))
    train_mode = copy.deepcopy(model).train()  # batch statistics, same affine parameters
    with torch.no_grad():
        expected = torch.cat([train_mode(xb) for xb, _ in batches(x, y)])
    torch.testing.assert_close(out.logits, expected)


def test_tent_scores_before_updating_and_updates_only_norm_affines(shifted, batches):
    model, x, y = shifted
    tent = Tent(model.featurizer, model.head, lr=1e-2)
    conv_before = tent.featurizer[0].weight.detach().clone()
    bn_before = tent.featurizer[1].weight.detach().clone()
    first = batches(x, y)[0][0]
    _, logits = tent(first)
    bn_logits = BNAdapt(model.featurizer, model.head)(first)[1]
    torch.testing.assert_close(logits, bn_logits)  # the first prediction precedes any update
    assert torch.equal(tent.featurizer[0].weight, conv_before)
    assert not torch.equal(tent.featurizer[1].weight, bn_before)
    # entropy minimisation: the same batch is predicted more confidently after 5 more steps
    for _ in range(5):
        tent(first)
    with torch.no_grad():
        after = tent.head(tent.featurizer(first))
    assert softmax_entropy(after).mean() < softmax_entropy(logits).mean()


def test_baselines_never_touch_the_callers_model(shifted, batches, state, same_state):
    model, x, y = shifted
    before = state(model)
    for cls in (BNAdapt, Tent, T3A, EATA, SAR):
        cls(model.featurizer, model.head).run(batches(x, y))
    assert same_state(before, state(model))


def test_t3a_one_batch_equals_the_hand_formula(shifted):
    model, x, _ = shifted
    first = x[:64]
    t3a = T3A(model.featurizer, model.head, filter_k=None)
    z, logits = t3a(first)
    W = model.head.weight.detach()
    with torch.no_grad():
        supports = torch.cat([W, model.featurizer(first)])
        labels = F.one_hot(model.head(supports).argmax(1), 10).float()
    prototypes = F.normalize(F.normalize(supports, dim=1).T @ labels, dim=0)
    torch.testing.assert_close(logits, z @ prototypes)
    with pytest.raises(TypeError, match="linear head"):
        T3A(model.featurizer, nn.Sequential(nn.ReLU(), model.head))


def test_t3a_keeps_at_most_filter_k_supports_per_class(shifted, batches):
    model, x, y = shifted
    t3a = T3A(model.featurizer, model.head, filter_k=5)
    t3a.run(batches(x, y))
    counts = torch.bincount(t3a.labels.argmax(1), minlength=10)
    assert int(counts.max()) <= 5 and t3a.supports.shape[0] == int(counts.sum())


def test_eata_without_reliable_samples_does_not_update(shifted, batches, state, same_state):
    model, x, y = shifted
    eata = EATA(model.featurizer, model.head, e_margin=1e-9)
    before = state(eata.featurizer)
    eata.run(batches(x, y))
    assert same_state(before, state(eata.featurizer))
    updating = EATA(model.featurizer, model.head, e_margin=10.0, d_margin=2.0)
    updating.run(batches(x, y))
    assert not same_state(before, state(updating.featurizer))


def test_sar_recovers_its_start_when_the_entropy_average_collapses(
    shifted, batches, state, same_state
):
    model, x, y = shifted
    sar = SAR(model.featurizer, model.head, lr=1e-2, reset_constant=1e9)  # always "collapsed"
    before = state(sar.featurizer)
    sar.run(batches(x, y))
    assert same_state(before, state(sar.featurizer))
    moving = SAR(model.featurizer, model.head, lr=1e-2, e_margin=10.0)
    moving.run(batches(x, y))
    assert not same_state(before, state(moving.featurizer))


def test_methods_refuse_models_they_cannot_adapt():
    featurizer, head = nn.Linear(4, 3), nn.Linear(3, 2)
    with pytest.raises(ValueError, match="normalisation layer"):
        Tent(featurizer, head)
    with pytest.raises(TypeError, match=r"torch\.nn\.Module"):
        SourceOnly(lambda t: t, head)
    with pytest.raises(ValueError, match="lr must be > 0"):
        Tent(nn.Sequential(nn.Linear(4, 3), nn.LayerNorm(3)), head, lr=0.0)
