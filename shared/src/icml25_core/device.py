"""Device choice for torch code (cuda, then mps, then cpu) and a torch runtime quirk."""

from __future__ import annotations

import contextlib
import os
import warnings

_VALID = ("cuda", "mps", "cpu")


def select_device(preference: str | None = "auto") -> str:
    """Name of the best available torch device.

    Parameters
    ----------
    preference : {"auto", "cuda", "cuda:N", "mps", "cpu"} or None
        A device to insist on, or ``"auto"`` (the same as ``None``): the device named by
        ``ICML25_DEVICE`` in the environment if set, otherwise cuda, then mps, then cpu,
        whichever is available. A package's ``device="auto"`` parameter passes straight in.

    Returns
    -------
    str
        ``"cuda"``, ``"mps"`` or ``"cpu"``. Without torch installed, always ``"cpu"``.
    """
    if preference is not None and not isinstance(preference, str):
        raise TypeError(
            f"preference must be a device name such as 'auto', 'cpu' or 'cuda:0', got "
            f"{preference!r} ({type(preference).__name__}); for GPU 7 pass 'cuda:7'"
        )
    if preference == "auto":
        preference = None
    preference = preference or os.environ.get("ICML25_DEVICE") or None
    if preference == "auto":
        preference = None
    if preference is not None and preference.split(":")[0] not in _VALID:
        raise ValueError(
            f"preference must be 'auto' or one of {_VALID} (or 'cuda:N'), got {preference!r}"
        )
    try:
        import torch
    except ImportError as err:
        if preference not in (None, "cpu"):
            raise RuntimeError(
                f"device {preference!r} requested but torch is not installed"
            ) from err
        return "cpu"
    available = {
        "cuda": torch.cuda.is_available(),
        "mps": getattr(torch.backends, "mps", None) is not None
        and torch.backends.mps.is_available(),
        "cpu": True,
    }
    if preference is not None:
        if not available[preference.split(":")[0]]:
            raise RuntimeError(f"device {preference!r} requested but it is not available here")
        return preference
    return next(name for name in _VALID if available[name])


@contextlib.contextmanager
def quiet_forward_mode():
    """Silence the ``FutureWarning`` torch's forward-mode autograd raises on its first use
    (``torch.func.jvp`` / ``jacfwd`` script their decompositions with the deprecated
    ``torch.jit.script``); only that warning, only inside the block."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "`torch.jit.script` is deprecated", FutureWarning)
        yield
