"""Layer-by-layer post-training quantization of a transformers MoE causal LM.

Only one decoder layer's calibration activations are held at a time. Inside a layer, in
order: attention projections (q, k, v together, then o), dense MLP or shared-expert linear
layers, the router, then each expert's ``gate_up`` and ``down`` slices. The router is
quantized first and the routing recomputed with it, so every expert is calibrated on the
tokens the quantized model will actually send it. The layer's output, computed with its
quantized weights, is the next layer's input.

Methods
-------
``"rtn"``
    Round-to-nearest, no calibration data needed beyond its shape.
``"gptq"``
    GPTQ; an expert's Hessian uses the tokens routed to it, unweighted.
``"moequant"`` (AGQ)
    GPTQ with affinity-weighted Hessians ``H_e = (2/N) sum_{t->e} c_{t,e}^p x_t x_t^T``
    (``c`` the routing weight, ``p = affinity_power``, 1 in the paper); shared-expert
    layers weight tokens by the sigmoid of the shared gate, to the same power. Use an EBSS
    calibration set (:func:`moequant.ebss`) for the full method.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from icml25_core import track

from .adapters import MoEAdapter, adapter_for, get, moe_block
from .gptq_solver import Hessian, gptq, reconstruction_error
from .modules import PackedWeight, QuantExperts, QuantLinear, QuantRouter
from .quantizer import QuantizedWeight, check_bits, check_clip, check_group_size, rtn
from .token_ids import check_token_ids

METHODS = ("moequant", "gptq", "rtn")


@dataclass
class QuantConfig:
    """Everything needed to rebuild the packed modules (saved as ``quant_config.json``)."""

    method: str
    bits: int
    group_size: int
    sym: bool
    act_order: bool
    damp: float
    affinity_power: float
    modules: dict[str, str] = field(default_factory=dict)  # name -> linear|router|experts
    clip: str = "minmax"  # absent from configs saved before 0.5

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class _Stop(Exception):
    pass


def _calibration_tensor(calibration) -> torch.Tensor:
    if isinstance(calibration, (list, tuple)):
        if not calibration:
            raise ValueError("calibration is empty: pass at least one sequence of token ids")
        lengths = {len(c) for c in calibration}
        if len(lengths) != 1:
            raise ValueError(f"calibration sequences must share one length, got {sorted(lengths)}")
        calibration = torch.stack([torch.as_tensor(c) for c in calibration])
    if not isinstance(calibration, torch.Tensor) or calibration.ndim != 2:
        raise ValueError("calibration must be a (n_samples, seq_len) tensor of token ids")
    if calibration.numel() == 0:
        raise ValueError("calibration is empty: pass at least one sequence of token ids")
    if calibration.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"calibration must hold integer token ids, got {calibration.dtype}")
    return calibration.long()


def _layer_inputs(model, layers, calibration, batch_size):
    """Hidden states entering layer 0, with the call's other arguments, per batch."""
    captured = []

    def hook(module, args, kwargs):
        captured.append((args, kwargs))
        raise _Stop

    handle = layers[0].register_forward_pre_hook(hook, with_kwargs=True)
    device = next(model.parameters()).device
    try:
        for i in range(0, len(calibration), batch_size):
            with contextlib.suppress(_Stop):
                model(calibration[i : i + batch_size].to(device), use_cache=False)
    finally:
        handle.remove()
    inputs = []
    for args, kwargs in captured:
        kwargs = dict(kwargs)
        hidden = args[0] if args else kwargs.pop("hidden_states")
        inputs.append((hidden, args[1:], kwargs))
    return inputs


def _run_layer(layer, inputs):
    outs = []
    for hidden, args, kwargs in inputs:
        out = layer(hidden, *args, **kwargs)
        outs.append(out[0] if isinstance(out, tuple) else out)
    return outs


def _collect(layer, inputs, modules: dict[str, nn.Module], weight_fn=None):
    """Hessians of the inputs of ``modules`` over one pass of the layer: token-weighted by
    ``weight_fn(module, x)`` when given, and plain (the second dict, empty without
    ``weight_fn``) for the unweighted reconstruction error."""
    hs = {n: Hessian(m.in_features, m.weight.device) for n, m in modules.items()}
    plain = (
        {n: Hessian(m.in_features, m.weight.device) for n, m in modules.items()}
        if weight_fn
        else {}
    )
    handles = []
    for name, module in modules.items():

        def hook(mod, args, name=name):
            x = args[0]
            hs[name].add(x, None if weight_fn is None else weight_fn(mod, x))
            if weight_fn is not None:
                plain[name].add(x)

        handles.append(module.register_forward_pre_hook(hook))
    try:
        _run_layer(layer, inputs)
    finally:
        for h in handles:
            h.remove()
    return hs, plain


class _Quantizer:
    def __init__(self, cfg: QuantConfig, blocksize: int):
        self.cfg, self.blocksize = cfg, blocksize
        self.errors: dict[str, dict[str, float]] = {}

    def __call__(
        self, name: str, w: torch.Tensor, H: Hessian | None, H_plain=None
    ) -> QuantizedWeight:
        cfg = self.cfg
        if cfg.method == "rtn" or H is None or H.n == 0:
            qw = rtn(w, cfg.bits, cfg.group_size, cfg.sym, cfg.clip)
        else:
            qw = gptq(
                w,
                H.H,
                cfg.bits,
                cfg.group_size,
                cfg.sym,
                cfg.act_order,
                self.blocksize,
                cfg.damp,
                cfg.clip,
            )
        if H is not None and H.n:
            deq = qw.dequantize()
            err = {"error": reconstruction_error(w, deq, (H_plain or H).H)}
            if H_plain is not None:
                err["weighted_error"] = reconstruction_error(w, deq, H.H)
            self.errors[name] = err
        return qw


def _quantize_linears(layer, inputs, modules, quant, prefix, weight_fn=None):
    """GPTQ/RTN on a set of linear layers that read the same pass; weights written back."""
    hs, plain = _collect(layer, inputs, modules, weight_fn)
    out = {}
    for name, module in modules.items():
        qw = quant(f"{prefix}.{name}", module.weight.data, hs[name], plain.get(name))
        module.weight.data.copy_(qw.dequantize().to(module.weight.dtype))
        out[name] = qw
    return out


def _block_input(layer, inputs, block):
    xs = []

    def hook(mod, args):
        xs.append(args[0].reshape(-1, args[0].shape[-1]))

    handle = block.register_forward_pre_hook(hook)
    try:
        _run_layer(layer, inputs)
    finally:
        handle.remove()
    return torch.cat(xs)


def _quantize_moe(
    layer, inputs, block, adapter: MoEAdapter, config, quant, prefix, agq: bool, power: float
):
    """Router, shared expert, experts of one MoE block; returns the packed replacements."""
    cfg = quant.cfg
    packed: dict[str, nn.Module] = {}
    x = _block_input(layer, inputs, block)
    router = get(block, adapter.router)
    h = Hessian(x.shape[1], x.device)
    h.add(x)
    qr = quant(f"{prefix}.{adapter.router}", router.weight.data, h)
    router.weight.data.copy_(qr.dequantize().to(router.weight.dtype))
    route = functools.partial(adapter.route, config)
    qrouter = QuantRouter(
        router.weight.shape[0], router.weight.shape[1], qr.scales.shape[1], cfg.bits, route
    )
    qrouter.weight_q = PackedWeight.from_quantized(qr)
    packed[adapter.router] = qrouter.to(x.device)

    if adapter.shared_expert is not None:
        shared, gate = get(block, adapter.shared_expert), get(block, adapter.shared_gate)
        current = {}  # the block input of the pass in flight: the shared gate reads it
        handle = block.register_forward_pre_hook(lambda mod, args: current.update(x=args[0]))
        weight_fn = (lambda mod, xin: torch.sigmoid(gate(current["x"])) ** power) if agq else None
        linears = {n: m for n, m in shared.named_modules() if isinstance(m, nn.Linear)}
        try:
            for group in _sequential_groups(linears):
                sub = f"{prefix}.{adapter.shared_expert}"
                for n, qw in _quantize_linears(layer, inputs, group, quant, sub, weight_fn).items():
                    packed[f"{adapter.shared_expert}.{n}"] = QuantLinear.from_linear(group[n], qw)
        finally:
            handle.remove()

    experts = get(block, adapter.experts)
    logits = F.linear(x, router.weight)
    weights, indices = adapter.route(config, logits)
    n_exp = experts.gate_up_proj.shape[0]
    gate_up, down = [], []
    counts = []

    def slice_(param: torch.Tensor, e: int, xin: torch.Tensor, c, name: str) -> QuantizedWeight:
        """Quantize expert ``e``'s slice of a fused parameter for inputs ``xin``; written back."""
        h = Hessian(xin.shape[1], x.device)
        h.add(xin, c)
        plain = None
        if agq:
            plain = Hessian(xin.shape[1], x.device)
            plain.add(xin)
        qw = quant(f"{prefix}.{adapter.experts}.{e}.{name}", param.data[e], h, plain)
        param.data[e] = qw.dequantize().to(param.dtype)
        return qw

    for e in range(n_exp):
        tok, pos = torch.where(indices == e)
        c = weights[tok, pos].float() ** power if agq else None
        counts.append(len(tok))
        xe = x[tok]
        gate_up.append(slice_(experts.gate_up_proj, e, xe, c, "gate_up_proj"))
        g, u = F.linear(xe, experts.gate_up_proj.data[e]).chunk(2, dim=-1)
        down.append(slice_(experts.down_proj, e, experts.act_fn(g) * u, c, "down_proj"))
    if cfg.method != "rtn" and min(counts) == 0:
        warnings.warn(
            f"{prefix}: experts {[e for e, n in enumerate(counts) if n == 0]} received no "
            "calibration token; they were rounded to nearest instead",
            stacklevel=4,
        )
    qe = QuantExperts(
        n_exp,
        experts.gate_up_proj.shape[2],
        experts.down_proj.shape[2],
        (gate_up[0].scales.shape[1], down[0].scales.shape[1]),
        cfg.bits,
        experts.act_fn,
    )
    qe.gate_up_q = PackedWeight.from_quantized(gate_up)
    qe.down_q = PackedWeight.from_quantized(down)
    packed[adapter.experts] = qe.to(x.device)
    return packed, counts


def _set(root: nn.Module, path: str, module: nn.Module) -> None:
    parent, _, name = path.rpartition(".")
    setattr(get(root, parent) if parent else root, name, module)


@torch.no_grad()
def quantize(
    model: nn.Module,
    calibration,
    method: str = "moequant",
    bits: int = 4,
    group_size: int = 128,
    sym: bool = True,
    act_order: bool = False,
    damp: float = 0.01,
    blocksize: int = 128,
    affinity_power: float = 1.0,
    clip: str = "minmax",
    batch_size: int = 8,
    allow_dense: bool = False,
    show_progress: bool = False,
    log: bool = False,
):
    """Quantize ``model`` in place and return it with packed-integer modules.

    Parameters
    ----------
    model : transformers causal LM (Mixtral, Qwen2-MoE, Qwen3-MoE or a registered adapter)
    calibration : LongTensor (n_samples, seq_len) or list of equal-length id sequences
        Calibration text, e.g. from :func:`moequant.ebss`.
    method : {"moequant", "gptq", "rtn"}
    bits : int in [2, 8]
    group_size : int
        Columns per quantization group (must divide every quantized layer's input width),
        or -1 for one group per output row.
    sym, act_order, damp, blocksize
        GPTQ options (symmetric grid, columns by decreasing Hessian diagonal, relative
        damping, lazy-update block). Symmetric by default (since 0.3.0): asymmetric MoE
        checkpoints do not load in transformers (see :func:`moequant.export.export`).
    affinity_power : float
        ``p`` in ``c^p`` (AGQ); 1 is the paper's formula, 2 scales the inputs by ``c``.
    clip : {"minmax", "mse"}
        Grids from each group's min-max range, or the MSE search of the clipping ratio
        (the official code's ``--w_clip``, used for the paper's results).
    batch_size : int
        Calibration sequences per forward pass.
    allow_dense : bool
        Quantize a model without MoE blocks (or of an unknown architecture) with plain
        GPTQ / RTN on its linear layers, with a warning, instead of raising.
    log : bool
        Also return a dict with per-layer reconstruction errors and expert token counts.

    Returns
    -------
    model, or (model, log)
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    check_bits(bits)
    check_clip(clip)
    if any(isinstance(m, (QuantLinear, QuantExperts, QuantRouter)) for m in model.modules()):
        raise ValueError(
            "model is already quantized (it holds moequant's packed modules): quantize the "
            "full-precision model instead"
        )
    try:
        adapter = adapter_for(model)
    except ValueError:
        if not allow_dense:
            raise
        adapter = MoEAdapter()
    try:
        layers = get(model, adapter.layers)
        model.get_input_embeddings()
    except AttributeError as exc:
        raise TypeError(
            "model must be a transformers causal LM with input embeddings and decoder layers "
            f"at model.{adapter.layers}, got {type(model).__name__} ({exc})"
        ) from None
    calibration = check_token_ids(_calibration_tensor(calibration), model, "calibration")
    blocks = [moe_block(adapter, layer) for layer in layers]
    if all(b is None for b in blocks):
        if not allow_dense:
            raise ValueError(
                "model has no MoE block (no router + experts found in any decoder layer); pass "
                "allow_dense=True to quantize it with plain GPTQ"
            )
        warnings.warn(
            "no MoE block found: quantizing the linear layers with plain GPTQ", stacklevel=2
        )
        method = "gptq" if method == "moequant" else method
    for name, module in model.named_modules():
        if name.startswith(adapter.layers) and isinstance(module, nn.Linear):
            check_group_size(group_size, module.in_features)
    for block in blocks:
        if block is not None:
            check_group_size(group_size, get(block, adapter.experts).down_proj.shape[2])

    cfg = QuantConfig(method, bits, group_size, sym, act_order, damp, affinity_power, clip=clip)
    quant = _Quantizer(cfg, blocksize)
    was_training = model.training
    model.eval()
    inputs = _layer_inputs(model, layers, calibration, batch_size)
    expert_counts = {}
    layer_iter = track(range(len(layers)), "quantize") if show_progress else range(len(layers))
    for i in layer_iter:
        layer, block, prefix = layers[i], blocks[i], f"{adapter.layers}.{i}"
        replace: dict[str, nn.Module] = {}
        block_name = adapter.block if block is not None else None
        skip = {id(m) for m in block.modules()} if block is not None else set()
        linears = {
            n: m for n, m in layer.named_modules() if isinstance(m, nn.Linear) and id(m) not in skip
        }
        for group in _sequential_groups(linears):
            qws = _quantize_linears(layer, inputs, group, quant, prefix)
            for n, qw in qws.items():
                replace[n] = QuantLinear.from_linear(group[n], qw)
        if block is not None:
            packed, counts = _quantize_moe(
                layer,
                inputs,
                block,
                adapter,
                model.config,
                quant,
                f"{prefix}.{block_name}",
                method == "moequant",
                affinity_power,
            )
            expert_counts[i] = counts
            replace.update({f"{block_name}.{n}": m for n, m in packed.items()})
        inputs = [(o, a, k) for o, (_, a, k) in zip(_run_layer(layer, inputs), inputs, strict=True)]
        for name, module in replace.items():
            _set(layer, name, module)
            cfg.modules[f"{prefix}.{name}"] = (
                "experts"
                if isinstance(module, QuantExperts)
                else "router"
                if isinstance(module, QuantRouter)
                else "linear"
            )
    model.train(was_training)
    model.quant_config = cfg
    if log:
        return model, {"errors": quant.errors, "expert_counts": expert_counts}
    return model


def _sequential_groups(linears: dict[str, nn.Module]) -> list[dict[str, nn.Module]]:
    """Linear layers in the order their inputs are produced: q/k/v, o, then MLP gate/up, down."""
    order = [("q_proj", "k_proj", "v_proj"), ("o_proj",), ("gate_proj", "up_proj"), ("down_proj",)]
    groups, seen = [], set()
    for suffixes in order:
        group = {n: m for n, m in linears.items() if n.rsplit(".", 1)[-1] in suffixes}
        if group:
            groups.append(group)
            seen |= set(group)
    rest = {n: m for n, m in linears.items() if n not in seen}
    return groups + [{n: m} for n, m in rest.items()]
