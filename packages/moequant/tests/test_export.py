"""Export to compressed-tensors: transformers loads the checkpoint and computes the same logits."""

import warnings

import pytest
import torch

import moequant
from moequant.export import export

from .conftest import mixtral, qwen2_moe

BUILD = {"mixtral": mixtral, "qwen2_moe": qwen2_moe}


def _quantized(arch, sym=True, **kwargs):
    calibration = torch.randint(2, 96, (8, 24), generator=torch.Generator().manual_seed(0))
    return moequant.quantize(
        BUILD[arch](), calibration, method="rtn", bits=4, group_size=16, sym=sym, **kwargs
    )


@pytest.mark.parametrize("arch", ["mixtral", "qwen2_moe"])
def test_symmetric_export_loads_in_transformers_with_the_same_logits(arch, tmp_path):
    from transformers import AutoModelForCausalLM

    q = _quantized(arch)
    ids = torch.randint(2, 96, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = q(ids).logits
    export(q, tmp_path / "ct")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "ct", device_map="cpu")
    with torch.no_grad():
        got = loaded(ids).logits
    # measured 1.0e-7 (Mixtral) and 1.2e-7 (Qwen2-MoE): float32 summation order only
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    assert torch.equal(got.argmax(-1), want.argmax(-1))


def test_asymmetric_export_warns_and_act_order_or_plain_models_are_refused(tmp_path):
    with pytest.warns(UserWarning, match="asymmetric MoE checkpoints do not load"):
        export(_quantized("mixtral", sym=False), tmp_path / "asym")
    with pytest.raises(ValueError, match="act_order"):
        export(_quantized("mixtral", act_order=True), tmp_path / "ao")


def test_plain_model_and_occupied_folders_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"quantize it with moequant\.quantize first"):
        export(mixtral(), tmp_path / "plain")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("x")
    q = _quantized("mixtral")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(FileExistsError):
            export(q, tmp_path / "mine")
        with pytest.raises(FileExistsError, match=r"thesis\.tex"):
            export(q, tmp_path / "mine", overwrite=True)


def test_save_quantized_is_atomic_and_load_names_what_is_wrong(tmp_path):
    from moequant.io import QUANT_CONFIG, WEIGHTS, load_quantized, save_quantized

    q = _quantized("mixtral")
    folder = save_quantized(q, tmp_path / "q")
    with pytest.raises(FileExistsError):
        save_quantized(q, folder)  # no silent overwrite
    save_quantized(q, folder, overwrite=True)  # a previous save is replaced
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"notes\.txt"):
        save_quantized(q, tmp_path / "other", overwrite=True)
    (folder / QUANT_CONFIG).write_text("{not json")
    with pytest.raises(ValueError, match=r"quant_config\.json is not a moequant quant config"):
        load_quantized(folder)
    save_quantized(q, folder, overwrite=True)
    (folder / WEIGHTS).write_bytes(b"truncated")
    with pytest.raises(ValueError, match=r"model\.safetensors is not a readable safetensors"):
        load_quantized(folder)
