"""The 3-D backbone: official checkpoint layout, masked pretraining, persistence."""

import pytest
import torch

from vsp_point import PointMAE, PointTransformer, convert_point_mae_state_dict


def _official_layout(model: PointTransformer) -> dict:
    """What Point-MAE's pretraining script saves: DDP prefix, the encoder under
    MAE_encoder (no class token), the decoder and the reconstruction head beside it."""
    state = {
        f"module.MAE_encoder.{k}": v.clone()
        for k, v in model.state_dict().items()
        if k not in ("cls_token", "cls_pos")
    }
    c = model.config.trans_dim
    state["module.mask_token"] = torch.zeros(1, 1, c)
    state["module.MAE_decoder.blocks.0.norm1.weight"] = torch.ones(c)
    state["module.increase_dim.0.weight"] = torch.zeros(96, c, 1)
    return {"base_model": state, "epoch": 300}


def test_an_official_pretraining_checkpoint_loads_the_same_encoder(model3d, clouds, tmp_path):
    path = tmp_path / "pretrain.pth"
    torch.save(_official_layout(model3d), path)
    loaded = PointTransformer.from_point_mae(path, num_heads=4, num_group=8, group_size=8)
    assert loaded.config == model3d.config
    loaded.cls_token.data, loaded.cls_pos.data = model3d.cls_token.data, model3d.cls_pos.data
    with torch.no_grad():
        torch.testing.assert_close(loaded.eval()(clouds[0]), model3d(clouds[0]), rtol=0, atol=0)


def test_checkpoints_that_are_not_point_mae_are_refused(model3d, tmp_path):
    with pytest.raises(ValueError, match="no Point-MAE encoder"):
        convert_point_mae_state_dict({"model": {"fc.weight": torch.zeros(2, 2)}})
    state = _official_layout(model3d)
    del state["base_model"]["module.MAE_encoder.blocks.blocks.1.mlp.fc2.bias"]
    with pytest.raises(ValueError, match="missing"):
        PointTransformer.from_point_mae(state, num_heads=4)
    state = _official_layout(model3d)
    state["base_model"]["module.MAE_encoder.blocks.blocks.0.mlp.fc2.bias"][0] = float("nan")
    torch.save(state, tmp_path / "nan.pth")
    with pytest.raises(
        ValueError,
        match=r"nan\.pth holds NaN or infinite weights in blocks\.blocks\.0\.mlp\.fc2\.bias",
    ):
        PointTransformer.from_point_mae(tmp_path / "nan.pth", num_heads=4)
    bad = tmp_path / "bad.pth"
    bad.write_bytes(b"garbage")
    with pytest.raises(ValueError, match=r"bad\.pth"):
        PointTransformer.from_point_mae(bad)


def test_a_pickled_object_is_never_executed(tmp_path):
    path = tmp_path / "evil.pth"
    torch.save({"base_model": {"x": torch.nn.Linear(2, 2)}}, path)  # a module: pickled code
    with pytest.raises(ValueError, match=r"evil\.pth"):
        convert_point_mae_state_dict(path)


def test_masked_pretraining_lowers_the_chamfer_loss(config, clouds):
    from vsp_point import pretrain_point_mae

    _, losses = pretrain_point_mae(clouds[0], config, steps=60, batch_size=12, decoder_depth=1)
    assert sum(losses[-5:]) < 0.9 * sum(losses[:5])  # measured 0.77


def test_mask_ratio_must_leave_patches_on_both_sides(config, clouds):
    with pytest.raises(ValueError, match="mask_ratio"):
        PointMAE(config, mask_ratio=1.0, decoder_num_heads=4)
    mae = PointMAE(config, mask_ratio=0.05, decoder_num_heads=4)  # hides 0 of 8
    with pytest.raises(ValueError, match="hides 0"):
        mae(clouds[0])
