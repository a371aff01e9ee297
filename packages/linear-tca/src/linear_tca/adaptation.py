"""LinearTCA on a whole model: :func:`adapt` (on the source model) and
:class:`LinearTCAPlus` (on top of any test-time adaptation method).

Both make one pass over the test stream collecting embeddings and logits, fit a
:class:`~linear_tca.alignment.LinearTCA` on them, and classify the aligned embeddings with
the model's own head. :func:`adapt` changes no parameter and no buffer of the model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from icml25_core import check_array, check_scalar

from .alignment import LABELLED, LinearTCA
from .baselines import SourceOnly, Stream, TTAMethod


@dataclass
class Adaptation:
    """The outcome of LinearTCA over a test stream.

    Attributes
    ----------
    logits : torch.Tensor, shape (N, C)
        The head's logits on the aligned embeddings.
    base_logits : torch.Tensor, shape (N, C)
        The logits of the base (the source model or the TTA method) before alignment.
    embeddings : torch.Tensor, shape (N, d)
        The base's embeddings.
    labels : torch.Tensor or None, shape (N,)
        The labels the loader yielded, if any.
    tca : LinearTCA
        The fitted alignment (``tca.W_``, ``tca.support_``...).
    """

    logits: torch.Tensor
    base_logits: torch.Tensor
    embeddings: torch.Tensor
    labels: torch.Tensor | None
    tca: LinearTCA

    @property
    def predictions(self) -> torch.Tensor:
        """``logits.argmax(1)``, shape ``(N,)``."""
        return self.logits.argmax(1)


@torch.no_grad()
def classify(head: Callable[[torch.Tensor], torch.Tensor], Z: torch.Tensor, *, chunk: int = 4096):
    """``head(Z)`` in chunks of ``chunk`` rows (no grad), shape ``(N, d) -> (N, C)``."""
    return torch.cat([head(Z[i : i + chunk]) for i in range(0, Z.shape[0], chunk)])


def _fit(stream: Stream, head, tca: LinearTCA | None) -> Adaptation:
    tca = LinearTCA() if tca is None else tca
    if not isinstance(tca, LinearTCA):
        raise TypeError(f"tca must be a LinearTCA, got {type(tca).__name__}")
    labels = stream.labels if tca.proportions in LABELLED else None
    if tca.proportions in LABELLED and labels is None:
        raise ValueError(
            f"proportions={tca.proportions!r} needs a loader that yields (inputs, labels)"
        )
    aligned = tca.fit_transform(stream.embeddings, stream.logits, labels=labels)
    return Adaptation(classify(head, aligned), stream.logits, stream.embeddings, stream.labels, tca)


def adapt(
    model: nn.Module,
    featurizer: nn.Module,
    head: nn.Module,
    loader: Iterable[Any],
    *,
    tca: LinearTCA | None = None,
) -> Adaptation:
    """LinearTCA on a trained model: adapted predictions for a test stream, no parameter
    changed.

    Parameters
    ----------
    model : torch.nn.Module
        The whole model; it is put in eval mode for the pass and its mode restored.
    featurizer, head : torch.nn.Module
        Its two halves (usually submodules of ``model``): ``head(featurizer(x))`` are the
        logits, ``featurizer(x)`` of shape ``(B, d)``.
    loader : iterable
        Test batches: tensors, or ``(inputs, labels, ...)`` tuples.
    tca : LinearTCA, optional
        The alignment settings; default ``LinearTCA()``.

    Returns
    -------
    Adaptation
        ``.logits`` (N, C) adapted, ``.base_logits`` the model's own, ``.tca`` fitted.

    Examples
    --------
    >>> out = adapt(model, model.featurizer, model.head, test_loader)  # doctest: +SKIP
    >>> accuracy = (out.predictions == out.labels).float().mean()  # doctest: +SKIP
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    modes = {m: m.training for m in model.modules()}
    model.eval()
    try:
        source = SourceOnly(featurizer, head, copy_modules=False)
        stream = source.run(loader)
        return _fit(stream, head, tca)
    finally:
        for m, mode in modes.items():
            m.training = mode


class LinearTCAPlus:
    """LinearTCA+ : LinearTCA on the embeddings and logits of a test-time adaptation run.

    Parameters
    ----------
    base : TTAMethod
        Any method of :mod:`linear_tca.baselines` (or a subclass of ``TTAMethod``): it
        adapts online over the stream; its embeddings and logits feed the alignment, and
        its head (as adapted at the end) classifies the aligned embeddings, as the
        official code does.
    tca : LinearTCA, optional
        Default ``LinearTCA()``.
    """

    def __init__(self, base: TTAMethod, *, tca: LinearTCA | None = None) -> None:
        if not isinstance(base, TTAMethod):
            raise TypeError(f"base must be a TTAMethod, got {type(base).__name__}")
        self.base = base
        self.tca = tca

    def run(self, loader: Iterable[Any]) -> Adaptation:
        """The base's online pass over ``loader``, then the alignment."""
        stream = self.base.run(loader)
        return _fit(stream, self.base.head, self.tca)


class ZeroShotHead(nn.Module):
    r"""A CLIP-style zero-shot classifier as a head:
    ``logit_scale * normalize(z) @ normalize(text_embeddings).T``.

    Pair it with the image encoder as featurizer (e.g. ``transformers``'
    ``CLIPModel.get_image_features``) to run LinearTCA on zero-shot CLIP.

    Parameters
    ----------
    text_embeddings : torch.Tensor, shape (C, d)
        One embedding per class prompt.
    logit_scale : float, default=100.0
        CLIP's learned temperature (``model.logit_scale.exp()``; 100 for OpenAI CLIP).
    """

    def __init__(self, text_embeddings: torch.Tensor, logit_scale: float = 100.0) -> None:
        super().__init__()
        if not isinstance(text_embeddings, torch.Tensor) or text_embeddings.ndim != 2:
            raise ValueError("text_embeddings must be a (n_classes, d) tensor")
        check_array(text_embeddings.detach(), "text_embeddings")  # finite, non-empty
        norms = text_embeddings.detach().norm(dim=1)
        if not bool((norms > 0).all()):
            zero = (norms == 0).nonzero().flatten().tolist()
            raise ValueError(f"text_embeddings rows {zero[:5]} are zero: no class direction")
        check_scalar(float(logit_scale), "logit_scale", low=0.0, low_inclusive=False)
        self.register_buffer("text", F.normalize(text_embeddings.detach().float(), dim=1))
        self.logit_scale = float(logit_scale)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, C)`` of image embeddings ``z`` ``(B, d)``."""
        return self.logit_scale * F.normalize(z, dim=1) @ self.text.to(z.dtype).T
