"""``Socialized``: a main expert that learns a task with a frozen auxiliary expert's help
(DISC), and the ablations of the experiment.

The auxiliary expert is frozen (eval mode, its features computed without gradient, left
out of :meth:`Socialized.trainable_parameters`; the caller's module is not altered, so the
same expert can be the main one of another pair); the main expert, the
collaboration transforms, the task head, the confidence networks and an auxiliary probe
head train. Losses (:meth:`Socialized.loss`): cross-entropy of the fused logits (the task;
it reaches the main expert, the transforms and the head), cross-entropy of a linear probe
on the detached auxiliary feature, and the confidence networks' regression of each
expert's true-class probability (the task head on the main feature, the probe on the
auxiliary one; targets detached). The fusion weights are detached, so the task loss
sends no gradient to the confidence networks.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from icml25_core import check_choice, check_scalar

from .collaboration import ConfidenceNet, HierarchicalCollaboration, fusion_weights
from .experts import StagedExpert

__all__ = ["FUSIONS", "Socialized"]

FUSIONS = ("disc", "mean", "concat", "none")


class Socialized(nn.Module):
    """DISC around a main and an auxiliary :class:`~disc_coevo.experts.StagedExpert`.

    Parameters
    ----------
    main, aux : StagedExpert
        The learning expert (trained in place: pass a copy to keep the original) and the
        helping one (frozen here without changing its ``requires_grad`` flags).
    num_classes : int
        Classes of the task the main expert learns.
    input_shape : (C, H, W)
        One input's shape; a forward pass on zeros reads every stage's real shape.
    stages : sequence of str, optional
        Main stages that receive auxiliary features (default: all but the last, as the
        release's ``layer1..layer3`` of four); ``()`` turns hierarchical collaboration off.
    sources : mapping, optional
        Auxiliary stages summed into each main stage (default: those up to its depth).
    lam : float or callable
        The collaboration weight, or ``step -> weight`` (e.g.
        :class:`~disc_coevo.collaboration.CosineSchedule`); ``step`` is :attr:`step`,
        which :func:`~disc_coevo.training.train` advances. Default 0.59, as released.
    fusion : {"disc", "mean", "concat", "none"}
        Pooled features: DISC's selective fusion, a fixed 0.5/0.5 mean, concatenation, or
        the main feature alone.
    head : nn.Module, optional
        The task head (default: a new linear layer); pass the main expert's own head to
        keep training it on its existing task.
    """

    def __init__(
        self,
        main: StagedExpert,
        aux: StagedExpert,
        num_classes: int,
        input_shape: tuple[int, int, int],
        *,
        stages=None,
        sources=None,
        lam: float | Callable[[int], float] = 0.59,
        fusion: str = "disc",
        head: nn.Module | None = None,
    ) -> None:
        super().__init__()
        for name, expert in (("main", main), ("aux", aux)):
            if not isinstance(expert, StagedExpert):
                raise TypeError(
                    f"{name} must be a StagedExpert (wrap a ResNet with from_resnet, or build one from "
                    f"its stem and stages), got {type(expert).__name__}"
                )
        check_scalar(num_classes, "num_classes", integer=True, low=1)
        check_choice(fusion, "fusion", FUSIONS)
        if not callable(lam):
            check_scalar(lam, "lam")
        self.main, self.aux = main, aux
        self.fusion, self.lam, self.step = fusion, lam, 0
        shapes_main, shapes_aux, d_main, d_aux = _shapes(main, aux, input_shape)
        if stages is None:
            stages = main.stage_names[:-1]
        self.stages = list(stages)
        self.collaboration = (
            HierarchicalCollaboration(shapes_main, shapes_aux, self.stages, sources)
            if self.stages
            else None
        )
        if fusion in ("disc", "mean") and d_main != d_aux:
            raise ValueError(
                f"fusion={fusion!r} adds pooled features of equal width; main has {d_main} channels, "
                f"aux {d_aux}: use fusion='concat' or experts of equal final width"
            )
        width = d_main + d_aux if fusion == "concat" else d_main
        self.head = head if head is not None else nn.Linear(width, num_classes)
        self.aux_probe = nn.Linear(d_aux, num_classes)
        self.confidence_main = ConfidenceNet(d_main)
        self.confidence_aux = ConfidenceNet(d_aux)
        ref = next(main.parameters())  # the new modules in the main expert's dtype and device
        for module in (
            self.collaboration,
            self.head,
            self.aux_probe,
            self.confidence_main,
            self.confidence_aux,
        ):
            if module is not None:
                module.to(ref)

    def train(self, mode: bool = True) -> Socialized:
        super().train(mode)
        self.aux.eval()  # frozen: its BatchNorm statistics never move
        return self

    def trainable_parameters(self) -> list[nn.Parameter]:
        """The parameters an optimizer updates: everything but the auxiliary expert's
        (and those the caller froze)."""
        frozen = {id(p) for p in self.aux.parameters()}
        return [p for p in self.parameters() if p.requires_grad and id(p) not in frozen]

    def lam_now(self) -> float:
        """The collaboration weight at the current :attr:`step`."""
        return float(self.lam(self.step)) if callable(self.lam) else float(self.lam)

    def outputs(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Everything one forward pass computes: ``logits`` (the task), ``main_feature``,
        ``aux_feature``, ``probe_logits`` and, with DISC fusion, ``tcp_main``,
        ``tcp_aux`` (each ``(B,)``) and ``weights`` ``(B, 2)``."""
        with torch.no_grad():
            aux = self.aux.features(x)
        h = self.main.stem(x)
        lam = self.lam_now()
        for name, stage in self.main.stages.items():
            h = stage(h)
            if self.collaboration is not None and name in self.collaboration.sources:
                h = h + lam * self.collaboration(name, aux)
        f_main, f_aux = h.mean(dim=(-2, -1)), aux["pooled"]
        out = {"main_feature": f_main, "aux_feature": f_aux, "probe_logits": self.aux_probe(f_aux)}
        if self.fusion == "disc":
            out["tcp_main"] = self.confidence_main(f_main.detach()).squeeze(-1)
            out["tcp_aux"] = self.confidence_aux(f_aux).squeeze(-1)
            w = fusion_weights(out["tcp_main"], out["tcp_aux"]).detach()
            out["weights"] = w
            fused = w[:, :1] * f_main + w[:, 1:] * f_aux
        elif self.fusion == "mean":
            fused = 0.5 * f_main + 0.5 * f_aux
        elif self.fusion == "concat":
            fused = torch.cat([f_main, f_aux], dim=1)
        else:
            fused = f_main
        out["logits"] = self.head(fused)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Task logits ``(B, num_classes)``."""
        return self.outputs(x)["logits"]

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        """The training loss and its parts (see the module docstring)."""
        out = self.outputs(x)
        parts = {
            "task": F.cross_entropy(out["logits"], y),
            "probe": F.cross_entropy(out["probe_logits"], y),
        }
        if self.fusion == "disc":
            with torch.no_grad():
                target_main = torch.softmax(self.head(out["main_feature"]), 1).gather(
                    1, y[:, None]
                )[:, 0]
                target_aux = torch.softmax(out["probe_logits"], 1).gather(1, y[:, None])[:, 0]
            parts["confidence"] = F.mse_loss(out["tcp_main"], target_main) + F.mse_loss(
                out["tcp_aux"], target_aux
            )
        total = sum(parts.values())
        return total, {k: float(v.detach()) for k, v in parts.items()}


def _shapes(main: StagedExpert, aux: StagedExpert, input_shape):
    """Stage shapes ``{name: (C, H, W)}`` of both experts and their pooled widths, from a
    forward pass on zeros (in eval mode; the modes are restored)."""
    if len(tuple(input_shape)) != 3:
        raise ValueError(f"input_shape must be (C, H, W), got {tuple(input_shape)}")
    shapes, widths = [], []
    for expert in (main, aux):
        param = next(expert.parameters())
        was = expert.training
        expert.eval()
        with torch.no_grad():
            try:
                feats = expert.features(
                    torch.zeros(1, *input_shape, dtype=param.dtype, device=param.device)
                )
            except RuntimeError as err:
                raise ValueError(
                    f"input_shape {tuple(input_shape)} does not fit the expert: {err}"
                ) from err
        expert.train(was)
        widths.append(feats.pop("pooled").shape[1])
        shapes.append({k: tuple(v.shape[1:]) for k, v in feats.items()})
    return shapes[0], shapes[1], widths[0], widths[1]
