"""One persistence convention for every package's torch models: ``save_pretrained`` /
``from_pretrained`` through huggingface_hub's ``PyTorchModelHubMixin`` (safetensors weights
+ JSON config, a hub id or a local folder), with the project's guarantees on top.

:class:`PretrainedModelMixin` is the mixin a package's ``nn.Module`` inherits; it keeps the
hub mixin's API (the ``__init__`` arguments become ``config.json``, ``push_to_hub`` works)
and changes what a careful user expects to be different:

- saving is atomic: everything is written into a temporary folder beside the target,
  which is renamed into place at the end, so an interrupted save leaves no half-written
  model (and a kill between the two renames of a replacement is repaired by the next load
  or save, :func:`recover_directory`); an existing non-empty folder is replaced only with
  ``overwrite=True``, and then only when it holds nothing but a previous save (the files
  :attr:`PretrainedModelMixin.saved_files` names): a user's own files are never deleted;
- a local folder must hold ``config.json`` and ``model.safetensors``; a missing or corrupt
  file is an error that names it (the hub mixin only logs a warning);
- weights load strictly (every tensor present, none unexpected) and never from a pickle;
  a file with NaN or infinite weights is refused, naming the file and the tensors;
- no model card is written unless asked for (``model_card=True``).

Needs the ``torch`` extra of icml25-core (torch, huggingface_hub, safetensors).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
import shutil
import tempfile
import typing
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from huggingface_hub import PyTorchModelHubMixin, constants

from .guards import load_state_dict_file

__all__ = [
    "CONFIG_NAME",
    "WEIGHTS_NAME",
    "PretrainedModelMixin",
    "atomic_directory",
    "check_replaceable",
    "recover_directory",
]

CONFIG_NAME = constants.CONFIG_NAME
WEIGHTS_NAME = constants.SAFETENSORS_SINGLE_FILE

T = TypeVar("T", bound="PretrainedModelMixin")


class atomic_directory:
    """Write a folder atomically: ``with atomic_directory(path) as tmp: ...write into tmp...``.

    On success the temporary folder replaces ``path``; on an exception it is removed and
    ``path`` is left as it was. An existing non-empty ``path`` is an error unless
    ``overwrite=True``, and even then it is replaced only when it holds a previous save of
    the same kind: every entry in it matches one of ``contents`` (shell patterns of what
    this kind of save writes, e.g. ``("config.json", "*.safetensors")``). Anything else in
    the folder (a user's ``thesis.tex``) makes it an error naming the foreign entries, so
    nothing the package did not write is ever deleted.

    Parameters
    ----------
    path : path
        The folder to write.
    overwrite : bool
        Replace an existing non-empty folder that holds a previous save.
    contents : sequence of str, optional
        What a save of this kind holds. Without it, ``overwrite=True`` replaces any folder
        (the behaviour before core 0.2.5; deprecated, with a ``DeprecationWarning``).

    Replacing an existing folder takes two renames (``path`` aside to
    ``.<name>.old-<pid>``, the new folder into place); a process killed between them
    leaves no ``path`` but the complete previous folder beside it, which
    :func:`recover_directory` (called on entering, and by every loader) renames back.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        overwrite: bool = False,
        contents: Sequence[str] | None = None,
    ) -> None:
        self.path = Path(path)
        self.overwrite = overwrite
        self.contents = None if contents is None else tuple(contents)
        self.tmp: Path | None = None

    def __enter__(self) -> Path:
        recover_directory(self.path)
        check_replaceable(self.path, overwrite=self.overwrite, contents=self.contents)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        prefix = f".{self.path.name}.saving-{os.getpid()}-"
        self.tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=self.path.parent))
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        assert self.tmp is not None
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        old = None
        if self.path.exists() and self.contents is not None:
            try:  # again: a file may have appeared while the save was being written
                check_replaceable(self.path, overwrite=self.overwrite, contents=self.contents)
            except FileExistsError:
                shutil.rmtree(self.tmp, ignore_errors=True)
                raise
        if self.path.exists():
            old = self.path.with_name(f".{self.path.name}.old-{os.getpid()}")
            if old.exists():  # left by an earlier process of the same id
                shutil.rmtree(old)
            os.replace(self.path, old)
        os.replace(self.tmp, self.path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def check_replaceable(
    path: str | Path, *, overwrite: bool = False, contents: Sequence[str] | None = None
) -> None:
    """Refuse, before any work starts, a save into ``path`` that :class:`atomic_directory`
    would refuse: ``path`` exists and is not a folder; it is a non-empty folder and
    ``overwrite`` is false; or, with ``overwrite``, it holds an entry none of ``contents``
    (shell patterns of what this kind of save writes) matches.

    Raises
    ------
    FileExistsError
        Naming ``path`` and, for foreign entries, the first of them.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise FileExistsError(f"save_directory {str(path)!r} exists and is not a folder")
    if not path.is_dir() or not any(path.iterdir()):
        return
    if not overwrite:
        raise FileExistsError(
            f"save_directory {str(path)!r} exists and is not empty; pass overwrite=True to "
            "replace it"
        )
    if contents is None:
        warnings.warn(
            "atomic_directory(overwrite=True) without contents= replaces any folder; name "
            "what a save holds so that a user's own files are never deleted",
            DeprecationWarning,
            stacklevel=3,
        )
        return
    foreign = sorted(
        e.name
        for e in path.iterdir()
        if not any(fnmatch.fnmatchcase(e.name, pattern) for pattern in contents)
    )
    if foreign:
        shown = ", ".join(foreign[:5]) + (" ..." if len(foreign) > 5 else "")
        raise FileExistsError(
            f"save_directory {str(path)!r} holds files this save did not write ({shown}); "
            "overwrite=True replaces only a folder that holds a previous save: choose "
            "another folder"
        )


def _pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (POSIX; elsewhere only this process counts)."""
    if pid == os.getpid():
        return True
    if os.name != "posix":
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def _leftovers(path: Path, kind: str) -> list[Path]:
    """``.<name>.<kind>-<pid>...`` siblings of ``path`` whose process is gone."""
    prefix = f".{path.name}.{kind}-"
    found = []
    if path.parent.is_dir():
        for entry in path.parent.iterdir():
            if entry.name.startswith(prefix):
                pid = entry.name[len(prefix) :].split("-", 1)[0]
                if pid.isdigit() and not _pid_alive(int(pid)):
                    found.append(entry)
    return found


def recover_directory(path: str | Path) -> bool:
    """Repair what an :class:`atomic_directory` save killed part-way left beside ``path``.

    If ``path`` is missing and a dead process's ``.<name>.old-<pid>`` (the previous
    complete folder, moved aside just before the new one was to be renamed in) exists,
    it is renamed back to ``path``. Leftover ``.old-`` folders next to an existing
    ``path`` (the kill came after the new folder was in place) and the temporary
    ``.saving-`` folders of dead processes are removed.

    Parameters
    ----------
    path : path
        The folder a save writes or a loader reads.

    Returns
    -------
    bool
        Whether a previous folder was restored.
    """
    path = Path(path)
    olds = sorted(_leftovers(path, "old"), key=lambda p: p.stat().st_mtime)
    restored = False
    if olds and not path.exists():
        os.replace(olds.pop(), path)
        restored = True
    for stale in olds + _leftovers(path, "saving"):
        shutil.rmtree(stale, ignore_errors=True)
    return restored


def _looks_local(name: str) -> bool:
    """A path rather than a hub id (``name`` or ``owner/name``)."""
    return (
        name.startswith((".", "/", "~"))
        or name.count("/") > 1
        or (os.sep != "/" and os.sep in name)
    )


class PretrainedModelMixin(PyTorchModelHubMixin):
    """``save_pretrained`` / ``from_pretrained`` for a package's ``torch.nn.Module``.

    Inherit it after ``nn.Module`` (``class Net(nn.Module, PretrainedModelMixin)``); the
    ``__init__`` arguments (JSON types, or a dataclass ``config``) are what ``config.json``
    stores. See the module docstring for what differs from huggingface_hub's mixin.
    """

    saved_files: tuple[str, ...] = (CONFIG_NAME, WEIGHTS_NAME, "README.md")
    """What a save holds (shell patterns): ``save_pretrained(overwrite=True)`` replaces only
    a folder holding nothing else. A subclass that writes more files extends it."""

    def __init_subclass__(cls, *args: Any, **kwargs: Any) -> None:
        super().__init_subclass__(*args, **kwargs)
        # resolve string annotations (``from __future__ import annotations``), so that a
        # dataclass ``config`` argument is rebuilt from config.json, not passed as a dict
        try:
            hints = typing.get_type_hints(cls.__init__)
        except (NameError, TypeError):
            hints = {}
        cls._hub_mixin_init_parameters = {
            name: p.replace(annotation=hints.get(name, p.annotation))
            for name, p in cls._hub_mixin_init_parameters.items()
        }

    def save_pretrained(  # type: ignore[override]
        self,
        save_directory: str | Path,
        *,
        overwrite: bool = False,
        model_card: bool = False,
        **kwargs: Any,
    ) -> str | None:
        """Write ``config.json`` and ``model.safetensors`` into ``save_directory`` atomically.

        Parameters
        ----------
        save_directory : path
            The folder; created, or replaced when ``overwrite=True``.
        overwrite : bool
            Replace an existing folder that holds a previous save (default: refuse); a
            folder holding other files (not in :attr:`saved_files`) is never replaced.
        model_card : bool
            Also write huggingface_hub's generated ``README.md`` model card.
        **kwargs
            Passed to ``PyTorchModelHubMixin.save_pretrained`` (``config``,
            ``push_to_hub``, ``repo_id``...).

        Returns
        -------
        pathlib.Path or str
            The folder; with ``push_to_hub=True``, the hub mixin's commit URL.
        """
        target = Path(save_directory)
        with atomic_directory(target, overwrite=overwrite, contents=self.saved_files) as tmp:
            if not model_card:
                (tmp / "README.md").write_text("")  # the hub mixin writes none over a file
            result = super().save_pretrained(tmp, **kwargs)
            if not model_card:
                (tmp / "README.md").unlink()
        return target if result is None else result

    @classmethod
    def from_pretrained(  # type: ignore[override]
        cls: type[T], pretrained_model_name_or_path: str | Path, **kwargs: Any
    ) -> T:
        """Load a model from a local folder or a hub id (``revision=``, ``cache_dir=``...).

        A local folder must hold ``config.json`` and ``model.safetensors``. Weights load
        with ``strict=True`` unless told otherwise and ``map_location`` (default ``"cpu"``)
        places them.
        """
        path = Path(pretrained_model_name_or_path)
        recover_directory(path)
        if path.is_dir():
            missing = [n for n in (CONFIG_NAME, WEIGHTS_NAME) if not (path / n).is_file()]
            if missing:
                raise FileNotFoundError(
                    f"pretrained_model_name_or_path {str(path)!r} is a folder without "
                    f"{' and '.join(missing)}; it must hold the files save_pretrained writes"
                )
            try:
                config = json.loads((path / CONFIG_NAME).read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError) as err:
                raise ValueError(f"{path / CONFIG_NAME} is not valid JSON: {err}") from None
            cls._check_config_keys(config, path / CONFIG_NAME)
        elif _looks_local(str(pretrained_model_name_or_path)):
            raise FileNotFoundError(
                f"pretrained_model_name_or_path {str(path)!r} is not a folder (nor a hub id "
                "of the form 'name' or 'owner/name')"
            )
        kwargs.setdefault("strict", True)
        try:
            return super().from_pretrained(pretrained_model_name_or_path, **kwargs)
        except TypeError as err:
            raise ValueError(
                f"{path / CONFIG_NAME} does not describe a {cls.__name__}: {err}"
            ) from None

    @classmethod
    def _check_config_keys(cls, config: Any, where: Path) -> None:
        """Refuse a config.json with fields the model does not take (a newer or other
        model's file), which huggingface_hub would drop silently."""
        if not isinstance(config, dict):
            raise ValueError(f"{where} must hold a JSON object, got {type(config).__name__}")
        params = cls._hub_mixin_init_parameters
        known = set(params) - {"self"}
        annotation = params["config"].annotation if "config" in params else None
        for candidate in typing.get_args(annotation) or (annotation,):
            if dataclasses.is_dataclass(candidate):
                known |= {f.name for f in dataclasses.fields(candidate)}
        unknown = sorted(set(config) - known)
        if unknown and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            raise ValueError(f"unknown fields in {where} for {cls.__name__}: {unknown}")

    @classmethod
    def _from_pretrained(
        cls, *, model_id: str, map_location: str = "cpu", strict: bool = True, **kwargs
    ):
        """Build the model from the config and load ``model.safetensors`` (never a pickle)."""
        from huggingface_hub import hf_hub_download

        hub_args = {
            k: kwargs.pop(k)
            for k in (
                "revision",
                "cache_dir",
                "force_download",
                "local_files_only",
                "token",
                "proxies",  # huggingface_hub < 1.0 passes these two as well
                "resume_download",
            )
            if k in kwargs
        }
        model = cls(**kwargs)
        if os.path.isdir(model_id):
            model_file = os.path.join(model_id, WEIGHTS_NAME)
        else:
            model_file = hf_hub_download(repo_id=model_id, filename=WEIGHTS_NAME, **hub_args)
        load_state_dict_file(model, model_file, strict=strict)
        return model.to(map_location)
