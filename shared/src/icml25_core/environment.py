"""A record of where a result was measured."""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import sys


def environment(*distributions: str) -> dict[str, str]:
    """Python, platform, CPU model and count, NumPy/torch versions, device and given
    distributions.

    torch is reported only if it is already imported, so recording the environment never
    pays torch's import time; with it, the vector instructions its CPU kernels use
    (``cpu_capability``, e.g. ``AVX512``) and whether the CPU computes in bfloat16
    natively (``cpu_bf16``: AVX512-BF16 / AMX on x86), which decide how fast its
    low-precision kernels are.
    """
    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
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
        env["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        bf16 = getattr(torch.cpu, "_is_avx512_bf16_supported", None)  # x86 builds only
        env["cpu_bf16"] = "unknown" if bf16 is None else str(bool(bf16()))
    return env


def _cpu_model() -> str:
    """The CPU's model name (Linux: ``/proc/cpuinfo``), else what the platform reports."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
