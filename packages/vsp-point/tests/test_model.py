"""The adapted model: oracles of the frozen baseline, invariances, what is trained."""

import pytest
import torch

from vsp_point import (
    DynamicAdapter,
    HybridAttentionAdapter,
    PointAdapterModel,
    SemanticPrompter,
    attach,
    depth_maps,
    layer_map,
)

C = 32


def _frozen_features(model3d, points):
    out = model3d(points)
    return torch.cat([out[:, 0], out[:, 1:].max(dim=1).values], dim=-1)


@pytest.mark.parametrize(
    ("adapter", "options"),
    [("dapt", {}), ("vsp", {}), ("vsp", {"attention": False}), ("vsp", {"semantic": False})],
)
def test_zero_initialised_up_projections_give_the_frozen_backbone(
    model3d, vit, clouds, adapter, options
):
    x = clouds[0]
    model = attach(
        model3d,
        vit(),
        num_classes=3,
        adapter=adapter,
        ssf_init="identity",
        internal_prompt=False,
        **options,
    ).eval()
    with torch.no_grad():
        got = model.features(x)[:, : 2 * C]
        torch.testing.assert_close(got, _frozen_features(model3d, x), rtol=1e-5, atol=1e-5)


def test_official_ssf_init_and_internal_prompts_move_off_the_baseline(model3d, clouds):
    # DAPT's tfts start at N(1, .02) and its internal prompt is a new token: not the frozen model
    model = attach(model3d, num_classes=3, adapter="dapt").eval()
    with torch.no_grad():
        got = model.features(clouds[0])
    assert got.shape[1] == 3 * C
    assert not torch.allclose(
        got[:, [*range(C), *range(2 * C, 3 * C)]], _frozen_features(model3d, clouds[0])
    )


@pytest.mark.parametrize("adapter", ["dapt", "vsp"])
def test_blocks_are_equivariant_to_patch_token_order(model3d, vit, clouds, adapter):
    model = attach(model3d, vit(), num_classes=3, adapter=adapter).eval()
    for p in model.adapters.parameters():  # leave the zero init: make the adapters act
        torch.nn.init.normal_(p, std=0.2)
    with torch.no_grad():
        x, pos, prompts = model.embed(clouds[0])
        perm = torch.cat([torch.zeros(1, dtype=torch.long), 1 + torch.randperm(x.shape[1] - 1)])
        out, n = model.blocks(x, pos, prompts)
        out_p, _ = model.blocks(x[:, perm], pos[:, perm], prompts)
    g = x.shape[1] - 1
    torch.testing.assert_close(out_p[:, : 1 + n], out[:, : 1 + n], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(
        out_p[:, 1 + n :], out[:, 1 + n :][:, perm[1:] - 1], rtol=1e-5, atol=1e-5
    )
    assert out.shape[1] == 1 + n + g


def test_the_semantic_prompt_does_not_depend_on_view_order(model3d, vit, clouds):
    prompter = SemanticPrompter(vit(), depth3d=2, prompt_dim=C)
    maps = depth_maps(clouds[0], prompter.image_size)
    with torch.no_grad():
        a = prompter.class_tokens(maps)
        b = prompter.class_tokens(maps[:, [2, 0, 1]])
    torch.testing.assert_close(a, b)
    assert a.shape == (len(maps), 2, 24)


def test_layer_map_spreads_3d_layers_over_2d_layers():
    assert layer_map(12, 12) == list(range(12))
    assert layer_map(4, 2) == [0, 0, 1, 1]
    assert layer_map(2, 4) == [1, 3]


def test_adapter_parameter_counts_follow_the_ranks():
    c, r, s, m, p = 40, 12, 18, 16, 24
    dyn = 2 * c + (c + 1) + (c * r + r) + (r * c + c)
    assert sum(t.numel() for t in DynamicAdapter(c, r).parameters()) == dyn
    haa = HybridAttentionAdapter(c, p, rank=r, qk_rank=s, mod_rank=m)
    mod = p * m + m + m * c + c
    assert sum(t.numel() for t in haa.parameters()) == dyn + 2 * c * s + 2 * mod
    no_attn = HybridAttentionAdapter(c, p, rank=r, attention=False, mod_rank=m)
    assert sum(t.numel() for t in no_attn.parameters()) == dyn + 2 * mod


def test_trainable_total_is_the_closed_form(model3d, vit):
    model = attach(model3d, vit(), num_classes=5, adapter="vsp", rank=8, head_hidden=16)
    counts = model.trainable_parameters()
    c, hidden, layers, r = C, 4 * C, 2, 8
    ssf = 2 * (c + 3 * c + c + c + hidden + c) * layers + 2 * 2 * c  # blocks, tokens, final
    prompts = 2 * c * layers
    haa = layers * (
        (2 * c + c + 1 + c * r + r + r * c + c) + 2 * c * 18 + 2 * (c * 16 + 16 + 16 * c + c)
    )
    mlp = 24 * 128 + 128 + 128 * c + c
    head = (4 * c * 16 + 16) + 2 * 16 + (16 * 16 + 16) + 2 * 16 + (16 * 5 + 5)
    assert counts["total"] == 2 * c + ssf + prompts + haa + mlp + head
    assert counts["adapters"] == haa and counts["prompter"] == mlp


def test_frozen_parameters_get_no_gradient(model3d, vit, clouds):
    model = attach(model3d, vit(), num_classes=3, adapter="vsp")
    model.train()
    model(clouds[0]).logsumexp(-1).sum().backward()
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    assert frozen and all(p.grad is None for n, p in model.named_parameters() if n in frozen)
    tuned = [p for p in model.parameters() if p.requires_grad]
    assert all(p.grad is not None for p in tuned)
    assert not model.backbone.training and not model.prompter.vision_model.training
    assert all(not p.requires_grad for p in model3d.parameters())  # the user's copy too


@pytest.mark.parametrize("kind", ["vit", "clip", "dinov2"])
def test_transformers_2d_models_plug_in(model3d, vit, clouds, kind):
    model = attach(model3d, vit(kind, layers=3), num_classes=3).eval()
    with torch.no_grad():
        logits = model(clouds[0])
    assert logits.shape == (len(clouds[0]), 3) and torch.isfinite(logits).all()
    assert model.prompter.layers == [1, 2]


def test_position_embedding_can_be_tuned(model3d, vit, clouds):
    model = attach(model3d, vit("clip"), num_classes=3, tune_position_embedding=True)
    model.train()
    model(clouds[0]).sum().backward()
    counts = model.trainable_parameters()
    assert counts["2-D position embedding"] == (4 + 1) * 24
    grads = {
        n: p.grad for n, p in model.prompter.vision_model.named_parameters() if p.requires_grad
    }
    # one tensor (named vision_model.embeddings... in transformers 5.0, embeddings... later)
    assert len(grads) == 1
    name, grad = next(iter(grads.items()))
    assert name.endswith("embeddings.position_embedding.weight") and grad is not None


def test_adapter_checkpoints_round_trip_and_refuse_damage(model3d, vit, clouds, tmp_path):
    model = attach(model3d, vit(), num_classes=3).eval()
    for p in model.adapters.parameters():
        torch.nn.init.normal_(p, std=0.1)
    folder = model.save_adapter(tmp_path / "a")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        model.save_adapter(folder)
    loaded = PointAdapterModel.load_adapter(folder, model3d, vit()).eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(clouds[0]), model(clouds[0]), rtol=0, atol=0)
    weights = folder / "adapter.safetensors"
    from safetensors.torch import load_file, save_file

    state = load_file(str(weights))
    key = next(k for k, v in state.items() if v.ndim == 2)
    wrong = dict(state, **{key: torch.zeros(*state[key].shape, 2)})
    save_file(wrong, str(weights))
    with pytest.raises(
        ValueError, match=rf"adapter\.safetensors holds tensors of the wrong shape.*{key}"
    ):
        PointAdapterModel.load_adapter(folder, model3d, vit())
    state[key][0, 0] = float("nan")
    save_file(state, str(weights))
    with pytest.raises(
        ValueError, match=rf"adapter\.safetensors holds NaN or infinite weights in {key}"
    ):
        PointAdapterModel.load_adapter(folder, model3d, vit())
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(ValueError, match=r"adapter\.safetensors"):
        PointAdapterModel.load_adapter(folder, model3d, vit())


def test_bad_settings_are_refused(model3d, vit):
    with pytest.raises(ValueError, match="adapter"):
        attach(model3d, num_classes=3, adapter="lora")
    with pytest.raises(ValueError, match="model2d"):
        attach(model3d, num_classes=3, adapter="vsp")
    with pytest.raises(TypeError, match="unknown options"):
        attach(model3d, vit(), num_classes=3, rnak=4)
    with pytest.raises(ValueError, match="num_classes"):
        attach(model3d, vit(), num_classes=1)
    with pytest.raises(TypeError, match="model2d"):
        attach(model3d, torch.nn.Linear(3, 3), num_classes=3)
    with pytest.raises(TypeError, match="PointTransformer"):
        attach(torch.nn.Linear(3, 3), num_classes=3, adapter="linear")
