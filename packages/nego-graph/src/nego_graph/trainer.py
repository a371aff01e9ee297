"""The usual PyG training loop: ``fit(train_loader, val_loader)`` with early stopping on
validation accuracy, ``predict``, ``explain``, safetensors checkpoints."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import torch

from icml25_core import check_scalar, make_progress, select_device
from icml25_core.hub import atomic_directory, recover_directory

from ._compat import quiet_pyg_import
from .models import MODEL_CLASSES

with quiet_pyg_import():  # PyG's import calls the deprecated torch.jit.script
    from torch_geometric.data import Batch, Data

TRAINER_NAME = "trainer.json"


class Trainer:
    """Train any model of :mod:`nego_graph.models`.

    Parameters
    ----------
    model : torch.nn.Module
    lr, weight_decay : float
        Adam settings.
    epochs : int
        Maximum epochs.
    patience : int
        Stop after this many epochs without a better validation accuracy; the best weights
        are restored.
    device : {"auto", "cpu", "cuda", "mps"}
    seed : int
    progress : bool

    Attributes
    ----------
    history_ : dict of lists (epoch, train_loss, val_acc)
    best_epoch_, best_val_acc_
    """

    def __init__(
        self,
        model,
        lr=1e-3,
        weight_decay=0.0,
        epochs=50,
        patience=10,
        device="auto",
        seed=0,
        progress=False,
    ):
        check_scalar(lr, "lr", low=0.0, low_inclusive=False)
        check_scalar(epochs, "epochs", low=1, integer=True)
        check_scalar(patience, "patience", low=1, integer=True)
        self.device = torch.device(select_device(device))
        self.model = model.to(self.device)
        self.lr, self.weight_decay = float(lr), float(weight_decay)
        self.epochs, self.patience, self.seed = int(epochs), int(patience), int(seed)
        self.progress = bool(progress)
        self.history_ = {"epoch": [], "train_loss": [], "val_acc": []}

    def fit(self, train_loader, val_loader):
        """Train with early stopping on ``val_loader`` accuracy; returns ``self``."""
        torch.manual_seed(self.seed)
        opt = torch.optim.Adam(self.model.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        best, best_state, waited = -1.0, None, 0
        bar = make_progress(transient=True) if self.progress else None
        if bar is not None:
            bar.start()
            task = bar.add_task(type(self.model).__name__, total=self.epochs)
        try:
            for epoch in range(1, self.epochs + 1):
                self.model.train()
                total, count = 0.0, 0
                for batch in _check_loader(train_loader, "train_loader"):
                    batch = self._check(batch)
                    logits, aux = self.model(batch)
                    loss, _ = self.model.loss(batch, logits, aux)
                    if not math.isfinite(float(loss.detach())):
                        raise FloatingPointError(
                            f"training diverged at epoch {epoch} (loss {float(loss)}); "
                            f"lower lr={self.lr}"
                        )
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    total += float(loss.detach()) * batch.num_graphs
                    count += batch.num_graphs
                if count == 0:
                    raise ValueError("train_loader yielded no graphs")
                acc = self.accuracy(val_loader, name="val_loader")
                for k, v in zip(self.history_, (epoch, total / count, acc), strict=True):
                    self.history_[k].append(v)
                if acc > best:
                    best, waited = acc, 0
                    best_state = copy.deepcopy(self.model.state_dict())
                    self.best_epoch_ = epoch
                else:
                    waited += 1
                if bar is not None:
                    bar.update(task, completed=epoch)
                if waited >= self.patience:
                    break
        finally:
            if bar is not None:
                bar.stop()
        self.model.load_state_dict(best_state)
        self.best_val_acc_ = best
        return self

    @torch.no_grad()
    def predict(self, loader) -> torch.Tensor:
        """Class probabilities ``(n_graphs, n_classes)`` for every graph of ``loader``."""
        self.model.eval()
        loader = _check_loader(loader, "loader")
        out = [torch.softmax(self.model(self._check(b, need_y=False))[0], 1) for b in loader]
        if not out:
            raise ValueError("loader yielded no graphs")
        return torch.cat(out).cpu()

    @torch.no_grad()
    def accuracy(self, loader, *, name: str = "loader") -> float:
        self.model.eval()
        right = total = 0
        for b in _check_loader(loader, name):
            b = self._check(b)
            right += int((self.model(b)[0].argmax(1) == b.y.view(-1)).sum())
            total += b.num_graphs
        if total == 0:
            raise ValueError(f"{name} yielded no graphs")
        return right / total

    def _check(self, batch, need_y: bool = True):
        batch = _check_batch(batch, need_y)
        in_dim = getattr(self.model, "in_dim", None)
        if in_dim is not None and batch.x.shape[1] != in_dim:
            raise ValueError(
                f"node features must have {in_dim} columns (the model's in_dim), "
                f"got {batch.x.shape[1]}"
            )
        n_classes = getattr(self.model, "n_classes", None)
        if need_y and n_classes is not None:
            y = batch.y.view(-1)
            if int(y.min()) < 0 or int(y.max()) >= n_classes:
                raise ValueError(
                    f"labels y must be in 0..{n_classes - 1} (the model's n_classes), got "
                    f"{int(y.min())}..{int(y.max())}"
                )
        dtype = next(self.model.parameters()).dtype
        if batch.x.dtype != dtype:  # e.g. float64 features from NumPy: the model's dtype
            batch = batch.clone()
            batch.x = batch.x.to(dtype)
        return batch.to(self.device)

    def explain(self, graph: Data) -> torch.Tensor:
        """Edge importances ``(E,)`` in [0, 1] for one graph (subgraph models only)."""
        if not hasattr(self.model, "edge_importance"):
            raise TypeError(f"{type(self.model).__name__} has no edge mask to explain with")
        graph = _check_graph(graph, need_y=False)
        batch = self._check(Batch.from_data_list([graph]), need_y=False)
        return self.model.edge_importance(batch).cpu()

    def save_checkpoint(self, path, *, overwrite: bool = False) -> Path:
        """Write the model (``config.json`` + ``model.safetensors``, loadable on its own by
        ``<ModelClass>.from_pretrained``) and ``trainer.json`` (model class, history, best
        epoch, trainer settings) into the folder ``path``, atomically.

        An existing non-empty folder is replaced only with ``overwrite=True``.
        """
        name = type(self.model).__name__
        if name not in MODEL_CLASSES:
            raise TypeError(f"model must be one of {sorted(MODEL_CLASSES)}, got {name}")
        path = Path(path)
        contents = (*self.model.saved_files, TRAINER_NAME)
        with atomic_directory(path, overwrite=overwrite, contents=contents) as tmp:
            self.model.save_pretrained(tmp, overwrite=True)
            meta = {
                "model_class": name,
                "history": self.history_,
                "best_epoch": getattr(self, "best_epoch_", None),
                "best_val_acc": getattr(self, "best_val_acc_", None),
                "settings": {
                    "lr": self.lr,
                    "weight_decay": self.weight_decay,
                    "epochs": self.epochs,
                    "patience": self.patience,
                    "seed": self.seed,
                },
            }
            (tmp / TRAINER_NAME).write_text(json.dumps(meta, indent=1))
        return path

    @classmethod
    def from_checkpoint(cls, path, device="auto", progress=False) -> Trainer:
        """A trainer with the model, history and settings of a :meth:`save_checkpoint`
        folder, in a fresh process from the folder alone.

        Raises
        ------
        FileNotFoundError
            If the folder lacks ``trainer.json``, ``config.json`` or ``model.safetensors``.
        ValueError
            If ``trainer.json`` is corrupt or names an unknown model class.
        """
        path = Path(path)
        recover_directory(path)
        meta_path = path / TRAINER_NAME
        if not meta_path.is_file():
            raise FileNotFoundError(f"path {str(path)!r} has no {TRAINER_NAME}: not a checkpoint")
        try:
            meta = json.loads(meta_path.read_text())
            model_cls = MODEL_CLASSES[meta["model_class"]]
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise ValueError(f"{meta_path} is corrupt or names no known model: {err!r}") from None
        missing = sorted({"history", "best_epoch", "settings"} - set(meta))
        if missing:
            raise ValueError(
                f"{meta_path} lacks {missing}: not a trainer.json written by save_checkpoint"
            )
        if not isinstance(meta["history"], dict | list) or not isinstance(meta["settings"], dict):
            raise ValueError(f"{meta_path}: 'history' and 'settings' must be JSON objects")
        if meta["best_epoch"] is not None and (
            isinstance(meta["best_epoch"], bool) or not isinstance(meta["best_epoch"], int)
        ):
            raise ValueError(f"{meta_path}: 'best_epoch' must be an integer or null")
        model = model_cls.from_pretrained(path)
        trainer = cls(model, device=device, progress=progress, **meta["settings"])
        trainer.history_ = meta["history"]
        trainer.best_epoch_ = meta["best_epoch"]
        if meta.get("best_val_acc") is not None:
            trainer.best_val_acc_ = meta["best_val_acc"]
        return trainer


def _check_graph(g: Data, need_y: bool = True) -> Data:
    if need_y and getattr(g, "y", None) is None:
        raise ValueError("every graph must have a label y")
    if g.edge_index is None or g.edge_index.numel() == 0:
        raise ValueError("graph must have edges (edge_index is empty)")
    if g.x is None:
        raise ValueError("graph must have node features x")
    return g


def _check_loader(loader, name: str):
    """A loader of PyG batches: a list of ``Data`` (or one ``Data``) is refused with how to
    wrap it, since iterating it yields single graphs, not batches."""

    def graph(x):
        return isinstance(x, Data) and not isinstance(x, Batch)

    if isinstance(loader, Data) or (
        isinstance(loader, list | tuple) and loader and graph(loader[0])
    ):
        raise TypeError(
            f"{name} must yield batches (torch_geometric.loader.DataLoader), got a "
            f"{type(loader).__name__} of Data: wrap it, DataLoader(graphs, batch_size=32)"
        )
    return loader


def _check_batch(b, need_y: bool = True):
    if need_y and (getattr(b, "y", None) is None or b.y.numel() != b.num_graphs):
        raise ValueError("every graph must have a label y")
    if b.edge_index is None or b.edge_index.numel() == 0:
        raise ValueError("graphs must have edges (edge_index is empty)")
    if b.x is None:
        raise ValueError("graphs must have node features x")
    if not b.x.is_floating_point():
        raise ValueError(f"node features x must be floating point, got dtype {b.x.dtype}")
    if not bool(torch.isfinite(b.x).all()):
        raise ValueError("node features x must be finite (no NaN or inf)")
    ei = b.edge_index
    if ei.dim() != 2 or ei.shape[0] != 2 or ei.dtype != torch.long:
        raise ValueError(
            f"edge_index must be a (2, n_edges) int64 tensor, got shape {tuple(ei.shape)} "
            f"dtype {ei.dtype}"
        )
    if int(ei.min()) < 0 or int(ei.max()) >= b.x.shape[0]:
        raise ValueError(
            f"edge_index must index nodes 0..{b.x.shape[0] - 1}, got values "
            f"{int(ei.min())}..{int(ei.max())}"
        )
    if need_y and b.y.is_floating_point():
        raise ValueError(f"labels y must be integer class indices, got dtype {b.y.dtype}")
    return b
