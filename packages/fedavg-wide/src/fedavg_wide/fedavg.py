"""FedAvg exactly as analysed, and the centralized reference at equal gradient steps.

Each round the server samples the participating clients, every one of them starts from the
global parameters and takes ``local_steps`` (tau) steps of gradient descent on its own loss
(full batch, or SGD on mini-batches of ``batch_size``), and the server replaces the global
parameters by the mean of the local ones weighted by the clients' sample counts:

.. math::
    \\theta^{r+1} = \\sum_{m \\in S_r} \\frac{n_m}{\\sum_{j \\in S_r} n_j}\\,
    \\theta_m^{r, \\tau}, \\qquad
    \\theta_m^{r, t+1} = \\theta_m^{r, t} - \\eta \\left(\\nabla L_m(\\theta_m^{r, t})
    + \\lambda \\theta_m^{r, t}\\right).

:func:`centralized_gd` runs ``rounds x local_steps`` steps of the same update on the
size-weighted global loss :math:`L = \\sum_m (n_m / n) L_m` (the mean over all samples),
recording after every ``local_steps`` steps, so round ``r`` of both histories is the same
number of gradient steps. With ``local_steps = 1``, full participation and full batches the
two are the same iteration (exactly, up to float rounding).

Losses: ``"mse"`` is :math:`L_m = \\frac{1}{2 n_m} \\sum_i \\|f(x_i) - y_i\\|^2`;
``"cross_entropy"`` the mean cross-entropy of integer labels.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from icml25_core import check_choice, check_labels, check_loss, check_scalar, check_targets

__all__ = ["FedAvg", "History", "batch_seed", "centralized_gd", "evaluate", "local_update"]

LOSSES = ("mse", "cross_entropy")


@dataclass
class History:
    """What a run measured, one entry per evaluation (round 0 = the initial model).

    Attributes
    ----------
    rounds : list of int
    train_loss, train_accuracy : list of float
        The global model on all clients' data pooled (accuracy: NaN where it does not
        apply, see :func:`evaluate`).
    test_loss, test_accuracy : list of float
        On ``test`` (NaN without it).
    client_loss, client_accuracy : list of list of float
        The global model on each client's data, ``[round][client]``.
    local_loss : list of list of float
        Each participant's loss after its local steps (NaN for clients that sat the round
        out; empty list for round 0 and for :func:`centralized_gd`).
    participants : list of list of int
        Client indices trained in each round.
    model : nn.Module
        The final global model, in eval mode.
    """

    rounds: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    train_accuracy: list[float] = field(default_factory=list)
    test_loss: list[float] = field(default_factory=list)
    test_accuracy: list[float] = field(default_factory=list)
    client_loss: list[list[float]] = field(default_factory=list)
    client_accuracy: list[list[float]] = field(default_factory=list)
    local_loss: list[list[float]] = field(default_factory=list)
    participants: list[list[int]] = field(default_factory=list)
    model: nn.Module | None = None

    def to_dict(self) -> dict:
        """The metrics as plain lists (JSON-ready; the model left out)."""
        return {k: v for k, v in self.__dict__.items() if k != "model"}


def _loss_fn(kind: str, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if kind == "mse":
        return 0.5 * (out - y).pow(2).sum(dim=1).mean()
    return F.cross_entropy(out, y)


def _accuracy(kind: str, out: torch.Tensor, y: torch.Tensor) -> float:
    if kind == "cross_entropy":
        return float((out.argmax(1) == y).double().mean())
    if y.shape[1] == 1 and bool(((y == 1) | (y == -1)).all()):
        return float((torch.sign(out) == y).double().mean())
    if y.shape[1] > 1 and bool(((y == 0) | (y == 1)).all()) and bool((y.sum(1) == 1).all()):
        return float((out.argmax(1) == y.argmax(1)).double().mean())
    return math.nan


@contextmanager
def _mode(model: nn.Module, training: bool):
    """``model`` in train (``True``) or eval mode inside the block, its own mode after."""
    was = model.training
    model.train(training)
    try:
        yield model
    finally:
        model.train(was)


@torch.no_grad()
def evaluate(
    model: nn.Module, X: torch.Tensor, y: torch.Tensor, loss: str = "mse"
) -> tuple[float, float]:
    """``(loss, accuracy)`` of ``model`` on ``(X, y)``, in eval mode (dropout off, batch
    norm on its running statistics, which are left unchanged); the model's mode is
    restored. Accuracy: argmax for cross-entropy; for MSE, sign agreement with +-1 targets
    on one output or argmax agreement with one-hot targets, else NaN (a regression)."""
    with _mode(model, False):
        out = model(X)
    return float(_loss_fn(loss, out, y)), _accuracy(loss, out, y)


def _check_data(name: str, X, y, loss: str, model: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    p = next(model.parameters())
    if not isinstance(X, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise TypeError(f"{name} must be a pair of torch tensors (X, y)")
    if len(X) == 0:
        raise ValueError(f"{name} has no data: every client needs at least one sample")
    if len(X) != len(y):
        raise ValueError(f"{name}: X and y must have the same length, got {len(X)} and {len(y)}")
    if not torch.isfinite(X).all():
        raise ValueError(f"{name}: X must be finite (no NaN or inf)")
    X = X.to(device=p.device, dtype=p.dtype)
    with torch.no_grad(), _mode(model, False):  # a probe: no batch-norm statistics change
        outputs = model(X[:1]).shape[1]
    if loss == "cross_entropy":
        y = check_labels(y, f"{name}: y", n_classes=outputs, n_samples=len(X)).to(p.device)
    else:
        if not y.dtype.is_floating_point:
            raise ValueError(
                f"{name}: mse needs float targets, got {y.dtype} (use loss='cross_entropy' for labels)"
            )
        if not torch.isfinite(y).all():
            raise ValueError(f"{name}: y must be finite (no NaN or inf)")
        y = y.to(device=p.device, dtype=p.dtype)
        y = check_targets(y, f"{name}: y", n_samples=len(X), n_outputs=outputs)
    return X, y


def _check_clients(model, clients, loss):
    if not isinstance(model, nn.Module) or not any(True for _ in model.parameters()):
        raise TypeError("model must be a torch.nn.Module with parameters")
    if isinstance(clients, tuple) and len(clients) == 2 and isinstance(clients[0], torch.Tensor):
        raise TypeError("clients must be a sequence of (X, y) pairs, got a single (X, y) pair")
    if not isinstance(clients, Sequence) or len(clients) == 0:
        raise ValueError("clients must be a non-empty sequence of (X, y) pairs")
    out = []
    for m, pair in enumerate(clients):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"clients[{m}] must be an (X, y) pair")
        out.append(_check_data(f"clients[{m}]", *pair, loss, model))
    return out


def _check_settings(
    lr, local_steps, rounds, batch_size, participation, weight_decay, loss, evaluate_every
):
    check_scalar(lr, "lr", low=0.0, low_inclusive=False)
    check_scalar(evaluate_every, "evaluate_every", low=1, integer=True)
    check_scalar(local_steps, "local_steps", low=1, integer=True)
    check_scalar(rounds, "rounds", low=0, integer=True)
    if batch_size is not None:
        check_scalar(batch_size, "batch_size", low=1, integer=True)
    check_scalar(participation, "participation", low=0.0, high=1.0, low_inclusive=False)
    check_scalar(weight_decay, "weight_decay", low=0.0)
    check_choice(loss, "loss", LOSSES)


def batch_seed(seed: int, round_: int, client: int) -> int:
    """The seed of client ``client``'s mini-batch order in round ``round_`` (the plain loop
    and the Flower client use the same one)."""
    return (seed * 1_000_003 + round_ * 10_007 + client) % 2**63


class _Batches:
    """Mini-batches of ``batch_size`` in a random order, reshuffled when exhausted (the whole
    data set, always, when ``batch_size`` is None or at least ``n``)."""

    def __init__(self, n: int, batch_size: int | None, seed: int, device) -> None:
        self.n, self.full = n, batch_size is None or batch_size >= n
        self.size = n if self.full else batch_size
        self.gen = torch.Generator().manual_seed(seed)
        self.device, self.order, self.pos = device, None, n

    def next(self) -> torch.Tensor | None:
        if self.full:
            return None
        if self.pos + self.size > self.n:
            self.order, self.pos = torch.randperm(self.n, generator=self.gen), 0
        idx = self.order[self.pos : self.pos + self.size]
        self.pos += self.size
        return idx.to(self.device)


def local_update(
    model: nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    *,
    lr: float,
    local_steps: int,
    batch_size: int | None = None,
    weight_decay: float = 0.0,
    loss: str = "mse",
    seed: int = 0,
) -> float:
    """``local_steps`` steps of (stochastic) gradient descent on ``model`` in place, in train
    mode (dropout on, batch-norm statistics updated; the model's mode is restored after);
    ``seed`` fixes the mini-batch order and the dropout masks (the global torch generator
    is left as it was). Returns the loss of the last step's batch before its update.
    Raises ``FloatingPointError`` naming ``lr`` when the loss stops being finite.

    This is one client's round of :func:`FedAvg`; with :func:`batch_seed` it is also the
    building block of a custom federated loop."""
    params = [p for p in model.parameters() if p.requires_grad]
    batches = _Batches(len(X), batch_size, seed, X.device)
    devices = [X.device] if X.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices), _mode(model, True):
        torch.manual_seed(seed)
        return _steps(model, params, X, y, batches, lr, local_steps, weight_decay, loss)


def _steps(model, params, X, y, batches, lr, local_steps, weight_decay, loss) -> float:
    value = math.nan
    for _ in range(local_steps):
        idx = batches.next()
        xb, yb = (X, y) if idx is None else (X[idx], y[idx])
        objective = _loss_fn(loss, model(xb), yb)
        value = check_loss(objective, lr=lr)
        grads = torch.autograd.grad(objective, params)
        with torch.no_grad():
            for p, g in zip(params, grads, strict=True):
                if weight_decay:
                    g = g + weight_decay * p
                p.sub_(lr * g)
    return value


def _record(
    history, r, model, clients, pooled, test, loss, callback, local=None, chosen=None, *, lr
):
    """Evaluate ``model`` after round ``r`` into ``history`` (``pooled``: all clients' data
    concatenated once per run), then call ``callback``. Raises ``FloatingPointError``
    naming ``lr`` when the loss is not finite or ran away from its round-0 value
    (:data:`icml25_core.guards.RUNAWAY` times)."""
    tl, ta = evaluate(model, *pooled, loss)
    first = history.train_loss[0] if history.train_loss else None
    check_loss(tl, lr=lr, step=r, reference=first, what="global training loss")
    history.rounds.append(r)
    history.train_loss.append(tl)
    history.train_accuracy.append(ta)
    vl, va = evaluate(model, *test, loss) if test is not None else (math.nan, math.nan)
    history.test_loss.append(vl)
    history.test_accuracy.append(va)
    per = [evaluate(model, x, y, loss) for x, y in clients]
    history.client_loss.append([p[0] for p in per])
    history.client_accuracy.append([p[1] for p in per])
    history.local_loss.append(local or [])
    history.participants.append(chosen or [])
    if callback:
        callback(r, model)


def _pooled(data):
    return torch.cat([x for x, _ in data]), torch.cat([y for _, y in data])


def _participants(rng: np.random.Generator, n_clients: int, participation: float) -> list[int]:
    if participation >= 1.0:
        return list(range(n_clients))
    k = max(1, round(participation * n_clients))
    return sorted(rng.choice(n_clients, size=k, replace=False).tolist())


def FedAvg(
    model: nn.Module,
    clients: Sequence[tuple[torch.Tensor, torch.Tensor]],
    lr: float,
    local_steps: int,
    rounds: int,
    *,
    batch_size: int | None = None,
    participation: float = 1.0,
    weight_decay: float = 0.0,
    loss: str = "mse",
    test: tuple[torch.Tensor, torch.Tensor] | None = None,
    seed: int = 0,
    evaluate_every: int = 1,
    callback: Callable[[int, nn.Module], None] | None = None,
) -> History:
    """Run FedAvg from ``model``'s parameters (``model`` itself is not changed).

    Parameters
    ----------
    model : nn.Module
        The initial global model (any architecture; its dtype and device are used for the
        data). Local steps run in train mode and evaluations in eval mode (dropout,
        batch norm); floating buffers (batch-norm running statistics) are averaged like
        the parameters, integer ones (``num_batches_tracked``) to the rounded mean;
        parameters with ``requires_grad=False`` stay as they are.
    clients : sequence of (X, y)
        Each client's data: ``X`` of shape ``(n_m, ...)``; ``y`` float targets ``(n_m, k)``
        or ``(n_m,)`` for ``"mse"``, integer labels ``(n_m,)`` for ``"cross_entropy"``.
    lr : float
        Local step size eta.
    local_steps : int
        Local steps tau per round.
    rounds : int
        Communication rounds.
    batch_size : int, optional
        Mini-batch size of local SGD; ``None`` (default): full-batch GD.
    participation : float
        Fraction of clients sampled (uniformly, without replacement) each round; the mean
        is weighted by sample counts among the participants.
    weight_decay : float
        L2 coefficient lambda added to every gradient.
    loss : {"mse", "cross_entropy"}
    test : (X, y), optional
        Held-out data evaluated after every round.
    seed : int
        Seeds client sampling, the mini-batch orders and the dropout masks.
    evaluate_every : int
        Evaluate (and call ``callback``) after round 0, every ``evaluate_every`` rounds
        and the last round.
    callback : callable, optional
        ``callback(round, global_model)`` after every evaluation (round 0 first), for
        custom measurements; do not modify the model.

    Returns
    -------
    History
        Per-round metrics; ``history.model`` is the final global model.
    """
    _check_settings(
        lr, local_steps, rounds, batch_size, participation, weight_decay, loss, evaluate_every
    )
    data = _check_clients(model, clients, loss)
    test = None if test is None else _check_data("test", *test, loss, model)
    sizes = np.array([len(x) for x, _ in data], dtype=np.float64)
    rng = np.random.default_rng(seed)
    pooled = _pooled(data)
    global_model = copy.deepcopy(model)
    worker = copy.deepcopy(model)
    history = History()
    _record(history, 0, global_model, data, pooled, test, loss, callback, lr=lr)
    # the global model is not touched during a round: each participant starts from it
    start = global_model.state_dict(keep_vars=True)
    params = {n for n, p in global_model.named_parameters() if p.requires_grad}
    frozen = {n for n, p in global_model.named_parameters() if not p.requires_grad}
    names = [n for n in start if n not in frozen]
    for r in range(1, rounds + 1):
        chosen = _participants(rng, len(data), participation)
        weights = sizes[chosen] / sizes[chosen].sum()
        total = {n: torch.zeros_like(start[n], dtype=_mean_dtype(start[n])) for n in names}
        local = [math.nan] * len(data)
        for w, m in zip(weights, chosen, strict=True):
            with torch.no_grad():
                for n, t in worker.state_dict(keep_vars=True).items():
                    t.copy_(start[n])
            local[m] = local_update(
                worker,
                *data[m],
                lr=lr,
                local_steps=local_steps,
                batch_size=batch_size,
                weight_decay=weight_decay,
                loss=loss,
                seed=batch_seed(seed, r, m),
            )
            with torch.no_grad():
                for n, t in worker.state_dict(keep_vars=True).items():
                    if n in params:
                        total[n].add_(t, alpha=float(w))
                    elif n in total:  # a buffer: its mean change (unchanged stays exact)
                        total[n].add_((t - start[n]).to(total[n].dtype), alpha=float(w))
        with torch.no_grad():
            for n in names:
                if n in params:
                    start[n].copy_(total[n])
                elif start[n].is_floating_point():
                    start[n].add_(total[n])
                else:
                    start[n].add_(total[n].round().to(start[n].dtype))
        if r % evaluate_every == 0 or r == rounds:
            _record(
                history, r, global_model, data, pooled, test, loss, callback, local, chosen, lr=lr
            )
    history.model = global_model.eval()
    return history


def _mean_dtype(t: torch.Tensor) -> torch.dtype:
    """Where the weighted mean of a state entry accumulates: its own dtype when floating,
    float64 for integer buffers (batch norm's ``num_batches_tracked``: mean change,
    rounded)."""
    return t.dtype if t.is_floating_point() or t.is_complex() else torch.float64


def centralized_gd(
    model: nn.Module,
    clients: Sequence[tuple[torch.Tensor, torch.Tensor]],
    lr: float,
    local_steps: int,
    rounds: int,
    *,
    batch_size: int | None = None,
    weight_decay: float = 0.0,
    loss: str = "mse",
    test: tuple[torch.Tensor, torch.Tensor] | None = None,
    seed: int = 0,
    evaluate_every: int = 1,
    callback: Callable[[int, nn.Module], None] | None = None,
) -> History:
    """The centralized reference: ``rounds x local_steps`` steps of (stochastic) gradient
    descent on the size-weighted global loss of all ``clients``' data pooled, evaluated
    after every ``local_steps`` steps, so entry ``r`` of its history and of
    :func:`FedAvg`'s are the same number of gradient steps. Arguments as :func:`FedAvg`
    (mini-batches are drawn from the pooled data)."""
    _check_settings(lr, local_steps, rounds, batch_size, 1.0, weight_decay, loss, evaluate_every)
    data = _check_clients(model, clients, loss)
    test = None if test is None else _check_data("test", *test, loss, model)
    pooled = X, y = _pooled(data)
    worker = copy.deepcopy(model)
    history = History()
    _record(history, 0, worker, data, pooled, test, loss, callback, lr=lr)
    # one stream of mini-batches over the whole run (an epoch may span rounds)
    stream = _Batches(len(X), batch_size, batch_seed(seed, 0, len(data)), X.device)
    for r in range(1, rounds + 1):
        for i in range(local_steps):
            idx = stream.next()
            xb, yb = (X, y) if idx is None else (X[idx], y[idx])
            step = (r - 1) * local_steps + i + 1  # its own dropout masks
            local_update(
                worker,
                xb,
                yb,
                lr=lr,
                local_steps=1,
                weight_decay=weight_decay,
                loss=loss,
                seed=batch_seed(seed, step, len(data)),
            )
        if r % evaluate_every == 0 or r == rounds:
            _record(history, r, worker, data, pooled, test, loss, callback, lr=lr)
    history.model = worker.eval()
    return history
