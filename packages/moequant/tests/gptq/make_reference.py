"""Record what GPTQModel loads from moequant's GPTQ exports (run by hand, with gptqmodel).

gptqmodel cannot join the workspace lock (7.7 requires protobuf>=7.36.2 while flwr, a
workspace member, requires protobuf<7), so it runs from a folder of its own::

    uv pip install --target /tmp/gq --no-deps gptqmodel==7.7.0 pypcre tokenicer logbar \\
        device-smi defuser
    PYTHONPATH=/tmp/gq uv run python packages/moequant/tests/gptq/make_reference.py

For every case it quantizes a tiny random model and saves it with ``save_quantized`` (the
fixture the tests load: no re-quantization, so nothing depends on the machine's BLAS),
exports it with ``format="gptq"``, loads the export with ``GPTQModel.load(device="cpu")``,
asserts that every matrix GPTQModel dequantizes equals moequant's (in GPTQModel's compute
dtype, bit for bit) and that every float tensor arrived unchanged, and records GPTQModel's
logits (``reference.npz``) and the SHA-256 of every exported tensor (``reference.json``).
The tests then check that today's export is byte for byte the one GPTQModel loaded;
``--verify`` repeats the check with the installed GPTQModel and writes nothing.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent

#: name -> how the fixture is quantized and the dtype GPTQModel computes in (its CPU
#: kernels: TorchFused, 4-bit only, casts float32 activations to bfloat16; the plain torch
#: kernel takes float16 / bfloat16 only)
CASES = {
    "qwen2_moe-w4-g32": {
        "arch": "qwen2_moe",
        "method": "rtn",
        "bits": 4,
        "group_size": 32,
        "act_order": False,
        "dtype": "float32",
    },
    "mixtral-w3-g32-actorder": {
        "arch": "mixtral",
        "method": "gptq",
        "bits": 3,
        "group_size": 32,
        "act_order": True,
        "dtype": "float16",
    },
    "qwen3_moe-w8-g32": {
        "arch": "qwen3_moe",
        "method": "rtn",
        "bits": 8,
        "group_size": 32,
        "act_order": False,
        "dtype": "float16",
    },
}


def prompt() -> torch.Tensor:
    """The token ids ``(2, 12)`` whose logits are recorded."""
    return torch.randint(2, 96, (2, 12), generator=torch.Generator().manual_seed(1))


def tokenizer():
    """A word-level tokenizer of the tiny vocabulary (``GPTQModel.load`` requires one)."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {f"t{i}": i for i in range(96)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="t2"))
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="t0", eos_token="t1", unk_token="t2"
    )


def tensor_digests(folder: Path) -> dict[str, str]:
    """SHA-256 of every tensor of ``folder/model.safetensors`` (dtype, shape and bytes)."""
    from safetensors.torch import load_file

    out = {}
    for name, t in sorted(load_file(str(folder / "model.safetensors")).items()):
        h = hashlib.sha256(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.contiguous().view(torch.uint8).numpy().tobytes())
        out[name] = h.hexdigest()
    return out


def gptqmodel_check(model, folder: Path, dtype: torch.dtype) -> tuple[torch.Tensor, dict]:
    """Load ``folder`` (moequant's GPTQ export of ``model``) with GPTQModel; assert that
    its dequantized matrices and float tensors equal moequant's; return its logits on
    :func:`prompt` and a report."""
    from gptqmodel import GPTQModel
    from gptqmodel import __version__ as gptqmodel_version

    from moequant.export import quantized_state

    loaded = GPTQModel.load(str(folder), device="cpu", dtype=dtype).model
    floats, matrices = quantized_state(model)
    modules = dict(loaded.named_modules())
    kernels = set()
    for name, m in matrices.items():
        module = modules[name]
        kernels.add(type(module).__name__)
        want = m.scales.to(dtype)[:, m.g_idx] * (m.codes - m.zeros[:, m.g_idx]).to(dtype)
        got = module.dequantize_weight().T
        assert torch.equal(got, want), f"{name}: GPTQModel dequantizes other weights"
    state = loaded.state_dict()
    for key, value in floats.items():
        assert torch.equal(state[key], value.to(dtype)), f"{key} differs after loading"
    with torch.no_grad():
        logits = loaded(prompt()).logits.float()
    report = {
        "gptqmodel": gptqmodel_version,
        "kernels": sorted(kernels),
        "quantized_modules": len(matrices),
        "dequantized_equal": True,
    }
    return logits, report


def _builders():
    spec = importlib.util.spec_from_file_location("moequant_conftest", HERE.parent / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.BUILD


def main(verify: bool = False) -> None:
    """Write the fixtures and the reference, or (``verify``) check today's exports against
    the recorded ones with the installed GPTQModel, writing nothing."""
    import moequant
    from moequant.export import export
    from moequant.io import load_quantized, save_quantized

    if not verify:
        build = _builders()
        calibration = torch.randint(2, 96, (8, 24), generator=torch.Generator().manual_seed(0))
        for case, spec in CASES.items():
            q = moequant.quantize(
                build[spec["arch"]](),
                calibration,
                method=spec["method"],
                bits=spec["bits"],
                group_size=spec["group_size"],
                act_order=spec["act_order"],
            )
            save_quantized(q, HERE / case, overwrite=True)
    # every model is built before GPTQModel loads anything: loading a Mixtral, say, makes
    # GPTQModel patch transformers' Mixtral classes for the rest of the process
    recorded = json.loads((HERE / "reference.json").read_text()) if verify else {}
    with tempfile.TemporaryDirectory() as tmp:
        models, folders = {}, {}
        for case in CASES:
            models[case] = load_quantized(HERE / case)
            folders[case] = export(
                models[case], Path(tmp) / case, format="gptq", tokenizer=tokenizer()
            )
        reference, logits = {}, {}
        for case, spec in CASES.items():
            q = models[case]
            got, report = gptqmodel_check(q, folders[case], getattr(torch, spec["dtype"]))
            with torch.no_grad():
                want = q(prompt()).logits
            report["max_abs_logit_diff"] = float((got - want).abs().max())
            report["greedy_equal"] = bool(torch.equal(got.argmax(-1), want.argmax(-1)))
            report["tensors"] = tensor_digests(folders[case])
            print(case, {k: v for k, v in report.items() if k != "tensors"})
            reference[case], logits[case] = {**spec, **report}, got.numpy()
            if verify and report["tensors"] != recorded[case]["tensors"]:
                raise SystemExit(f"{case}: the export differs from the recorded one")
    if not verify:
        (HERE / "reference.json").write_text(json.dumps(reference, indent=1) + "\n")
        np.savez_compressed(HERE / "reference.npz", **logits)


if __name__ == "__main__":
    main(verify="--verify" in sys.argv[1:])
