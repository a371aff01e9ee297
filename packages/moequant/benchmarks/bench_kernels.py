"""Packed-module forward time on CPU: moequant's integer kernels against dense float and
against GPTQModel's CPU path.

1. Forward of one quantized linear layer (4-bit, symmetric, group 32) at decode and
   prefill sizes: ``M`` = 1, 8, 64 rows of a 4096-wide input into 4096 outputs (attention
   projection) and 11008 outputs (a LLaMA-7B MLP). Candidates: dense ``F.linear`` in float32
   (the reference) and bfloat16; moequant's packed layer on its int4 kernel with bfloat16
   inputs (``kernel="auto"``) and with float32 inputs cast by ``kernel="bf16"``, on its
   dequantize path (float32 inputs under ``"auto"``: the 0.3 forward with 0.4's vectorised
   unpacking), and the 8-bit per-row kernel; GPTQModel's ``TorchFusedLinear`` (same codes,
   float32 inputs, which it casts to bfloat16) where ``gptqmodel`` imports (it cannot
   join this workspace's lock: install it apart, e.g. ``pip install --target DIR
   gptqmodel`` and ``PYTHONPATH=DIR``).
2. Bit packing: :func:`moequant.pack` / :func:`moequant.unpack` of a 4096 x 4096 4-bit
   matrix against the bit-by-bit stream of 0.3 (the same bytes), and RTN quantization of a
   hidden-1024 Mixtral-architecture model end to end.

Times are interleaved medians over the same threads (``torch.get_num_threads()``, noted).
Run: ``icml25 bench moequant`` (or ``--smoke``: width 256, one row).
"""

from __future__ import annotations

import importlib.util
import time

import torch
import torch.nn.functional as F
from torch import nn

from icml25_core import BenchReport, compare, make_report
from icml25_core.environment import environment
from moequant import QuantLinear, pack, quantize, rtn, set_kernel, unpack
from moequant.lm import tiny_mixtral

BITS, GROUP = 4, 32


def _pack_bitwise(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """0.3's packing: one int64 per bit of the stream."""
    flat = codes.reshape(-1).to(torch.int64)
    stream = ((flat[:, None] >> torch.arange(bits)) & 1).reshape(-1)
    stream = torch.cat([stream, stream.new_zeros((-stream.numel()) % 8)]).reshape(-1, 8)
    return (stream << torch.arange(8)).sum(1).to(torch.uint8)


def _unpack_bitwise(packed: torch.Tensor, bits: int, n: int) -> torch.Tensor:
    stream = (packed.to(torch.int64)[:, None] >> torch.arange(8)) & 1
    stream = stream.reshape(-1)[: n * bits].reshape(n, bits)
    return (stream << torch.arange(bits)).sum(1)


def _gptqmodel_layer(linear: nn.Linear, qw):
    """GPTQModel's CPU layer holding the same codes, or ``None`` if it does not import."""
    if importlib.util.find_spec("gptqmodel") is None:
        return None
    from gptqmodel.nn_modules.qlinear.torch_fused import TorchFusedLinear

    out_f, in_f = linear.weight.shape
    layer = TorchFusedLinear(
        bits=BITS,
        group_size=GROUP,
        sym=True,
        desc_act=False,
        in_features=in_f,
        out_features=out_f,
        bias=False,
    )
    ref = nn.Linear(in_f, out_f, bias=False)
    ref.weight.data = qw.dequantize()
    layer.pack(ref, qw.scales, qw.zeros, qw.g_idx.int())
    layer.post_init()
    return layer.eval()


def _forward_case(rows: int, cols: int, m: int, repeats: int, notes: list[str]):
    g = torch.Generator().manual_seed(0)
    linear = nn.Linear(cols, rows, bias=False)
    with torch.no_grad():
        linear.weight.normal_(0, cols**-0.5, generator=g)
    qw = rtn(linear.weight.data, BITS, GROUP, sym=True)
    q4 = QuantLinear.from_linear(linear, qw)  # "auto": the kernel for bfloat16 inputs
    q4_cast = set_kernel(QuantLinear.from_linear(linear, qw), "bf16")
    q8 = QuantLinear.from_linear(linear, rtn(linear.weight.data, 8, -1, sym=True))
    w32 = qw.dequantize()
    w16 = w32.bfloat16()
    x = torch.randn(m, cols, generator=g)
    xb = x.bfloat16()

    def call(fn, inp):
        def run():
            with torch.no_grad():
                return fn(inp)

        return run

    candidates = {
        "fp32 dense": call(lambda v: F.linear(v, w32), x),
        "bf16 dense": call(lambda v: F.linear(v, w16), xb),
        "moequant int4, bf16 input": call(q4, xb),
        "moequant int4, fp32 input, kernel='bf16'": call(q4_cast, x),
        "moequant int8 per-row, bf16 input": call(q8, xb),
        "moequant int4, fp32 input (dequantize)": call(q4, x),
    }
    peer = _gptqmodel_layer(linear, qw)
    if peer is not None:
        candidates["gptqmodel TorchFusedLinear"] = call(peer, x)
    with torch.no_grad():  # build the kernel layouts; each result against its own matrix
        ref4, ref8 = F.linear(x, w32), F.linear(x, q8.weight_q.dequantize())
        for name, ref in (
            ("moequant int4, bf16 input", ref4),
            ("moequant int4, fp32 input, kernel='bf16'", ref4),
            ("moequant int8 per-row, bf16 input", ref8),
            ("gptqmodel TorchFusedLinear", ref4),
        ):
            if name in candidates:
                err = (candidates[name]().float() - ref).abs().max() / ref.abs().max()
                notes.append(f"{rows}x{cols}, M={m}: {name} max rel. error {err:.1e} vs fp32")
    return compare(
        candidates,
        reference="fp32 dense",
        label=f"forward {rows}x{cols}, M={m}",
        size=m,
        repeats=repeats,
        warmup=1,
        memory=False,
    )


def _packing(side: int, repeats: int) -> object:
    codes = torch.randint(0, 2**BITS, (side, side), generator=torch.Generator().manual_seed(0))
    packed = pack(codes, BITS)
    assert torch.equal(packed, _pack_bitwise(codes, BITS))
    assert torch.equal(unpack(packed, BITS, (side, side)), codes)
    return compare(
        {
            "0.3 bitwise pack": lambda: _pack_bitwise(codes, BITS),
            "0.3 bitwise unpack": lambda: _unpack_bitwise(packed, BITS, side * side),
            "pack": lambda: pack(codes, BITS),
            "unpack": lambda: unpack(packed, BITS, (side, side)),
        },
        reference="0.3 bitwise pack",
        label=f"pack / unpack {side}x{side} {BITS}-bit",
        repeats=repeats,
        warmup=0,
        memory=True,
    )


def run(smoke: bool = False) -> BenchReport:
    env = environment()
    notes = [
        f"torch threads: {torch.get_num_threads()}; CPU {env.get('cpu')}, kernels "
        f"{env.get('cpu_capability')}, native bfloat16 (AVX512-BF16): {env.get('cpu_bf16')}"
    ]
    if importlib.util.find_spec("gptqmodel") is None:
        notes.append("gptqmodel is not importable: its row is skipped (install it apart)")
    if smoke:
        shapes, ms, repeats = [(256, 256)], [1], 1
    else:
        shapes, ms, repeats = [(4096, 4096), (11008, 4096)], [1, 8, 64], 7
    comparisons = [
        _forward_case(rows, cols, m, repeats, notes) for rows, cols in shapes for m in ms
    ]
    comparisons.append(_packing(256 if smoke else 4096, 1 if smoke else 3))
    if not smoke:
        model = tiny_mixtral(512, 1024, layers=2).eval()
        calibration = torch.randint(2, 512, (2, 16), generator=torch.Generator().manual_seed(0))
        start = time.perf_counter()
        quantize(model, calibration, "rtn", BITS, GROUP)
        notes.append(
            f"RTN {BITS}-bit g{GROUP} of a hidden-1024 Mixtral-architecture model "
            f"(2 layers, 8 experts): {time.perf_counter() - start:.1f} s"
        )
    return make_report(
        "moequant packed forward (CPU integer kernels)",
        comparisons,
        "moequant",
        "torch",
        "gptqmodel",
        notes=notes,
    )


if __name__ == "__main__":
    run().render()
