"""Bit packing and the integer-kernel compute path of packed modules."""

import copy

import pytest
import torch
from torch import nn

from moequant import QuantLinear, pack, perplexity, quantize, rtn, set_kernel, unpack
from moequant.modules import PackedWeight, dense_weights
from moequant.quantizer import QuantizedWeight, decode, unpack_narrow

from .conftest import mixtral


def _pack_bitwise(codes, bits):
    """The stream bit by bit (the 0.3 implementation): the oracle of the layout."""
    flat = codes.reshape(-1).to(torch.int64)
    stream = ((flat[:, None] >> torch.arange(bits)) & 1).reshape(-1)
    stream = torch.cat([stream, stream.new_zeros((-stream.numel()) % 8)]).reshape(-1, 8)
    return (stream << torch.arange(8)).sum(1).to(torch.uint8)


@pytest.mark.parametrize("bits", range(2, 9))
def test_pack_is_the_bitwise_stream_and_unpack_inverts_it(bits):
    g = torch.Generator().manual_seed(bits)
    for n in (1, 7, 8, 9, 15, 64, 1001):
        codes = torch.randint(0, 2**bits, (n,), generator=g)
        packed = pack(codes, bits)
        assert torch.equal(packed, _pack_bitwise(codes, bits)), n
        assert torch.equal(unpack(packed, bits, (n,)), codes), n
    codes = torch.randint(0, 2**bits, (3, 5, 7), generator=g)
    assert torch.equal(unpack(pack(codes, bits), bits, (3, 5, 7)), codes)


@pytest.mark.parametrize("bits", range(2, 9))
def test_unpack_narrow_is_unpack_in_the_narrowest_dtype(bits):
    codes = torch.randint(0, 2**bits, (5, 37), generator=torch.Generator().manual_seed(bits))
    narrow = unpack_narrow(pack(codes, bits), bits, (5, 37))
    assert narrow.dtype == (torch.uint8 if 8 % bits == 0 else torch.int64)
    assert torch.equal(narrow.long(), codes)


@pytest.mark.parametrize(
    ("bits", "group", "perm"), [(4, 32, False), (3, 16, False), (8, -1, False), (4, 32, True)]
)
def test_dequantize_is_the_per_column_formula_exactly(bits, group, perm):
    """The broadcast over contiguous groups and the gather agree bit for bit with
    ``decode(codes, scales[:, g], zeros[:, g])``."""
    pw = _layer(24, 128, bits, group, sym=False, perm=perm).weight_q
    g = pw.g_idx.long()
    codes = unpack(pw.codes, bits, (24, 128))
    reference = decode(codes, pw.scales[:, g], pw.zeros[:, g])
    assert torch.equal(pw.dequantize(), reference)


def _layer(rows, cols, bits, group_size, sym, seed=0, perm=False):
    torch.manual_seed(seed)
    linear = nn.Linear(cols, rows)
    qw = rtn(linear.weight.data, bits, group_size, sym)
    if perm:  # act-order: groups of non-contiguous columns
        order = torch.randperm(cols)
        qw = QuantizedWeight(qw.codes, qw.scales, qw.zeros, qw.g_idx[order], bits)
    return QuantLinear.from_linear(linear, qw)


CASES = [
    # bits, rows, cols, group, sym, act-order, expected path
    (4, 48, 64, 32, True, False, "int4"),
    (4, 5, 64, 32, False, False, "int4"),  # rows padded to 16 inside the kernel
    (4, 16, 512, 128, False, False, "int4"),
    (4, 16, 256, 256, True, False, "int4"),
    (4, 16, 1024, -1, False, False, "int4"),  # per row: groups of 256 with equal scales
    (4, 16, 96, -1, False, False, "int4"),  # per row of 96 = 3 groups of 32
    (4, 32, 128, 64, False, True, "int4"),  # act-order: permuted input columns
    (8, 7, 64, -1, False, False, "int8"),  # asymmetric: rank-one zero-point correction
    (8, 16, 96, -1, True, False, "int8"),
    (4, 16, 64, 16, True, False, None),  # group 16: no CPU kernel
    (4, 20, 100, -1, True, False, None),
    (8, 16, 64, 32, False, False, None),  # grouped 8-bit: no kernel
    (8, 7, 33, -1, False, False, None),  # bf16 int8 kernel crashes off multiples of 8
    (3, 16, 64, 32, False, False, None),
]


@pytest.mark.parametrize(("bits", "rows", "cols", "group", "sym", "perm", "path"), CASES)
def test_kernel_path_equals_the_dequantize_path(bits, rows, cols, group, sym, perm, path):
    layer = _layer(rows, cols, bits, group, sym, perm=perm)
    x = torch.randn(2, 3, cols, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = set_kernel(copy.deepcopy(layer), "dequantize")(x)
        scale = want.abs().max()
        # "auto": kernels for bfloat16 activations only; float32 keeps the exact path
        assert layer.weight_q._plan(x, None) is None
        assert torch.equal(layer(x), want)
        plan = layer.weight_q._plan(x.bfloat16(), None)
        assert (plan[0] if plan else None) == path
        low = layer(x.bfloat16())
        assert low.dtype == torch.bfloat16
        # bfloat16 activations (8 bits of mantissa): relative error within 2e-2
        assert (low.float() - want).abs().max() <= 2e-2 * scale
        # "bf16": float32 and float16 inputs cast for the kernel, the output cast back
        set_kernel(layer, "bf16")
        for dtype in (torch.float32, torch.float16):
            got = layer(x.to(dtype))
            assert got.dtype == dtype
            assert (got.float() - want).abs().max() <= 2e-2 * scale
            if path is not None:  # the kernel ran: bfloat16 error, not float32's
                assert not torch.allclose(got.float(), want, rtol=1e-6, atol=0)


def test_stacked_experts_and_the_cache_follow_the_weights():
    torch.manual_seed(0)
    model = mixtral()
    q = quantize(model, torch.randint(2, 96, (2, 8)), "rtn", 4, 32)
    experts = q.model.layers[0].mlp.experts.gate_up_q
    x = torch.randn(5, 64).bfloat16()
    with torch.no_grad():
        for e in range(4):
            want = x.float() @ experts.dequantize(e).T
            assert (experts.linear(x, e).float() - want).abs().max() <= 2e-2 * want.abs().max()
        first = experts.linear(x, 0)
        other = copy.deepcopy(experts)
        other.codes[0].copy_(other.codes[1])  # in place: the cache must notice
        other.scales[0].copy_(other.scales[1])
        other.zeros[0].copy_(other.zeros[1])
        experts.load_state_dict(other.state_dict())
        torch.testing.assert_close(experts.linear(x, 0), experts.linear(x, 1))
        assert not torch.equal(experts.linear(x, 0), first)
        before = experts._cache[0][1][1]
        experts.double().float()  # moved: rebuilt
        experts.linear(x, 0)
        assert experts._cache[0][1][1] is not before


def test_a_gradient_takes_the_dequantize_path():
    layer = _layer(16, 64, 4, 32, True)
    x = torch.randn(3, 64, requires_grad=True)
    assert layer.weight_q._plan(x, None) is None
    layer(x).sum().backward()
    torch.testing.assert_close(x.grad, layer.weight_q.dequantize().sum(0).expand(3, -1))


def test_the_packed_model_uses_the_kernels_and_matches_dequantize():
    q = quantize(mixtral(), torch.randint(2, 96, (2, 8)), "rtn", 4, 32)
    ids = torch.randint(2, 96, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        exact = q(ids).logits  # float32 model, "auto": the dequantize path
        assert not any(m._cache for m in q.modules() if hasattr(m, "_cache"))
        fast = set_kernel(q, "bf16")(ids).logits
        plans = [m._cache for m in q.modules() if hasattr(m, "_cache")]
        assert plans and all(plans)  # every packed weight ran a kernel
    assert fast.dtype == torch.float32
    assert (fast - exact).abs().max() <= 3e-2 * exact.abs().max()
    assert (fast.argmax(-1) == exact.argmax(-1)).float().mean() >= 0.9
    with pytest.raises(ValueError, match="kernel"):
        set_kernel(q, "int4")


def test_dense_weights_keep_the_dequantized_matrices_for_the_block_only():
    """Within dense_weights, the float32 path reuses each dequantized matrix (the same
    logits and perplexity, bit for bit), follows an in-place change of the codes, and
    drops the matrices at the end."""
    q = quantize(mixtral(), torch.randint(2, 96, (2, 8)), "rtn", 3, 16)
    ids = torch.randint(2, 96, (2, 12), generator=torch.Generator().manual_seed(0))
    text = torch.randint(2, 96, (200,), generator=torch.Generator().manual_seed(1))
    packed = [m for m in q.modules() if isinstance(m, PackedWeight)]
    with torch.no_grad():
        plain = q(ids).logits
        with dense_weights(q):
            assert torch.equal(q(ids).logits, plain)
            assert all(any(isinstance(k, tuple) for k in m._cache) for m in packed)
            kept = packed[0]._cache[("dense", None, torch.float32)][1]
            assert torch.equal(q(ids).logits, plain)  # served from the kept matrices
            assert packed[0]._cache[("dense", None, torch.float32)][1] is kept
            router = packed[0]
            router.codes.copy_(router.codes.flip(0))  # in place: the matrix is rebuilt
            changed = q(ids).logits
            assert packed[0]._cache[("dense", None, torch.float32)][1] is not kept
        assert not any(m._cache for m in packed)
        assert torch.equal(q(ids).logits, changed)
    with dense_weights(q):
        kept_ppl = perplexity(q, text, seq_len=20)  # nested: the outer block still keeps
        assert all(m.keep_dense and m._cache for m in packed)
    assert perplexity(q, text, seq_len=20) == kept_ppl
    assert not any(m.keep_dense or m._cache for m in packed)
