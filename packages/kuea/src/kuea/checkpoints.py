"""Checkpoints of an alignment run: atomic, pickle-free, resumable.

Layout of ``checkpoint_dir``::

    reference/tower.safetensors     the frozen copy f0 (written once, at the start)
    step-0000100/tower.safetensors  the trained tower
    step-0000100/extra.safetensors  kernel parameters, projection head, torch CPU RNG
    step-0000100/optimizer.pt       AdamW state (read with torch.load(weights_only=True))
    step-0000100/state.json         step, history, the run's settings

Each folder is written into a temporary folder and renamed into place, so an interrupted
save leaves the previous checkpoint intact.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from icml25_core import check_state_dict
from icml25_core.hub import atomic_directory

__all__ = ["Checkpoints", "latest_checkpoint"]

_STEP = re.compile(r"^step-(\d{7})$")
_CHECKPOINT_FILES = ("tower.safetensors", "extra.safetensors", "optimizer.pt", "state.json")


def latest_checkpoint(checkpoint_dir: str | Path) -> Path | None:
    """The newest ``step-NNNNNNN`` folder in ``checkpoint_dir`` (None if there is none)."""
    root = Path(checkpoint_dir)
    if not root.is_dir():
        return None
    found = sorted(p for p in root.iterdir() if p.is_dir() and _STEP.match(p.name))
    return found[-1] if found else None


def _state(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().contiguous().cpu() for k, v in module.state_dict().items()}


def _load(path: Path) -> dict[str, torch.Tensor]:
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError) as err:
        raise ValueError(f"checkpoint file {str(path)!r} is missing or corrupt: {err}") from err


def _restore(module: nn.Module, state: dict[str, torch.Tensor], source: Any) -> None:
    """Load ``state`` into ``module`` after checking keys, shapes and finiteness (errors
    name ``source``: a checkpoint of another model, or damaged weights)."""
    check_state_dict(module, state, source)
    module.load_state_dict(state)


class Checkpoints:
    """Saves and restores one run's checkpoints in ``root`` (see the module docstring)."""

    def __init__(self, root: Path, settings: dict[str, Any], keep: int) -> None:
        self.root, self.settings, self.keep = root, settings, keep

    def restore(self, resume, tower, frozen, optimizer, kernel, head):
        """Load the latest checkpoint into the modules (``resume=True``) and return
        ``(step, history)``; write the reference tower and return None for a new run."""
        last = latest_checkpoint(self.root)
        if last is None:
            if (
                self.root.exists()
                and any(self.root.iterdir())
                and not (resume and (self.root / "reference").is_dir())
            ):
                raise FileExistsError(
                    f"checkpoint_dir {str(self.root)!r} is not empty and holds no checkpoint "
                    "to resume: pass an empty or new folder"
                )
            if not (self.root / "reference").is_dir():
                with atomic_directory(self.root / "reference") as tmp:
                    save_file(_state(frozen), str(tmp / "tower.safetensors"))
            return None
        if not resume:
            raise FileExistsError(
                f"checkpoint_dir {str(self.root)!r} already holds checkpoints (latest "
                f"{last.name}): pass resume=True to continue that run, or a new folder"
            )
        state_file = last / "state.json"
        try:
            state = json.loads(state_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ValueError(f"checkpoint file {str(state_file)!r} is corrupt: {err}") from None
        if (
            not isinstance(state, dict)
            or not isinstance(state.get("settings"), dict)
            or not isinstance(state.get("step"), int)
            or not isinstance(state.get("history"), dict)
        ):
            raise ValueError(
                f"checkpoint file {str(state_file)!r} is corrupt: it must hold a JSON object "
                "with 'step' (int), 'history' and 'settings' (objects)"
            )
        diff = {
            k: (state["settings"].get(k), v)
            for k, v in self.settings.items()
            if state["settings"].get(k) != v
        }
        if diff:
            shown = ", ".join(f"{k}: checkpoint {a!r} vs now {b!r}" for k, (a, b) in diff.items())
            raise ValueError(f"cannot resume {str(last)!r} with different settings ({shown})")
        device = next(tower.parameters()).device
        _restore(tower, _load(last / "tower.safetensors"), last / "tower.safetensors")
        reference = self.root / "reference" / "tower.safetensors"
        _restore(frozen, _load(reference), reference)
        extra_file = last / "extra.safetensors"
        extra = _load(extra_file)
        for prefix, module in (("kernel.", kernel), ("head.", head)):
            if module is not None:
                part = {k[len(prefix) :]: v for k, v in extra.items() if k.startswith(prefix)}
                _restore(module, part, f"{extra_file} ({prefix[:-1]})")
        rng = extra.get("rng")
        if rng is None or rng.dtype != torch.uint8 or rng.ndim != 1:
            raise ValueError(f"checkpoint file {str(extra_file)!r} lacks the RNG state 'rng'")
        opt_file = last / "optimizer.pt"
        try:
            opt_state = torch.load(opt_file, map_location=device, weights_only=True)
            optimizer.load_state_dict(opt_state)
        except Exception as err:  # torch raises several types for a damaged file
            raise ValueError(
                f"checkpoint file {str(opt_file)!r} is missing, corrupt or belongs to another "
                f"model: {err}"
            ) from None
        torch.set_rng_state(rng)
        return state["step"], state["history"]

    def save(self, step, history, tower, frozen, optimizer, kernel, head) -> Path:
        """Write ``step-NNNNNNN`` atomically and prune older checkpoints."""
        target = self.root / f"step-{step:07d}"
        with atomic_directory(target, overwrite=True, contents=_CHECKPOINT_FILES) as tmp:
            save_file(_state(tower), str(tmp / "tower.safetensors"))
            extra = {"rng": torch.get_rng_state()}
            if kernel is not None:
                extra.update({f"kernel.{k}": v for k, v in _state(kernel).items()})
            if head is not None:
                extra.update({f"head.{k}": v for k, v in _state(head).items()})
            save_file(extra, str(tmp / "extra.safetensors"))
            torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
            state = {"step": step, "history": history, "settings": self.settings}
            (tmp / "state.json").write_text(json.dumps(state))
        old = sorted(p for p in self.root.iterdir() if p.is_dir() and _STEP.match(p.name))
        for p in old[: -self.keep]:
            shutil.rmtree(p, ignore_errors=True)
        return target
