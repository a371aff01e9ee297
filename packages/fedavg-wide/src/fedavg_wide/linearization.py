"""Linearization tools: the first-order Taylor model, the empirical NTK, how far training
moved the weights and the kernel.

Everything works through :func:`torch.func.functional_call` on any ``nn.Module`` whose
output is ``(N, k)``; no Jacobian is materialised for the linearized model (one
``torch.func.jvp`` per forward) and :func:`empirical_ntk` holds at most a chunk of
Jacobian rows at a time.
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.func import functional_call, jvp, vjp, vmap

from icml25_core import check_choice, check_memory, check_scalar, quiet_forward_mode

__all__ = [
    "LinearizedModel",
    "empirical_ntk",
    "linearization_gap",
    "linearize",
    "ntk_change",
    "relative_weight_change",
    "weight_rmse",
]

CHUNK_BYTES = 256 * 2**20
"""Jacobian rows :func:`empirical_ntk` holds at once (bytes)."""


def _frozen_copy(model: nn.Module) -> nn.Module:
    """A copy of ``model`` whose parameters are buffers (moved by ``.to()``, never trained;
    the same on every client, so FedAvg's buffer averaging leaves them exact)."""
    base = copy.deepcopy(model)
    for module in base.modules():
        for name, param in list(module._parameters.items()):
            if param is None:
                continue
            del module._parameters[name]
            module.register_buffer(name, param.detach().clone())
    return base


class LinearizedModel(nn.Module):
    """The first-order Taylor expansion of a network around its parameters ``theta0``:

    .. math:: f^{lin}(x; \\theta) = f(x; \\theta_0) + J(x; \\theta_0)(\\theta - \\theta_0),

    computed as one forward-mode product (``torch.func.jvp``) per call, never forming
    :math:`J`. Its trainable parameters are ``theta`` (``self.net``, initialised at
    ``theta0``, the same names as the network's); ``theta0`` lives in ``self.base`` as
    buffers. Train it like any module (FedAvg, SGD): gradients flow through the jvp.
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        self.net = copy.deepcopy(model)
        self.base = _frozen_copy(model)
        self._names = [name for name, _ in model.named_parameters()]
        if not self._names:
            raise ValueError("model has no parameters to linearize around")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        theta = dict(self.net.named_parameters())
        theta0 = dict(self.base.named_buffers())
        primals = {n: theta0[n] for n in self._names}
        tangents = {n: theta[n] - theta0[n] for n in self._names}
        with quiet_forward_mode():
            out, tangent_out = jvp(
                lambda p: functional_call(self.base, p, (x,)), (primals,), (tangents,)
            )
        return out + tangent_out


def linearize(model: nn.Module) -> LinearizedModel:
    """The linearized model of ``model`` around its current parameters (a copy: ``model``
    is not changed). See :class:`LinearizedModel`."""
    return LinearizedModel(model)


def _params(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach() for n, p in model.named_parameters()}


def empirical_ntk(model: nn.Module, x1, x2=None, *, output: str = "full") -> torch.Tensor:
    """The empirical neural tangent kernel
    :math:`\\Theta(x, x')_{ab} = \\sum_p \\partial_p f_a(x)\\, \\partial_p f_b(x')`.

    Parameters
    ----------
    model : nn.Module
        Maps ``(N, ...)`` inputs to ``(N, k)``.
    x1 : torch.Tensor, shape (n1, ...)
    x2 : torch.Tensor, shape (n2, ...), optional
        Default ``x1``.
    output : {"full", "trace"}
        ``"full"``: shape ``(n1, n2, k, k)``; ``"trace"``: the mean over outputs of
        :math:`\\Theta_{aa}`, shape ``(n1, n2)`` (what :func:`~fedavg_wide.analytic_ntk`
        gives for a network whose NTK is ``Theta x I``).

    Notes
    -----
    Computed as :math:`J_1 J_2^T`: chunks of rows of :math:`J_2` (reverse mode, ``vmap``
    over ``vjp``) are pushed through forward mode on ``x1`` (``vmap`` over ``jvp``), so at
    most ``CHUNK_BYTES`` of Jacobian rows exist at once; ``x1 is x2`` is not special-cased.
    """
    check_choice(output, "output", ("full", "trace"))
    x2 = x1 if x2 is None else x2
    params = _params(model)
    buffers = dict(model.named_buffers())
    n_params = sum(p.numel() for p in params.values())
    item = next(iter(params.values())).element_size()

    def f(p, x):
        return functional_call(model, {**buffers, **p}, (x,))

    with torch.no_grad():
        k = f(params, x2[:1]).shape[1]
    check_memory(n_params * item, "model", device=x1.device, what="one Jacobian row")
    rows = max(1, CHUNK_BYTES // (n_params * item))
    per_chunk = max(1, rows // k)
    blocks = []
    for start in range(0, len(x2), per_chunk):
        xc = x2[start : start + per_chunk]
        _, pull = vjp(lambda p, xc=xc: f(p, xc), params)
        c = len(xc)
        eye = torch.eye(c * k, dtype=xc.dtype, device=xc.device).reshape(c * k, c, k)
        (rows_j2,) = vmap(pull)(eye)  # dict: (c*k, *param shape)

        def push(t):
            return jvp(lambda p: f(p, x1), (params,), (t,))[1]

        with quiet_forward_mode():
            block = vmap(push)(rows_j2)  # (c*k, n1, k): entry [(j, b), i, a] = Theta(x1_i, x2_j)_ab
        blocks.append(block.reshape(c, k, len(x1), k).permute(2, 0, 3, 1))
    ntk = torch.cat(blocks, dim=1)  # (n1, n2, k, k)
    return ntk if output == "full" else torch.diagonal(ntk, dim1=2, dim2=3).mean(-1)


def _flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for _, p in model.named_parameters()])


def _check_pair(model: nn.Module, reference: nn.Module) -> None:
    names = [(n, p.shape) for n, p in model.named_parameters()]
    ref = [(n, p.shape) for n, p in reference.named_parameters()]
    if names != ref:
        raise ValueError(
            "model and reference must have the same parameters (names, order and shapes)"
        )


def relative_weight_change(
    model: nn.Module, reference: nn.Module, *, per_layer: bool = False
) -> float | dict[str, float]:
    """:math:`\\|\\theta - \\theta_0\\|_2 / \\|\\theta_0\\|_2` between ``model`` and
    ``reference`` (its initialisation): over all parameters, or per parameter tensor
    (``per_layer=True``, Lee et al. 2019's per-layer Frobenius ratio)."""
    _check_pair(model, reference)
    if per_layer:
        ref = dict(reference.named_parameters())
        return {
            n: float((p.detach() - ref[n].detach()).norm() / ref[n].detach().norm())
            for n, p in model.named_parameters()
        }
    return float((_flat(model) - _flat(reference)).norm() / _flat(reference).norm())


def weight_rmse(model: nn.Module, reference: nn.Module) -> float:
    """:math:`\\sqrt{\\operatorname{mean}_i (\theta_i - \theta_{0,i})^2}` over all parameters:
    the official code's (absolute) weight-change metric. :func:`relative_weight_change`
    is the width-comparable one."""
    _check_pair(model, reference)
    return float((_flat(model) - _flat(reference)).pow(2).mean().sqrt())


@torch.no_grad()
def linearization_gap(model: nn.Module, reference: nn.Module, x) -> float:
    """RMSE over ``x`` (shape ``(n, ...)``) and outputs of the Taylor remainder
    :math:`f_\theta(x) - [f_{\theta_0}(x) + J_{\theta_0}(x)(\theta - \theta_0)]`, with
    ``model`` at :math:`\theta` and ``reference`` at :math:`\theta_0`: the official
    code's linearization gap (at the FedAvg iterates, on training data). Both are
    evaluated in eval mode."""
    _check_pair(model, reference)
    check_scalar(len(x), "len(x)", low=1, integer=True)
    lin = linearize(reference)
    lin.net.load_state_dict(model.state_dict())
    was = model.training
    model.eval()
    try:
        now = model(x)
    finally:
        model.train(was)
    return float((now - lin.eval()(x)).pow(2).mean().sqrt())


def ntk_change(model: nn.Module, reference: nn.Module, x) -> float:
    """:math:`\\|\\Theta_\\theta - \\Theta_{\\theta_0}\\|_F / \\|\\Theta_{\\theta_0}\\|_F` of the
    empirical NTKs on ``x`` (shape ``(n, ...)``) of ``model`` and ``reference``."""
    _check_pair(model, reference)
    check_scalar(len(x), "len(x)", low=1, integer=True)
    now, before = empirical_ntk(model, x), empirical_ntk(reference, x)
    return float((now - before).norm() / before.norm())
