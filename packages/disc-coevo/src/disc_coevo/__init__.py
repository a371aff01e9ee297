"""disc-coevo: socialized coevolution of task experts with Dynamic Information
Socialized Collaboration (DISC, ICML 2025).

Two pretrained experts for different tasks help each other: a main expert learns a task
while a frozen auxiliary expert's stage features are mapped into its own stages
(dynamic hierarchical collaboration, exactly zero at initialization), and the two pooled
features are fused with weights from confidence networks that estimate each expert's
true-class probability (dynamic selective collaboration). :class:`Socialized` holds the
pair; :func:`train` and :func:`coevolve` train one or both directions; experts are any
backbone that runs stage by stage (:class:`StagedExpert`, :func:`from_resnet` for
torchvision / timm ResNets, :class:`TinyResNet`).
"""

from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from icml25_core.lazy import lazy_exports

if TYPE_CHECKING:  # the public API, imported on first use (the entry point stays light)
    from .collaboration import (
        ConfidenceNet,
        CosineSchedule,
        HierarchicalCollaboration,
        fusion_weights,
        stage_transform,
    )
    from .data import TASKS, DigitsSplit, digits_split
    from .experts import StagedExpert, TinyResNet, from_feature_net, from_resnet
    from .socialized import FUSIONS, Socialized
    from .training import (
        OPTIMIZERS,
        RELEASE_SGD,
        SCHEDULES,
        accuracy,
        coevolve,
        load_weights,
        save_weights,
        train,
    )

__getattr__, __dir__ = lazy_exports(__name__, __file__)

__version__ = _version("disc-coevo")

__all__ = [
    "FUSIONS",
    "OPTIMIZERS",
    "RELEASE_SGD",
    "SCHEDULES",
    "TASKS",
    "ConfidenceNet",
    "CosineSchedule",
    "DigitsSplit",
    "HierarchicalCollaboration",
    "Socialized",
    "StagedExpert",
    "TinyResNet",
    "__version__",
    "accuracy",
    "coevolve",
    "digits_split",
    "from_feature_net",
    "from_resnet",
    "fusion_weights",
    "load_weights",
    "save_weights",
    "stage_transform",
    "train",
]
