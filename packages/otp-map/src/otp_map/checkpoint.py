"""The resumable part of a training checkpoint: optimizer and sampler state.

A checkpoint folder is a :meth:`~otp_map.NeuralOT.save_pretrained` folder plus
``optimizer.safetensors`` (every optimizer's state tensors and the random generator's state)
and ``training_state.json`` (the step, each optimizer's ``param_groups`` and the names
of its state tensors, and a manifest: the SHA-256 of every other file of the folder).
Tensors and JSON only: nothing is unpickled.

The folder is written atomically as a whole; the manifest also catches a checkpoint put
together by hand from parts of different ones (a file copied in from another step):
:func:`verify_manifest` refuses it, naming the file.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

OPTIMIZER = "optimizer.safetensors"
STATE = "training_state.json"


def has_training_state(path: str | Path) -> bool:
    """Whether ``path`` holds a checkpoint that training can resume from."""
    return (Path(path) / STATE).is_file()


def save_training_state(
    folder: Path,
    step: int,
    optimizers: dict[str, torch.optim.Optimizer],
    generator: torch.Generator,
) -> None:
    """Write the state of ``optimizers`` (by name) and ``generator`` into ``folder``."""
    tensors, meta = {}, {}
    for name, opt in optimizers.items():
        state = opt.state_dict()
        meta[name] = {"param_groups": state["param_groups"], "state": {}}
        for idx, entries in state["state"].items():
            meta[name]["state"][str(idx)] = []
            for key, val in entries.items():
                tensors[f"{name}.{idx}.{key}"] = val.detach().cpu().contiguous()
                meta[name]["state"][str(idx)].append(key)
    tensors["generator"] = generator.get_state().cpu()
    save_file(tensors, folder / OPTIMIZER)
    manifest = {
        f.name: _digest(f) for f in sorted(folder.iterdir()) if f.is_file() and f.name != STATE
    }
    (folder / STATE).write_text(
        json.dumps({"step": step, "optimizers": meta, "manifest": manifest})
    )


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify_manifest(folder: str | Path) -> int:
    """The step of the checkpoint in ``folder`` after checking that every file its manifest
    lists is there with the content it was saved with.

    Raises
    ------
    ValueError
        If ``training_state.json`` is corrupt, or a listed file is missing or changed (the
        file is named). Checkpoints written before the manifest existed (otp-map < 0.2.2)
        are accepted unchecked.
    """
    folder = Path(folder)
    try:
        state = json.loads((folder / STATE).read_text())
        step, manifest = int(state["step"]), state.get("manifest")
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{folder / STATE} is corrupt: {err!r}") from None
    for name, digest in (manifest or {}).items():
        path = folder / name
        if not path.is_file():
            raise ValueError(f"{path} is missing from the checkpoint saved at step {step}")
        if _digest(path) != digest:
            raise ValueError(
                f"{path} is not the file saved with this checkpoint at step {step} (its content "
                "changed): the checkpoint's parts disagree; refusing to resume from it"
            )
    return step


def load_training_state(
    folder: Path, optimizers: dict[str, torch.optim.Optimizer], device: torch.device
) -> torch.Generator:
    """Restore ``optimizers`` (by name) from ``folder``; returns the restored generator.

    Raises
    ------
    ValueError
        If either file is corrupt or lacks an optimizer's entries (the file is named).
    """
    try:
        tensors = load_file(folder / OPTIMIZER, device=str(device))
    except (SafetensorError, FileNotFoundError) as err:
        raise ValueError(f"{folder / OPTIMIZER} is missing or corrupt: {err}") from None
    try:
        meta = json.loads((folder / STATE).read_text())["optimizers"]
        for name, opt in optimizers.items():
            state = {
                int(idx): {key: tensors[f"{name}.{idx}.{key}"] for key in keys}
                for idx, keys in meta[name]["state"].items()
            }
            opt.load_state_dict({"state": state, "param_groups": meta[name]["param_groups"]})
            for entries in opt.state.values():  # Adam keeps its step count on the CPU
                if "step" in entries:
                    entries["step"] = entries["step"].cpu()
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise ValueError(f"{folder / STATE} is corrupt or does not match: {err!r}") from None
    generator = torch.Generator(device=device)
    generator.set_state(tensors["generator"].cpu())
    return generator
