"""moequant against llm-compressor's GPTQ (``GPTQModifier`` + ``oneshot``) on CPU.

Why llm-compressor: of the maintained GPTQ libraries it is the one that installs and runs
here on a CPU with transformers 5's fused MoE experts (it unfuses them into per-expert
``Linear`` modules); gptqmodel pulls GPU kernels (triton) and targets CUDA.

1. Quantization, same model and calibration: the experiment's cached Mixtral-architecture
   model (``--smoke``: a random one of the same shape), 16 windows x 128 tokens of its
   training text, 4 bits, symmetric, group 32, routers and ``lm_head`` left in float for
   the peer (it targets ``Linear`` layers; our router is quantized too). Wall time and peak
   memory: llm-compressor GPTQ (reference), moequant GPTQ, moequant MoEQuant (AGQ).
2. Size on disk: fp32 and fp16 ``save_pretrained`` vs moequant's packed 4-bit folder.
3. CPU inference: forward throughput (tokens/s, 4 x 256 tokens) of the fp32 model, the
   packed model with float32 activations (dequantize on the fly, the default) and with
   ``set_kernel(model, "bf16")`` (the integer kernels), and the bfloat16 model dense and
   packed (integer kernels by default).
4. Serving: both quantized checkpoints loaded back with transformers'
   ``AutoModelForCausalLM.from_pretrained`` (compressed-tensors) and evaluated (perplexity of
   held-out windows): moequant's :func:`moequant.export.export`, and llm-compressor's own
   ``save_pretrained(save_compressed=True)``, as written and with its Mixtral expert names
   mapped (llm-compressor writes ``experts.{e}.gate_proj|up_proj|down_proj`` where
   transformers reads ``w1|w3|w2``; unmapped, the experts load randomly initialised).

Run: ``icml25 bench moequant`` (or ``--smoke``).
"""

from __future__ import annotations

import copy
import importlib.util
import re
import shutil
import tempfile
from pathlib import Path

import torch

from icml25_core import BenchReport, compare, make_report
from moequant import perplexity, quantize, set_kernel
from moequant.export import export
from moequant.io import save_quantized
from moequant.lm import cached_model, tiny_mixtral, train_tokenizer

BITS, GROUP, N_CAL, CAL_LEN, EVAL_LEN = 4, 32, 16, 128, 128


def _folder_mib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


EXPERT_NAMES = {"gate_proj": "w1", "up_proj": "w3", "down_proj": "w2"}
_EXPERT_KEY = re.compile(
    r"^(.*\.(?:block_sparse_moe|mlp)\.experts\.\d+)\.(gate_proj|up_proj|down_proj)\.(.*)$"
)


def map_mixtral_expert_names(folder: Path) -> int:
    """Rename llm-compressor's Mixtral expert tensors to the names transformers reads;
    returns how many were renamed."""
    from safetensors.torch import load_file, save_file

    renamed = 0
    for file in sorted(folder.glob("*.safetensors")):
        state = load_file(str(file))
        out = {}
        for key, value in state.items():
            m = _EXPERT_KEY.match(key)
            if m:
                key = f"{m[1]}.{EXPERT_NAMES[m[2]]}.{m[3]}"
                renamed += 1
            out[key] = value
        save_file(out, str(file), metadata={"format": "pt"})
    return renamed


def _peer(model_dir: Path, tokenizer, calibration: torch.Tensor, out_dir: Path):
    from datasets import Dataset
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import GPTQModifier
    from transformers import MixtralForCausalLM

    scheme = {
        "num_bits": BITS,
        "type": "int",
        "symmetric": True,
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
        shutil.rmtree(out_dir, ignore_errors=True)
        model.save_pretrained(out_dir, save_compressed=True)

    return run


def _serving(model, packed, tmp: Path, held_out: torch.Tensor) -> list[str]:
    """Perplexity of the checkpoints as transformers loads them back (item 4)."""
    from transformers import AutoModelForCausalLM

    def ppl(m) -> float:
        return perplexity(m, held_out, EVAL_LEN)

    export(packed, tmp / "export")
    rows = {
        "fp32": ppl(model),
        "moequant packed (in memory)": ppl(packed),
        "moequant export, loaded by transformers": ppl(
            AutoModelForCausalLM.from_pretrained(tmp / "export", device_map="cpu")
        ),
    }
    if (tmp / "peer").is_dir():
        load = AutoModelForCausalLM.from_pretrained
        rows["llm-compressor artefact as written"] = ppl(load(tmp / "peer", device_map="cpu"))
        n = map_mixtral_expert_names(tmp / "peer")
        rows[f"llm-compressor artefact, {n} expert tensors renamed"] = ppl(
            load(tmp / "peer", device_map="cpu")
        )
    return [f"held-out perplexity, {name}: {value:.3f}" for name, value in rows.items()]


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
                "llm-compressor GPTQ": _peer(tmp / "fp32", tokenizer, calibration, tmp / "peer"),
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
        notes.extend(_serving(model, packed, tmp, ids[-(8 * EVAL_LEN) :]))
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
        {
            "fp32": forward(model),
            f"packed {BITS}-bit, fp32 (dequantize)": forward(packed),
            f"packed {BITS}-bit, fp32, kernel='bf16'": forward(
                set_kernel(copy.deepcopy(packed), "bf16")
            ),
            "bf16 dense": forward(copy.deepcopy(model).bfloat16()),
            f"packed {BITS}-bit, bf16 (kernel)": forward(copy.deepcopy(packed).bfloat16()),
        },
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
