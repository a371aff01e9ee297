r"""Test-time adaptation baselines, one online pass each, on a featurizer + head model.

Every method wraps a ``featurizer`` (inputs ``(B, ...)`` to embeddings ``(B, d)``) and a
``head`` (embeddings to logits ``(B, C)``), by default on deep copies, so the caller's model
never changes. ``method(x)`` adapts on one batch (where the method adapts) and returns
``(embeddings, logits)`` as predicted *before* that batch's update, as the papers and the
official TCA code score them; :meth:`TTAMethod.run` does this over a whole stream.

- :class:`SourceOnly`: the unadapted model (eval mode).
- :class:`BNAdapt`: batch-norm layers normalise with the test batch's statistics
  (Schneider et al., 2020; Nado et al., 2020).
- :class:`Tent`: entropy minimisation over the normalisation layers' affine parameters
  (Wang et al., ICLR 2021).
- :class:`T3A`: back-propagation-free prototype classifier from low-entropy test
  embeddings (Iwasawa & Matsuo, NeurIPS 2021).
- :class:`EATA`: Tent on reliable, non-redundant samples with entropy re-weighting and an
  optional Fisher anti-forgetting penalty (Niu et al., ICML 2022).
- :class:`SAR`: sharpness-aware, reliable entropy minimisation with model recovery
  (Niu et al., ICLR 2023).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from icml25_core import check_array, check_scalar

from .alignment import softmax_entropy

_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.LayerNorm, nn.GroupNorm)
_BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


@dataclass
class Stream:
    """What a method produced over a test stream.

    Attributes
    ----------
    embeddings : torch.Tensor, shape (N, d)
    logits : torch.Tensor, shape (N, C)
    labels : torch.Tensor or None, shape (N,)
        The labels the loader yielded as a batch's second element, if any.
    """

    embeddings: torch.Tensor
    logits: torch.Tensor
    labels: torch.Tensor | None


def split_batch(batch: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(inputs, labels or None)`` from a loader's batch: a tensor, or a tuple/list whose
    first element is the input and second (optional) the labels."""
    if isinstance(batch, torch.Tensor):
        return batch, None
    if isinstance(batch, list | tuple) and batch and isinstance(batch[0], torch.Tensor):
        labels = batch[1] if len(batch) > 1 and isinstance(batch[1], torch.Tensor) else None
        return batch[0], labels
    raise TypeError(
        "loader must yield tensors or (inputs, labels, ...) tuples of tensors, got "
        f"{type(batch).__name__}"
    )


def module_device(*modules: nn.Module) -> torch.device:
    """The device of the first parameter or buffer found in ``modules`` (CPU if none)."""
    for module in modules:
        for tensor in (*module.parameters(), *module.buffers()):
            return tensor.device
    return torch.device("cpu")


def configure_norms(module: nn.Module, *, trainable: bool) -> list[nn.Parameter]:
    """Batch norms of ``module`` normalise with the current batch's statistics (running
    statistics dropped); with ``trainable`` only the affine parameters of the
    normalisation layers require grad, and they are returned."""
    module.train()
    module.requires_grad_(False)
    params: list[nn.Parameter] = []
    for m in module.modules():
        if isinstance(m, _BATCH_NORMS):
            m.track_running_stats = False
            m.running_mean = None
            m.running_var = None
        if trainable and isinstance(m, _NORMS):
            for p in (m.weight, m.bias):
                if p is not None:
                    p.requires_grad_(True)
                    params.append(p)
    if trainable and not params:
        raise ValueError(
            "the model has no normalisation layer with affine parameters to adapt "
            "(Tent, EATA and SAR update BatchNorm/LayerNorm/GroupNorm weights)"
        )
    return params


class TTAMethod(nn.Module):
    """Base class: a featurizer + head adapted online, batch by batch.

    Parameters
    ----------
    featurizer, head : torch.nn.Module
        The model split in two; ``head(featurizer(x))`` are its logits.
    copy_modules : bool, default=True
        Work on deep copies (the caller's modules never change).
    """

    def __init__(self, featurizer: nn.Module, head: nn.Module, *, copy_modules: bool = True):
        super().__init__()
        if not isinstance(featurizer, nn.Module) or not isinstance(head, nn.Module):
            raise TypeError(
                "featurizer and head must be torch.nn.Module instances, got "
                f"{type(featurizer).__name__} and {type(head).__name__}"
            )
        self.featurizer = copy.deepcopy(featurizer) if copy_modules else featurizer
        self.head = copy.deepcopy(head) if copy_modules else head

    @property
    def device(self) -> torch.device:
        """Where the modules live (inputs are moved there)."""
        return module_device(self.featurizer, self.head)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Adapt on the batch ``x`` and return its ``(embeddings (B, d), logits (B, C))``."""
        raise NotImplementedError

    def run(self, loader: Iterable[Any]) -> Stream:
        """One online pass over ``loader``: every batch predicted, then adapted on."""
        zs, ps, ys = [], [], []
        device = self.device
        for batch in loader:
            x, y = split_batch(batch)
            check_array(x, "loader batch", finite=True)
            z, p = self(x.to(device))
            zs.append(z.detach())
            ps.append(p.detach())
            if y is not None:
                ys.append(y)
        if not zs:
            raise ValueError("loader yielded no batch")
        labels = torch.cat(ys) if len(ys) == len(zs) else None
        return Stream(torch.cat(zs), torch.cat(ps), labels)


class SourceOnly(TTAMethod):
    """The model as trained: eval mode, no adaptation."""

    def __init__(self, featurizer: nn.Module, head: nn.Module, *, copy_modules: bool = True):
        super().__init__(featurizer, head, copy_modules=copy_modules)
        self.featurizer.eval()
        self.head.eval()

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.featurizer(x)
        return z, self.head(z)


class BNAdapt(TTAMethod):
    """Test-batch statistics in every batch-norm layer; no parameter is trained."""

    def __init__(self, featurizer: nn.Module, head: nn.Module, *, copy_modules: bool = True):
        super().__init__(featurizer, head, copy_modules=copy_modules)
        configure_norms(nn.ModuleList([self.featurizer, self.head]), trainable=False)

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.featurizer(x)
        return z, self.head(z)


class _EntropyMethod(TTAMethod):
    """Shared set-up of the methods that train the normalisation layers' affine params."""

    def __init__(self, featurizer, head, *, copy_modules: bool = True):
        super().__init__(featurizer, head, copy_modules=copy_modules)
        self.params = configure_norms(nn.ModuleList([self.featurizer, self.head]), trainable=True)

    def _logits(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.featurizer(x)
        return z, self.head(z)


class Tent(_EntropyMethod):
    """Tent: one Adam step per batch on the mean softmax entropy of its predictions.

    Parameters
    ----------
    featurizer, head : torch.nn.Module
    lr : float, default=1e-3
        Adam learning rate (Tent's choice for Adam; the official TCA script's default
        is 1e-4, its README runs use 1e-3).
    steps : int, default=1
        Updates per batch.
    copy_modules : bool, default=True
    """

    def __init__(self, featurizer, head, *, lr: float = 1e-3, steps: int = 1, copy_modules=True):
        check_scalar(lr, "lr", low=0.0, low_inclusive=False)
        check_scalar(steps, "steps", low=1, integer=True)
        super().__init__(featurizer, head, copy_modules=copy_modules)
        self.steps = steps
        self.optimizer = torch.optim.Adam(self.params, lr=lr)

    @torch.enable_grad()
    def forward(self, x):
        for step in range(self.steps):
            z, p = self._logits(x)
            if step == 0:
                out = (z.detach(), p.detach())
            loss = softmax_entropy(p).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return out


class T3A(TTAMethod):
    """T3A: classify by cosine to class prototypes averaged from the ``filter_k``
    lowest-entropy test embeddings of each class seen so far (seeded with the head's
    weight rows).

    Parameters
    ----------
    featurizer : torch.nn.Module
    head : torch.nn.Linear
        A linear head (or a module with a ``weight`` of shape ``(C, d)``).
    filter_k : int or None, default=100
        Supports kept per class (the official default); ``None`` keeps all.
    copy_modules : bool, default=True
    """

    def __init__(self, featurizer, head, *, filter_k: int | None = 100, copy_modules=True):
        if filter_k is not None:
            check_scalar(filter_k, "filter_k", low=1, integer=True)
        super().__init__(featurizer, head, copy_modules=copy_modules)
        weight = getattr(self.head, "weight", None)
        if not isinstance(weight, torch.Tensor) or weight.ndim != 2:
            raise TypeError("T3A needs a linear head: head.weight of shape (n_classes, d)")
        self.featurizer.eval()
        self.head.eval()
        self.filter_k = filter_k
        with torch.no_grad():
            warm = weight.detach().clone()
            p = self.head(warm)
        self.n_classes = weight.shape[0]
        self.supports = warm
        self.labels = F.one_hot(p.argmax(1), self.n_classes).float()
        self.entropy = softmax_entropy(p)

    @torch.no_grad()
    def forward(self, x):
        z = self.featurizer(x)
        p = self.head(z)
        self.supports = torch.cat([self.supports, z])
        self.labels = torch.cat([self.labels, F.one_hot(p.argmax(1), self.n_classes).float()])
        self.entropy = torch.cat([self.entropy, softmax_entropy(p)])
        if self.filter_k is not None:
            y = self.labels.argmax(1)
            keep = []
            for c in range(self.n_classes):
                members = torch.nonzero(y == c).flatten()
                order = torch.argsort(self.entropy[members], stable=True)
                keep.append(members[order[: self.filter_k]])
            keep = torch.cat(keep)
            self.supports, self.labels = self.supports[keep], self.labels[keep]
            self.entropy = self.entropy[keep]
        prototypes = F.normalize(self.supports, dim=1).T @ self.labels
        return z, z @ F.normalize(prototypes, dim=0)


class EATA(_EntropyMethod):
    r"""EATA: Adam on the entropy of reliable (entropy below ``e_margin``) and
    non-redundant (cosine to the running mean prediction below ``d_margin``) samples,
    each weighted by :math:`1 / \exp(H - E_0)`, plus an optional Fisher penalty.

    Parameters
    ----------
    featurizer, head : torch.nn.Module
    lr : float, default=1e-3
    e_margin : float, optional
        :math:`E_0`; default :math:`0.4 \ln C` (the EATA and official TCA choice).
    d_margin : float, default=0.05
    fishers : mapping of str to (tensor, tensor), optional
        Per named parameter of the featurizer, ``(fisher diagonal, anchor value)``.
        Without it the method is EATA's "ETA" variant (no source data needed).
    fisher_alpha : float, default=2000.0
    copy_modules : bool, default=True
    """

    def __init__(
        self,
        featurizer,
        head,
        *,
        lr: float = 1e-3,
        e_margin: float | None = None,
        d_margin: float = 0.05,
        fishers: Mapping[str, tuple[torch.Tensor, torch.Tensor]] | None = None,
        fisher_alpha: float = 2000.0,
        copy_modules=True,
    ):
        check_scalar(lr, "lr", low=0.0, low_inclusive=False)
        check_scalar(d_margin, "d_margin", low=0.0)
        check_scalar(fisher_alpha, "fisher_alpha", low=0.0)
        if e_margin is not None:
            check_scalar(e_margin, "e_margin", low=0.0, low_inclusive=False)
        super().__init__(featurizer, head, copy_modules=copy_modules)
        self.e_margin = e_margin
        self.d_margin = d_margin
        self.fishers = dict(fishers) if fishers is not None else None
        self.fisher_alpha = fisher_alpha
        self.optimizer = torch.optim.Adam(self.params, lr=lr)
        self.mean_probs: torch.Tensor | None = None

    @torch.enable_grad()
    def forward(self, x):
        z, p = self._logits(x)
        margin = self.e_margin if self.e_margin is not None else 0.4 * math.log(p.shape[1])
        entropy = softmax_entropy(p)
        reliable = entropy < margin
        probs = p.softmax(1)
        keep = reliable
        if self.mean_probs is not None:
            cos = F.cosine_similarity(self.mean_probs[None], probs, dim=1)
            keep = reliable & (cos.abs() < self.d_margin)
        selected = probs[keep].detach()
        if selected.shape[0]:
            batch_mean = selected.mean(0)
            self.mean_probs = (
                batch_mean if self.mean_probs is None else 0.9 * self.mean_probs + 0.1 * batch_mean
            )
        if bool(keep.any()):
            weight = torch.exp(margin - entropy[keep].detach())
            loss = (entropy[keep] * weight).mean()
            if self.fishers:
                named = dict(self.featurizer.named_parameters())
                for name, (fisher, anchor) in self.fishers.items():
                    loss = loss + self.fisher_alpha * (fisher * (named[name] - anchor) ** 2).sum()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return z.detach(), p.detach()


class SAR(_EntropyMethod):
    r"""SAR: sharpness-aware minimisation (SAM, radius ``rho``, SGD with momentum 0.9) of
    the entropy of reliable samples (entropy below ``e_margin``), filtered again after the
    ascent step; the model resets to its start when the moving average of that entropy
    falls below ``reset_constant`` (collapse).

    Parameters
    ----------
    featurizer, head : torch.nn.Module
    lr : float, default=1e-3
        SGD learning rate.
    rho : float, default=0.05
    e_margin : float, optional
        Default :math:`0.4 \ln C`.
    reset_constant : float, default=0.2
    copy_modules : bool, default=True
    """

    def __init__(
        self,
        featurizer,
        head,
        *,
        lr: float = 1e-3,
        rho: float = 0.05,
        e_margin: float | None = None,
        reset_constant: float = 0.2,
        copy_modules=True,
    ):
        check_scalar(lr, "lr", low=0.0, low_inclusive=False)
        check_scalar(rho, "rho", low=0.0, low_inclusive=False)
        check_scalar(reset_constant, "reset_constant", low=0.0)
        if e_margin is not None:
            check_scalar(e_margin, "e_margin", low=0.0, low_inclusive=False)
        super().__init__(featurizer, head, copy_modules=copy_modules)
        self.rho = rho
        self.e_margin = e_margin
        self.reset_constant = reset_constant
        self.optimizer = torch.optim.SGD(self.params, lr=lr, momentum=0.9)
        self.ema: float | None = None
        self._start = (
            copy.deepcopy(self.featurizer.state_dict()),
            copy.deepcopy(self.head.state_dict()),
            copy.deepcopy(self.optimizer.state_dict()),
        )

    def reset(self) -> None:
        """Back to the parameters and optimizer state of the start."""
        self.featurizer.load_state_dict(self._start[0])
        self.head.load_state_dict(self._start[1])
        self.optimizer.load_state_dict(self._start[2])
        self.ema = None

    @torch.enable_grad()
    def forward(self, x):
        z, p = self._logits(x)
        margin = self.e_margin if self.e_margin is not None else 0.4 * math.log(p.shape[1])
        entropy = softmax_entropy(p)
        first = entropy < margin
        if not bool(first.any()):  # nothing reliable: no update (the mean would be NaN)
            return z.detach(), p.detach()
        self.optimizer.zero_grad()
        entropy[first].mean().backward()
        grads = [q.grad for q in self.params if q.grad is not None]
        norm = torch.norm(torch.stack([g.norm(2) for g in grads]), 2)
        scale = self.rho / (norm + 1e-12)
        saved = []
        with torch.no_grad():
            for q in self.params:
                saved.append(q.detach().clone())
                if q.grad is not None:
                    q.add_(q.grad * scale)
        self.optimizer.zero_grad()
        _, p2 = self._logits(x)
        entropy2 = softmax_entropy(p2)[first]
        second = entropy2 < margin
        if bool(second.any()):
            loss2 = entropy2[second].mean()
            loss2.backward()
            value = float(loss2.detach())
            self.ema = value if self.ema is None else 0.9 * self.ema + 0.1 * value
        with torch.no_grad():
            for q, old in zip(self.params, saved, strict=True):
                q.copy_(old)
        if bool(second.any()):
            self.optimizer.step()
        self.optimizer.zero_grad()
        if self.ema is not None and self.ema < self.reset_constant:
            self.reset()
        return z.detach(), p.detach()
