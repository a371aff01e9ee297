"""Task experts as staged backbones: a stem, named stages run one after another, a pooled
feature. DISC edits the main expert's feature maps between stages, so an expert must be
callable stage by stage.

- :class:`StagedExpert`: the interface (``stem``, ``stages`` an ordered ``ModuleDict``,
  global average pooling, a linear ``head`` for the expert's own task).
- :func:`from_resnet`: a torchvision or timm ResNet (``conv1``, ``bn1``, ``relu`` /
  ``act1``, ``maxpool``, ``layer1..layer4``, ``fc``), its modules shared, not copied.
- :func:`from_feature_net`: a timm ``features_only`` model (``FeatureListNet`` /
  ``FeatureDictNet``, or ``EfficientNetFeatures`` / ``MobileNetV3Features``), one stage
  per tap.
- :class:`TinyResNet`: a small ResNet for 8x8 to 64x64 images, the experiment's experts.
"""

from __future__ import annotations

import torch
from torch import nn

from icml25_core import check_scalar

__all__ = ["StagedExpert", "TinyResNet", "from_feature_net", "from_resnet"]


class StagedExpert(nn.Module):
    """A backbone run stage by stage, with a linear head for its own task.

    Parameters
    ----------
    stem : nn.Module
        Input images ``(B, C, H, W)`` to the first stage's input.
    stages : mapping of str to nn.Module
        The stages in order (e.g. ``layer1..layer4``), each mapping the previous output
        to a feature map ``(B, C_l, H_l, W_l)``.
    head : nn.Module
        Pooled feature ``(B, C_last)`` to the expert's own logits.
    """

    def __init__(self, stem: nn.Module, stages: dict[str, nn.Module], head: nn.Module) -> None:
        super().__init__()
        if not stages:
            raise ValueError("stages must name at least one stage")
        self.stem = stem
        self.stages = nn.ModuleDict(stages)
        self.head = head

    @property
    def stage_names(self) -> list[str]:
        """The stage names, in order."""
        return list(self.stages)

    def features(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every stage's output and the pooled feature (``"pooled"``, ``(B, C_last)``)."""
        out = {}
        h = self.stem(x)
        for name, stage in self.stages.items():
            h = stage(h)
            out[name] = h
        out["pooled"] = h.mean(dim=(-2, -1))
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The expert's own logits."""
        return self.head(self.features(x)["pooled"])


def from_resnet(model: nn.Module, stages=("layer1", "layer2", "layer3", "layer4")) -> StagedExpert:
    """A torchvision or timm ResNet as a :class:`StagedExpert` (its modules, not copies;
    the ``fc`` head kept, or an identity when the model has none)."""
    missing = [n for n in ("conv1", "bn1", "maxpool", *stages) if not hasattr(model, n)]
    act = getattr(model, "relu", None) or getattr(model, "act1", None)
    if missing or act is None:
        raise TypeError(
            f"model is not a torchvision/timm ResNet: it lacks {missing or ['relu or act1']}; "
            "build a StagedExpert from its stem and stages instead"
        )
    stem = nn.Sequential(model.conv1, model.bn1, act, model.maxpool)
    head = getattr(model, "fc", None) or nn.Identity()
    return StagedExpert(stem, {n: getattr(model, n) for n in stages}, head)


def from_feature_net(model: nn.Module) -> StagedExpert:
    """A timm ``features_only`` model (``timm.create_model(name, features_only=True)``) as a
    :class:`StagedExpert`, one stage per tapped feature; no head (the pooled feature of the
    last tap is the output). The modules are shared, not copied. Two layouts:

    - ``FeatureListNet`` / ``FeatureDictNet`` (ResNets, ConvNeXts, RegNets, ...): an
      ``nn.ModuleDict`` run in order, cut after each module of ``return_layers``; stages
      named by those modules.
    - ``EfficientNetFeatures`` / ``MobileNetV3Features`` (EfficientNets, MobileNets, ...):
      a stem (``conv_stem``, ``bn1``, ``act1`` when present), then ``blocks`` run in order,
      cut where ``feature_info`` taps (its ``stage`` 0 is the stem's output, stage ``k`` the
      output of ``blocks[k-1]``); stages named by ``feature_info.module_name()`` with dots
      as underscores (``"blocks_2"``). Only the default ``feature_location="bottleneck"``
      (features are block outputs); hooked feature locations are refused.

    ``features(x)[name]`` equals the model's own output for that tap.
    """
    taps = getattr(model, "return_layers", None)
    if isinstance(model, nn.ModuleDict) and taps:
        ends = [name for name in model if name in taps]
        return _cut(list(model.items()), ends, ends)
    blocks = getattr(model, "blocks", None)
    info = getattr(model, "feature_info", None)
    if (
        isinstance(blocks, nn.Sequential)
        and hasattr(info, "get_dicts")
        and hasattr(model, "conv_stem")
    ):
        if getattr(model, "feature_hooks", None) is not None:
            raise ValueError(
                "model taps hooked feature locations (feature_location other than "
                "'bottleneck'): its features are not stage outputs; build it with the default"
            )
        stem = [(n, getattr(model, n)) for n in ("conv_stem", "bn1", "act1") if hasattr(model, n)]
        ordered = stem + [(f"blocks.{i}", b) for i, b in enumerate(blocks)]
        taps = info.get_dicts(keys=("stage", "module"))
        ends = [stem[-1][0] if t["stage"] == 0 else f"blocks.{t['stage'] - 1}" for t in taps]
        names = [t["module"].replace(".", "_") for t in taps]
        return _cut(ordered, ends, names)
    raise TypeError(
        "model is not a timm features_only network (a FeatureListNet / FeatureDictNet, or an "
        "EfficientNetFeatures-like conv_stem + blocks model); use from_resnet or build a "
        "StagedExpert from its stages"
    )


def _cut(ordered: list[tuple[str, nn.Module]], ends: list[str], names: list[str]) -> StagedExpert:
    """Modules run in ``ordered`` order, cut after each of ``ends``; the modules after the
    last cut are dropped (the model never runs them for its features)."""
    stages, group, cut = {}, [], iter(zip(ends, names, strict=True))
    end, name = next(cut)
    for module_name, module in ordered:
        group.append(module)
        if module_name == end:
            stages[name] = group[0] if len(group) == 1 else nn.Sequential(*group)
            group = []
            end, name = next(cut, (None, None))
    return StagedExpert(nn.Identity(), stages, nn.Identity())


class _Block(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = (
            nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))
            if stride != 1 or c_in != c_out
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(h)) + self.shortcut(x))


class TinyResNet(StagedExpert):
    """A ResNet with one basic block per stage: a 3x3 stem, stages ``layer1..`` of
    ``widths`` channels (the first at stride 1, the others at stride 2), a linear head.

    Parameters
    ----------
    num_classes : int
        Classes of the expert's own task.
    widths : sequence of int
        Channels per stage (default ``(16, 32, 64)``: three stages).
    in_channels : int
        Image channels (1 for digits).
    """

    def __init__(self, num_classes: int, widths=(16, 32, 64), in_channels: int = 1) -> None:
        check_scalar(num_classes, "num_classes", integer=True, low=1)
        check_scalar(in_channels, "in_channels", integer=True, low=1)
        widths = tuple(int(w) for w in widths)
        if not widths or min(widths) < 1:
            raise ValueError(f"widths must be positive channel counts, got {widths}")
        stem = nn.Sequential(
            nn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=False),
            nn.BatchNorm2d(widths[0]),
            nn.ReLU(),
        )
        stages, c_in = {}, widths[0]
        for i, w in enumerate(widths):
            stages[f"layer{i + 1}"] = _Block(c_in, w, 1 if i == 0 else 2)
            c_in = w
        super().__init__(stem, stages, nn.Linear(c_in, num_classes))
