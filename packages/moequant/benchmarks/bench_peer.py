"""moequant against llm-compressor's GPTQ (``GPTQModifier`` + ``oneshot``) on CPU.

Why llm-compressor: of the maintained GPTQ libraries it is the one that installs and runs
here on a CPU with transformers 5's fused MoE experts (it unfuses them into per-expert
``Linear`` modules); gptqmodel pulls GPU kernels (triton) and targets CUDA.

1. Quantization, same model and calibration: the experiment's cached Mixtral-architecture
   model (``--smoke``: a random one of the same shape), 16 windows x 128 tokens of its
   training text, 4 bits, asymmetric, group 32, routers and ``lm_head`` left in float for
   the peer (it targets ``Linear`` layers; our router is quantized too). Wall time and peak
   memory: llm-compressor GPTQ (reference), moequant GPTQ, moequant MoEQuant (AGQ).
2. Size on disk: fp32 and fp16 ``save_pretrained`` vs moequant's packed 4-bit folder.
3. CPU inference: forward throughput (tokens/s, 4 x 256 tokens) of the packed model
   (dequantize on the fly) vs the fp32 model.

Run: ``icml25 bench moequant`` (or ``--smoke``).
"""

from __future__ import annotations

import copy
import importlib.util
import tempfile
from pathlib import Path

import torch

from icml25_core import BenchReport, compare, make_report
from moequant import quantize
from moequant.io import save_quantized
from moequant.lm import cached_model, tiny_mixtral, train_tokenizer

BITS, GROUP, N_CAL, CAL_LEN = 4, 32, 16, 128


def _folder_mib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def _peer(model_dir: Path, tokenizer, calibration: torch.Tensor):
    from datasets import Dataset
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import GPTQModifier
    from transformers import MixtralForCausalLM

    scheme = {
        "num_bits": BITS,
        "type": "int",
        "symmetric": False,
        "strategy": "group",
        "group_size": GROUP,
    }
    data = Dataset.from_dict(
        {"input_ids": calibration.tolist(), "attention_mask": torch.ones_like(calibration).tolist()}
    )

    def run():
        model = MixtralForCausalLM.from_pretrained(model_dir)
        recipe = GPTQModifier(
            config_groups={"g": {"targets": ["Linear"], "weights": scheme}},
            ignore=["lm_head", "re:.*mlp.gate$"],
        )
        oneshot(
            model=model,
            processor=tokenizer,
            dataset=data,
            recipe=recipe,
            max_seq_length=CAL_LEN,
            num_calibration_samples=len(calibration),
        )

    return run


def run(smoke: bool = False) -> BenchReport:
    if smoke:
        from moequant.lm import stdlib_texts

        texts = stdlib_texts(200_000)[0]
        tokenizer = train_tokenizer(texts, 512)
        model = tiny_mixtral(512, 64, layers=2).eval()
        ids = torch.randint(2, 512, (20_000,), generator=torch.Generator().manual_seed(0))
    else:
        model, tokenizer, ids, _ = cached_model(400, hidden=64)
    g = torch.Generator().manual_seed(0)
    starts = torch.randint(0, len(ids) - CAL_LEN, (N_CAL,), generator=g).tolist()
    calibration = torch.stack([ids[s : s + CAL_LEN] for s in starts])
    notes = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model.save_pretrained(tmp / "fp32")
        tokenizer.save_pretrained(tmp / "fp32")

        def ours(method):
            return lambda: quantize(copy.deepcopy(model), calibration, method, BITS, GROUP)

        candidates = {"moequant GPTQ": ours("gptq"), "moequant MoEQuant (AGQ)": ours("moequant")}
        reference = "moequant GPTQ"
        if importlib.util.find_spec("llmcompressor") is not None:
            candidates = {
                "llm-compressor GPTQ": _peer(tmp / "fp32", tokenizer, calibration),
                **candidates,
            }
            reference = "llm-compressor GPTQ"
        else:
            notes.append("llm-compressor is not installed: peer row skipped (dev group has it)")
        quant = compare(
            candidates,
            reference=reference,
            label=f"quantize {BITS}-bit g{GROUP}, {N_CAL}x{CAL_LEN} tokens",
            repeats=1,
            warmup=0,
            memory=True,
        )

        packed = quantize(copy.deepcopy(model), calibration, "moequant", BITS, GROUP)
        save_quantized(packed, tmp / "packed")
        copy.deepcopy(model).half().save_pretrained(tmp / "fp16")
        sizes = {k: _folder_mib(tmp / k) for k in ("fp32", "fp16", "packed")}
        notes.append(
            f"size on disk: fp32 {sizes['fp32']:.2f} MiB, fp16 {sizes['fp16']:.2f} MiB, "
            f"moequant {BITS}-bit packed {sizes['packed']:.2f} MiB "
            f"({sizes['fp32'] / sizes['packed']:.1f}x smaller than fp32, "
            f"{sizes['fp16'] / sizes['packed']:.1f}x than fp16)"
        )

    batch = ids[: 4 * 256].view(4, 256)

    def forward(m):
        def call():
            with torch.no_grad():
                m(batch, use_cache=False)

        return call

    infer = compare(
        {"fp32": forward(model), f"packed {BITS}-bit": forward(packed)},
        reference="fp32",
        label="forward 4x256 tokens",
        repeats=1 if smoke else 5,
        warmup=1,
        memory=False,
    )
    for name, t in infer.timings.items():
        notes.append(f"CPU tokens/s {name}: {batch.numel() / t.median:,.0f}")
    return make_report(
        "moequant vs llm-compressor GPTQ (CPU)",
        [quant, infer],
        "moequant",
        "llmcompressor",
        "torch",
        notes=notes,
    )


if __name__ == "__main__":
    run().render()
