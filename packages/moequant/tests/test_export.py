"""Exports: transformers loads the compressed-tensors checkpoint with the same logits;
GPTQModel loads the GPTQ checkpoint with the same weights."""

import importlib.util
import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import MixtralConfig, MixtralForCausalLM

import moequant
from moequant.export import export, pack_gptq, quantized_state
from moequant.io import load_quantized

from .conftest import BUILD, COMMON, mixtral

HERE = Path(__file__).resolve().parent / "gptq"


def _quantized(arch, sym=True, **kwargs):
    calibration = torch.randint(2, 96, (8, 24), generator=torch.Generator().manual_seed(0))
    return moequant.quantize(
        BUILD[arch](), calibration, method="rtn", bits=4, group_size=16, sym=sym, **kwargs
    )


@pytest.mark.parametrize("arch", ["mixtral", "qwen2_moe", "qwen3_moe"])
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
    # measured 1.0e-7 (Mixtral), 1.2e-7 (Qwen2-MoE), 1.3e-7 (Qwen3-MoE): summation order
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


# --- GPTQ -------------------------------------------------------------------------------


def _reference_module():
    """``gptq/make_reference.py``: the cases, the prompt and the GPTQModel check."""
    spec = importlib.util.spec_from_file_location("make_reference", HERE / "make_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REFERENCE = json.loads((HERE / "reference.json").read_text())
#: GPTQModel's CPU kernels: TorchFused casts float32 activations to bfloat16 (measured
#: max |logit diff| 1.8e-3); the plain torch kernel computes in float16 (4.9e-4, 4.7e-4)
LOGIT_TOL = {"float32": 1e-2, "float16": 5e-3}


@pytest.mark.parametrize("case", sorted(REFERENCE))
def test_gptq_export_is_the_checkpoint_gptqmodel_loaded(case, tmp_path):
    """The fixture model exported today is, tensor for tensor and byte for byte, the export
    GPTQModel 7.7 loaded when the reference was made (every dequantized matrix equal to
    moequant's there); its recorded logits agree with moequant's packed model."""
    ref, make = REFERENCE[case], _reference_module()
    q = load_quantized(HERE / case)
    folder = export(q, tmp_path / "gptq", format="gptq")
    assert make.tensor_digests(folder) == ref["tensors"]
    quant = json.loads((folder / "config.json").read_text())["quantization_config"]
    assert json.loads((folder / "quantize_config.json").read_text()) == quant
    assert quant["quant_method"] == "gptq" and quant["checkpoint_format"] == "gptq"
    assert (quant["bits"], quant["group_size"]) == (ref["bits"], ref["group_size"])
    assert (quant["desc_act"], quant["sym"]) == (ref["act_order"], True)
    with torch.no_grad():
        ours = q(make.prompt()).logits
    theirs = torch.from_numpy(np.load(HERE / "reference.npz")[case])
    tol = LOGIT_TOL[ref["dtype"]]
    torch.testing.assert_close(theirs, ours, atol=tol, rtol=0)
    top2 = ours.topk(2, dim=-1).values
    clear = (top2[..., 0] - top2[..., 1]) > 2 * tol  # positions no kernel rounding can flip
    assert clear.any()
    assert torch.equal(theirs.argmax(-1)[clear], ours.argmax(-1)[clear])


def _unpack_gptq_rows(packed, bits):
    """GPTQ's documented unpacking for 2, 4, 8 bits: value ``w pf + j`` of a column is
    ``(qweight[w] >> (b j)) & (2^b - 1)``, ``pf = 32 / b``."""
    pf = 32 // bits
    shifts = torch.arange(0, 32, bits, dtype=torch.int32)
    values = (packed[:, None, :] >> shifts[None, :, None]) & (2**bits - 1)
    return values.reshape(packed.shape[0] * pf, packed.shape[1])


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_gptq_tensors_decode_to_moequants_weights(bits, tmp_path):
    """The GPTQ v1 reading ``scales[g_idx] (q - (qzeros + 1)[g_idx])`` of the export gives
    moequant's dequantized matrices exactly, act-order ``g_idx`` included."""
    from safetensors.torch import load_file

    calibration = torch.randint(2, 96, (8, 24), generator=torch.Generator().manual_seed(0))
    q = moequant.quantize(
        BUILD["qwen2_moe"](), calibration, method="gptq", bits=bits, group_size=32, act_order=True
    )
    tensors = load_file(str(export(q, tmp_path / "g", format="gptq") / "model.safetensors"))
    floats, matrices = quantized_state(q)
    assert any(not torch.equal(m.g_idx, m.g_idx.sort().values) for m in matrices.values())
    for name, m in matrices.items():
        codes = _unpack_gptq_rows(tensors[f"{name}.qweight"], bits)  # (in, out)
        zeros = _unpack_gptq_rows(tensors[f"{name}.qzeros"].T, bits).T + 1  # (groups, out)
        g = tensors[f"{name}.g_idx"].long()
        weight = tensors[f"{name}.scales"][g] * (codes - zeros[g]).float()
        assert torch.equal(weight.T, m.weight), name
    for key, value in floats.items():
        assert torch.equal(tensors[key], value), key
    assert "model.layers.0.mlp.experts.3.down_proj.qweight" in tensors
    assert "model.layers.0.mlp.shared_expert.up_proj.qweight" in tensors


def _gptq_3bit_words(values):
    """GPTQ's 3-bit packing of 32 values into three words, written out as the original
    packer's loop does it (word 0: values 0-9, then value 10's low two bits; word 1:
    value 10's high bit, values 11-20, value 21's low bit; word 2: value 21's high two
    bits, values 22-31)."""
    words = [0, 0, 0]
    for j in range(10):
        words[0] |= values[j] << (3 * j)
    words[0] |= (values[10] << 30) & 0xFFFFFFFF
    words[1] |= (values[10] >> 2) & 1
    for j in range(10):
        words[1] |= values[11 + j] << (3 * j + 1)
    words[1] |= (values[21] << 31) & 0xFFFFFFFF
    words[2] |= (values[21] >> 1) & 3
    for j in range(10):
        words[2] |= values[22 + j] << (3 * j + 2)
    return [w - 2**32 if w >= 2**31 else w for w in words]


def test_three_bit_packing_is_gptqs_layout():
    values = torch.randint(0, 8, (64, 5), generator=torch.Generator().manual_seed(2))
    packed = pack_gptq(values, 3)
    assert packed.shape == (6, 5) and packed.dtype == torch.int32
    for col in range(5):
        for block in range(2):
            want = _gptq_3bit_words(values[32 * block : 32 * block + 32, col].tolist())
            assert packed[3 * block : 3 * block + 3, col].tolist() == want


def test_gptq_export_loads_in_gptqmodel():
    """Live: the recorded check repeated with the installed GPTQModel, in a process of its
    own (loading a model makes GPTQModel patch that architecture's transformers classes
    for the rest of the process)."""
    if importlib.util.find_spec("gptqmodel") is None:
        pytest.skip(
            "gptqmodel cannot join the workspace lock (it requires protobuf>=7.36.2, flwr "
            "protobuf<7); install it apart as tests/gptq/make_reference.py says"
        )
    run = subprocess.run(
        [sys.executable, str(HERE / "make_reference.py"), "--verify"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]


def test_gptq_export_refuses_what_the_format_cannot_hold(tmp_path):
    calibration = torch.randint(2, 96, (8, 24), generator=torch.Generator().manual_seed(0))
    five = moequant.quantize(mixtral(), calibration, method="rtn", bits=5, group_size=16)
    with pytest.raises(ValueError, match=r"GPTQ format holds \(2, 3, 4, 8\)-bit"):
        export(five, tmp_path / "five", format="gptq")
    model = mixtral()
    with torch.no_grad():  # an all-positive row: its asymmetric zero point is 0
        model.model.layers[0].self_attn.q_proj.weight.abs_()
    asym = moequant.quantize(model, calibration, method="rtn", group_size=16, sym=False)
    with pytest.raises(ValueError, match=r"layers\.0\.self_attn\.q_proj has an asymmetric"):
        export(asym, tmp_path / "asym", format="gptq")
    torch.manual_seed(0)
    narrow = MixtralForCausalLM(MixtralConfig(intermediate_size=48, num_local_experts=4, **COMMON))
    odd = moequant.quantize(narrow.eval(), calibration, method="rtn", bits=3, group_size=16)
    with pytest.raises(ValueError, match=r"experts\.0\.gate_proj has shape \(48, 64\)"):
        export(odd, tmp_path / "odd", format="gptq")  # 3 bits: multiples of 32
    assert not any(tmp_path.iterdir())  # nothing half-written
    with pytest.raises(ValueError, match="format must be one of"):
        export(five, tmp_path / "x", format="gguf")
