"""The resumable part of a training checkpoint: optimizer and sampler state.

A checkpoint folder is a :meth:`~otp_map.NeuralOT.save_pretrained` folder plus
``optimizer.safetensors`` (every optimizer's state tensors and the random generator's state)
and ``training_state.json`` (the step, and each optimizer's ``param_groups`` and the names
of its state tensors). Tensors and JSON only: nothing is unpickled.
"""

from __future__ import annotations

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
    (folder / STATE).write_text(json.dumps({"step": step, "optimizers": meta}))


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
