"""A record of where a result was measured."""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import sys


def environment(*distributions: str) -> dict[str, str]:
    """Python, platform, CPU count, NumPy/torch versions, device and given distributions.

    torch is reported only if it is already imported, so recording the environment never
    pays torch's import time.
    """
    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": str(os.cpu_count()),
    }
    for dist in ("numpy", "icml25-core", *distributions):
        try:
            env[dist] = md.version(dist)
        except md.PackageNotFoundError:
            env[dist] = "not installed"
    torch = sys.modules.get("torch")
    if torch is not None:
        env["torch"] = torch.__version__
        env["cuda"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return env
