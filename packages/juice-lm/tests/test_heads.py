"""Per-head capture and edits: identities on every supported architecture, and equality
with nnsight editing the same head."""

import copy

import pytest
import torch

from juice_lm import (
    ADAPTERS,
    JUNE,
    PH3,
    AttentionHeads,
    HeadAdapter,
    HeadSteering,
    register_adapter,
)

ARCHS = (
    "llama",
    "qwen2",
    "qwen3",
    "mistral",
    "gemma",
    "gemma2",
    "gemma3_text",
    "olmo",
    "olmo2",
    "phi3",
    "gpt_neox",
    "phi",
    "gpt2",
)


def _ids(seed=0, shape=(2, 9)):
    return torch.randint(2, 48, shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("arch", ARCHS)
def test_head_outputs_sum_to_the_projection_output(arch, tiny):
    model = tiny(arch)
    heads = AttentionHeads(model)
    assert heads.num_layers == 2 and heads.num_heads == 4
    with heads.capture() as z, torch.no_grad():
        outs = {}
        hooks = [
            p.register_forward_hook(lambda m, a, o, i=i: outs.__setitem__(i, o))
            for i, p in enumerate(heads.projections)
        ]
        model(_ids())
        for h in hooks:
            h.remove()
    for layer in range(2):
        per_head = heads.head_outputs(layer, z[layer])
        bias = getattr(heads.projections[layer], "bias", None)
        total = per_head.sum(-2) + (0 if bias is None else bias)
        torch.testing.assert_close(total, outs[layer], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("arch", ARCHS)
def test_zero_coefficients_leave_the_forward_bitwise_unchanged(arch, tiny):
    model = tiny(arch)
    heads = AttentionHeads(model)
    ids = _ids(1)
    with torch.no_grad():
        plain = model(ids).logits
        with heads.capture() as clean:
            model(ids)
        zeros = {layer: torch.zeros(4) for layer in range(2)}
        with heads.edit(zeros):
            once = model(ids).logits
        with heads.edit(zeros, source=clean):
            twice = model(ids).logits
    assert torch.equal(once, plain) and torch.equal(twice, plain)
    # the steering classes agree (they pass an explicit mask and positions: same values)
    torch.testing.assert_close(HeadSteering(model, {(0, 1): 0.0}).logits(ids), plain)


@pytest.mark.parametrize("arch", ARCHS)
def test_alpha_minus_one_equals_zeroing_the_heads_weights(arch, tiny):
    model = tiny(arch)
    heads = AttentionHeads(model)
    layer, head, d = 1, 2, heads.head_dim
    ablated = copy.deepcopy(model)
    proj = AttentionHeads(ablated).projections[layer]
    with torch.no_grad():
        if heads.adapter.transposed:  # Conv1D: weight (in, out)
            proj.weight[head * d : (head + 1) * d, :] = 0
        else:
            proj.weight[:, head * d : (head + 1) * d] = 0
    ids = _ids(2)
    with torch.no_grad():
        want = ablated(ids).logits
    torch.testing.assert_close(PH3(model, [(layer, head)]).logits(ids), want, rtol=1e-5, atol=1e-5)


def test_the_edit_equals_nnsight_editing_the_same_head(tiny):
    nnsight = pytest.importorskip("nnsight")
    model = tiny("llama", seed=3)
    layer, head, alpha, d = 1, 2, 3.0, 8
    ids = _ids(3)
    wrapped = nnsight.NNsight(model)
    with torch.no_grad(), wrapped.trace(ids):
        proj = wrapped.model.layers[layer].self_attn.o_proj
        z = proj.input[..., head * d : (head + 1) * d]
        proj.output[:] = proj.output + alpha * (z @ proj.weight[:, head * d : (head + 1) * d].T)
        want = wrapped.output.logits.save()
    got = JUNE(model, ([(layer, head)], []), alpha, 0.0).logits(ids)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_unsupported_architectures_and_bad_heads_are_refused(tiny):
    model = tiny("llama")
    model.config.model_type = "mamba"
    with pytest.raises(ValueError, match=r"no adapter for.*register_adapter"):
        AttentionHeads(model)
    model.config.model_type = "llama"
    heads = AttentionHeads(model)
    with pytest.raises(ValueError, match=r"head \(2, 0\), out of range for 2 layers x 4 heads"):
        heads.check_heads([(2, 0)])
    with pytest.raises(ValueError, match=r"must hold \(layer, head\) pairs"):
        heads.check_heads(["a"])
    with pytest.raises(ValueError, match="must be finite"):
        heads.coefficient_tensors({(0, 0): float("nan")})
    with pytest.raises(ValueError, match="does not have the layout"):
        AttentionHeads(model.model)  # the base model, not the *ForCausalLM
    with pytest.raises(TypeError, match="HeadAdapter"):
        register_adapter("x", ("model.layers", "self_attn.o_proj"))


def test_a_registered_adapter_makes_a_new_model_type_work(tiny):
    model = tiny("llama")
    model.config.model_type = "my-llama"
    try:
        register_adapter("my-llama", HeadAdapter("model.layers", "self_attn.o_proj"))
        assert AttentionHeads(model).num_heads == 4
    finally:
        ADAPTERS.pop("my-llama")


def test_a_captured_input_of_other_tokens_is_refused(tiny):
    model = tiny("llama")
    heads = AttentionHeads(model)
    with heads.capture([0]) as clean, torch.no_grad():
        model(_ids(shape=(1, 5)))
    with (
        pytest.raises(ValueError, match="capture and edit must see the same tokens"),
        heads.edit({0: torch.ones(4)}, source=clean),
        torch.no_grad(),
    ):
        model(_ids(shape=(1, 6)))


def test_every_shipped_adapter_is_tested_here():
    assert set(ADAPTERS) == set(ARCHS)
