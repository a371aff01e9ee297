r"""Estimators: fit on a snapshot sequence, predict links of later snapshots.

:class:`GeoTLP` is the method; ``GeoTLP(routing="euclidean")`` and
``GeoTLP(routing="hyperbolic")`` are the single-geometry baselines, :class:`EvolveGCN` and
:class:`StaticGAE` the others. All share :class:`TemporalLinkPredictor`'s training:

*Evolution-driven objective* (reconstructed; the paper's exact form is not public). With
states :math:`S_t` after snapshot t and Fermi-Dirac link probabilities,

.. math::
    \mathcal L = \frac1{T'}\sum_{t<T'} \Big[\mathrm{BCE}(S_t; E_t, \bar E_t)
    + \lambda_{\mathrm{evo}}\, \mathrm{BCE}(S_t; E_{t+1}, \bar E_{t+1})
    + \lambda_{\mathrm{node}}\, C(S_{t-1}, S_t)\Big]

over the T' training snapshots: reconstruct the current snapshot's edges :math:`E_t`
against fresh PyG negatives :math:`\bar E_t` (HTGN's term), forecast the next
snapshot's (*relation dynamics*; no term for the last training snapshot), and keep node
states from jumping between snapshots (*node dynamics*: the routing-weighted squared move
of each node in each geometry, HTGN's temporal consistency in squared form).
``evolution_weight=0`` gives HTGN's objective.

*Model selection.* The last snapshot given to ``fit`` is held out as the validation
target: training uses the ones before it, and the epoch whose state after them
forecasts the validation snapshot best (ROC AUC) is kept, with early stopping after
``patience`` epochs without improvement. The training loss never selects. Afterwards the
validation snapshot is observed like the others, so predictions for later snapshots start
from the state after it.

*Causality.* ``predict_links(t, pairs)`` scores links of snapshot t from the state after
snapshots ``0..t-1`` (the last observed one for t beyond them); nothing at or after t
enters.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from sklearn.base import BaseEstimator
from torch_geometric.utils import negative_sampling

from icml25_core import check_array, check_choice, check_loss, check_scalar, select_device
from icml25_core.hub import atomic_directory, recover_directory

from .data import check_snapshots
from .geometry import geoopt
from .hyperbolicity import hyperbolicity_sequence
from .models import ROUTINGS, EvolveGCNNet, GeoTLPNet, StaticGAENet
from .protocol import _keys, link_metrics, seeded, undirected_pairs

__all__ = ["EvolveGCN", "GeoTLP", "StaticGAE", "TemporalLinkPredictor"]

ESTIMATOR_FILE = "estimator.json"
HISTORY_FILE = "history.safetensors"


class TemporalLinkPredictor(BaseEstimator):
    """Training, prediction, scoring and persistence shared by the estimators.

    Subclasses set ``_net_class`` and ``_net_params`` (the constructor arguments passed on
    to the network). Fitted attributes: ``net_`` (the network, best validation epoch),
    ``num_nodes_``, ``history_`` (the observed snapshots' edges), ``best_epoch_``,
    ``best_val_auc_``, ``log_`` (per epoch: loss and validation AUC).
    """

    _net_class: ClassVar[type]
    _net_params: ClassVar[tuple[str, ...]] = ("hidden", "dim", "dropout")
    _static: ClassVar[bool] = False  # trains on the last training snapshot only
    _uses_delta: ClassVar[bool] = False

    def _check_params(self) -> None:
        check_scalar(self.epochs, "epochs", low=1, integer=True)
        check_scalar(self.patience, "patience", low=1, integer=True)
        check_scalar(self.lr, "lr", low=0, low_inclusive=False)
        check_scalar(self.weight_decay, "weight_decay", low=0)
        check_scalar(self.evolution_weight, "evolution_weight", low=0)
        check_scalar(self.consistency_weight, "consistency_weight", low=0)
        check_scalar(self.seed, "seed", low=0, integer=True)

    # ----------------------------------------------------------------- internals
    def _deltas(self, edges: list[torch.Tensor], n: int) -> torch.Tensor:
        if not self._uses_delta:
            return torch.zeros(len(edges), n)
        seq = hyperbolicity_sequence(edges, n, k=self.k_hop, samples=self.delta_samples)
        return torch.as_tensor(seq, dtype=torch.float32)

    def _states(self, edges, deltas, x) -> list[dict[str, torch.Tensor]]:
        """States after each snapshot, in eval mode and without gradients."""
        net = self.net_
        was = net.training
        net.eval()
        states = []
        with torch.no_grad():
            state = net.init_state()
            for t, ei in enumerate(edges):
                state = net.step(state, ei.to(self.device_), deltas[t].to(self.device_), x)
                states.append(state)
        net.train(was)
        return states

    def _bce(self, net, state, pos, neg) -> torch.Tensor:
        lp, ln = net.logits(state, pos), net.logits(state, neg)
        return F.binary_cross_entropy_with_logits(
            torch.cat([lp, ln]), torch.cat([torch.ones_like(lp), torch.zeros_like(ln)])
        )

    def _epoch_loss(self, net, edges, pos, deltas, x) -> torch.Tensor:
        n, dev = self.num_nodes_, self.device_
        T = len(edges)
        first = T - 1 if self._static else 0
        state = net.init_state()
        total = torch.zeros((), device=dev)
        for t in range(first, T):  # a static network keeps no state: only its last snapshot
            prev = state
            state = net.step(state, edges[t], deltas[t], x)
            neg = negative_sampling(edges[t], num_nodes=n, num_neg_samples=pos[t].shape[1])
            loss = self._bce(net, state, pos[t], neg.to(dev))
            if t + 1 < T and self.evolution_weight > 0 and not self._static:
                nxt = negative_sampling(
                    edges[t + 1], num_nodes=n, num_neg_samples=pos[t + 1].shape[1]
                )
                loss = loss + self.evolution_weight * self._bce(net, state, pos[t + 1], nxt.to(dev))
            if t > 0 and self.consistency_weight > 0 and not self._static:
                loss = loss + self.consistency_weight * net.consistency(prev, state)
            total = total + loss
        return total / (T - first)

    # ----------------------------------------------------------------- public API
    def fit(self, snapshots, *, x=None, num_nodes: int | None = None):
        """Train on ``snapshots`` (oldest first; the last one validates).

        Parameters
        ----------
        snapshots : sequence of torch_geometric.data.Data or (2, E) arrays
            At least 3 snapshots over one node set (see :func:`~geo_tlp.check_snapshots`).
        x : array_like or torch.Tensor, shape (N, F), optional
            Static node features; default: a learned table per node.
        num_nodes : int, optional
            N, when it exceeds the largest id in the snapshots.

        Returns
        -------
        self
        """
        self._check_params()
        edges, n = check_snapshots(snapshots, num_nodes=num_nodes)
        if len(edges) < 3:
            raise ValueError(
                f"snapshots must hold at least 3 snapshots (2 to train on, the last to "
                f"validate), got {len(edges)}"
            )
        self.device_ = torch.device(select_device(self.device))
        self.num_nodes_ = n
        self.x_ = None
        if x is not None:
            xt = torch.as_tensor(np.asarray(x) if not torch.is_tensor(x) else x)
            check_array(xt, "x", ndim=2, shape=(n, None))
            self.x_ = xt.to(torch.float32)
        xdev = None if self.x_ is None else self.x_.to(self.device_)
        deltas = self._deltas(edges, n)
        train = [ei.to(self.device_) for ei in edges[:-1]]
        pos = [undirected_pairs(ei) for ei in train]
        val_pos = undirected_pairs(edges[-1])
        with seeded(self.seed):
            net = self._build_net(n, None if self.x_ is None else self.x_.shape[1])
            net.to(self.device_)
            self.net_ = net
            val_neg = negative_sampling(edges[-1], num_nodes=n, num_neg_samples=val_pos.shape[1])
            optim = geoopt.optim.RiemannianAdam(
                net.parameters(), lr=self.lr, weight_decay=self.weight_decay
            )
            d_train = deltas[:-1].to(self.device_)
            best, best_state, since = -math.inf, None, 0
            start = None  # the first epoch's loss: a loss RUNAWAY times above it diverged
            self.log_ = []
            for epoch in range(self.epochs):
                net.train()
                optim.zero_grad()
                loss = self._epoch_loss(net, train, pos, d_train, xdev)
                start = float(loss.detach()) if start is None else start
                check_loss(loss, lr=self.lr, step=epoch, reference=start)
                loss.backward()
                optim.step()
                state = self._states(train, d_train, xdev)[-1]
                with torch.no_grad():
                    net.eval()
                    vp = torch.sigmoid(net.logits(state, val_pos.to(self.device_))).cpu().numpy()
                    vn = torch.sigmoid(net.logits(state, val_neg.to(self.device_))).cpu().numpy()
                auc = link_metrics(vp, vn)["auc"]
                self.log_.append({"epoch": epoch, "loss": float(loss.detach()), "val_auc": auc})
                if auc > best:
                    best, best_state, since = auc, copy.deepcopy(net.state_dict()), 0
                    self.best_epoch_ = epoch
                else:
                    since += 1
                    if since >= self.patience:
                        break
        net.load_state_dict(best_state)
        net.eval()
        self.best_val_auc_ = best
        self.history_ = edges
        self._history_states = self._states(edges, deltas, xdev)
        return self

    def _build_net(self, n: int, in_channels: int | None):
        kwargs = {p: getattr(self, p) for p in self._net_params}
        return self._net_class(num_nodes=n, in_channels=in_channels, **kwargs)

    def _check_fitted(self) -> None:
        if not hasattr(self, "net_"):
            raise RuntimeError(f"this {type(self).__name__} is not fitted; call fit(snapshots)")

    def _states_for(self, history):
        """The states after each snapshot of ``history`` (default: the observed ones)."""
        if history is None:
            return self._history_states
        edges, _ = check_snapshots(history, num_nodes=self.num_nodes_)
        xdev = None if self.x_ is None else self.x_.to(self.device_)
        return self._states(edges, self._deltas(edges, self.num_nodes_), xdev)

    def predict_links(self, t: int, pairs, *, history=None) -> np.ndarray:
        """Probability of a link between each pair in snapshot ``t``.

        Parameters
        ----------
        t : int
            Index of the snapshot to predict (>= 1); scored from the state after snapshot
            ``t - 1``, or after the last observed one when ``t`` lies beyond the history.
        pairs : array_like or torch.Tensor of int
            Node pairs: a NumPy array or tensor of shape (2, P) (PyG's ``edge_index``
            layout), or a Python list of pairs ``[(u, v), ...]``, shape (P, 2). A list is
            always read as pairs, so ``[[0, 1], [2, 50]]`` scores (0, 1) and (2, 50).
        history : sequence of snapshots, optional
            Observed snapshots to run the fitted network over instead of the ones given to
            ``fit`` (for example with later snapshots appended).

        Returns
        -------
        numpy.ndarray, shape (P,)
            Fermi-Dirac (GAE: sigmoid) link probabilities.
        """
        self._check_fitted()
        check_scalar(t, "t", low=1, integer=True)
        if isinstance(pairs, list | tuple):
            listed = np.asarray(pairs)
            if listed.ndim != 2 or listed.shape[1] != 2:
                raise ValueError(
                    f"pairs given as a list must be a list of (u, v) pairs, shape (P, 2), got "
                    f"shape {listed.shape}; pass a (2, P) array for the edge_index layout"
                )
            pairs = listed.T
        pairs = torch.as_tensor(np.asarray(pairs) if not torch.is_tensor(pairs) else pairs)
        if pairs.dtype.is_floating_point or pairs.dim() != 2 or pairs.shape[0] != 2:
            raise ValueError(
                f"pairs must be an integer array of shape (2, P) or a list of (u, v) pairs, "
                f"got {tuple(pairs.shape)} {pairs.dtype}"
            )
        if pairs.numel() and (int(pairs.min()) < 0 or int(pairs.max()) >= self.num_nodes_):
            raise ValueError(f"pairs must hold node ids in [0, {self.num_nodes_})")
        states = self._states_for(history)
        state = states[min(t, len(states)) - 1]
        with torch.no_grad():
            logits = self.net_.logits(state, pairs.long().to(self.device_))
        return torch.sigmoid(logits).cpu().numpy()

    def score(
        self,
        snapshot,
        *,
        t: int | None = None,
        history=None,
        new_links: str = "unseen",
        seed: int = 0,
    ) -> dict[str, float]:
        """AUC/AP on one later snapshot's edges against as many sampled non-edges.

        Parameters
        ----------
        snapshot : Data or (2, E) array
            The snapshot whose links are predicted.
        t : int, optional
            Its index; default: right after the history.
        history : sequence of snapshots, optional
            As in :meth:`predict_links`.
        new_links : {"unseen", "previous"}
            New links: edges absent from every history snapshot before ``t``, or from
            snapshot ``t - 1`` only (HTGN).
        seed : int
            Randomness of the negatives.

        Returns
        -------
        dict
            ``auc``, ``ap``, ``n_new`` and, when there are new links, ``new_auc``,
            ``new_ap`` (new links against the same number of the negatives).
        """
        self._check_fitted()
        check_choice(new_links, "new_links", ("unseen", "previous"))
        n = self.num_nodes_
        target = check_snapshots([snapshot], num_nodes=n)[0][0]
        hist = self.history_ if history is None else check_snapshots(history, num_nodes=n)[0]
        t = len(hist) if t is None else t
        pos = undirected_pairs(target)
        with seeded(seed):
            neg = negative_sampling(target, num_nodes=n, num_neg_samples=pos.shape[1])
        scores = self.predict_links(t, torch.cat([pos, neg], dim=1), history=history)
        p_pos, p_neg = scores[: pos.shape[1]], scores[pos.shape[1] :]
        out = link_metrics(p_pos, p_neg)
        past = hist[: min(t, len(hist))]
        ref = past if new_links == "unseen" else past[-1:]
        seen = np.unique(np.concatenate([_keys(ei, n) for ei in ref]))
        new = ~np.isin(_keys(pos, n), seen)
        out["n_new"] = int(new.sum())
        if new.any():
            m = link_metrics(p_pos[new], p_neg[: int(new.sum())])
            out["new_auc"], out["new_ap"] = m["auc"], m["ap"]
        return out

    # ----------------------------------------------------------------- persistence
    def save_pretrained(self, save_directory: str | Path, *, overwrite: bool = False) -> Path:
        """Write the fitted estimator into a folder, atomically.

        ``net/`` (the network: ``config.json`` + ``model.safetensors``), ``estimator.json``
        (the class and its parameters) and ``history.safetensors`` (the observed
        snapshots' edges, and ``x`` when features were given).
        """
        self._check_fitted()
        target = Path(save_directory)
        with atomic_directory(
            target, overwrite=overwrite, contents=("net", ESTIMATOR_FILE, HISTORY_FILE)
        ) as tmp:
            self.net_.save_pretrained(tmp / "net")
            meta = {
                "class": type(self).__name__,
                "params": self.get_params(),
                "num_nodes": self.num_nodes_,
            }
            (tmp / ESTIMATOR_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")
            tensors = {f"snapshot_{t:05d}": ei.contiguous() for t, ei in enumerate(self.history_)}
            if self.x_ is not None:
                tensors["x"] = self.x_.contiguous()
            save_file(tensors, str(tmp / HISTORY_FILE))
        return target

    @classmethod
    def from_pretrained(cls, path: str | Path, *, device: str | None = None):
        """Load an estimator written by :meth:`save_pretrained` (no pickles)."""
        path = Path(path)
        recover_directory(path)
        meta_file = path / ESTIMATOR_FILE
        if not meta_file.is_file():
            raise FileNotFoundError(f"{path} holds no {ESTIMATOR_FILE}; not a saved estimator")
        try:
            meta = json.loads(meta_file.read_text(encoding="utf-8"))
            params, n = dict(meta["params"]), int(meta["num_nodes"])
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{meta_file} is corrupt: {err}") from None
        if meta.get("class") != cls.__name__:
            raise ValueError(f"{meta_file} holds a {meta.get('class')}, not a {cls.__name__}")
        if device is not None:
            params["device"] = device
        est = cls(**params)
        est.device_ = torch.device(select_device(est.device))
        est.net_ = cls._net_class.from_pretrained(path / "net", map_location=str(est.device_))
        saved = getattr(est.net_, "_hub_mixin_config", {})
        disagree = {
            p: (getattr(est, p), saved[p])
            for p in cls._net_params
            if p in saved and getattr(est, p) != saved[p]
        }
        if disagree:
            shown = ", ".join(
                f"{p}={a!r} (the network has {b!r})" for p, (a, b) in disagree.items()
            )
            raise ValueError(f"{meta_file} disagrees with the saved network: {shown}")
        try:
            tensors = load_file(str(path / HISTORY_FILE))
        except (SafetensorError, OSError) as err:
            raise ValueError(
                f"{path / HISTORY_FILE} is not a readable safetensors file: {err}"
            ) from None
        est.num_nodes_ = n
        est.x_ = tensors.pop("x", None)
        history = [tensors[k] for k in sorted(tensors)]
        if not history:
            raise ValueError(f"{path / HISTORY_FILE} holds no snapshots")
        edges, _ = check_snapshots(history, num_nodes=n)
        est.history_ = edges
        deltas = est._deltas(edges, n)
        xdev = None if est.x_ is None else est.x_.to(est.device_)
        est._history_states = est._states(edges, deltas, xdev)
        return est


class GeoTLP(TemporalLinkPredictor):
    """Cross-geometric temporal link prediction (:class:`~geo_tlp.models.GeoTLPNet`).

    Parameters
    ----------
    routing : {"soft", "hard", "euclidean", "hyperbolic"}
        Per-node geometry weights from local hyperbolicity (soft: learned gate; hard:
        threshold), or one geometry only (the baselines).
    hidden, dim : int
        Convolution width and embedding size.
    curvature : float
        c of the Poincare ball (curvature -c).
    k_hop : int
        Radius of the balls whose Gromov delta routes the nodes.
    delta_samples : int
        Quadruples per ball (exact below that many).
    threshold, gain : float
        Initial threshold and gain of the gate.
    evolution_weight, consistency_weight : float
        :math:`\\lambda_{\\mathrm{evo}}` and :math:`\\lambda_{\\mathrm{node}}` of the
        objective (module docstring).
    epochs, patience, lr, weight_decay : training (RiemannianAdam, full batch).
    dropout : float
    seed : int
    device : str
        ``"auto"`` (cuda, then mps, then cpu), or a torch device string.
    """

    _net_class = GeoTLPNet
    _net_params = ("hidden", "dim", "routing", "curvature", "dropout", "threshold", "gain")

    def __init__(
        self,
        *,
        routing: str = "soft",
        hidden: int = 32,
        dim: int = 16,
        curvature: float = 1.0,
        k_hop: int = 2,
        delta_samples: int = 1000,
        threshold: float = 0.25,
        gain: float = 10.0,
        evolution_weight: float = 1.0,
        consistency_weight: float = 0.1,
        epochs: int = 200,
        patience: int = 30,
        lr: float = 0.01,
        weight_decay: float = 0.0,
        dropout: float = 0.0,
        seed: int = 0,
        device: str = "auto",
    ) -> None:
        self.routing = routing
        self.hidden = hidden
        self.dim = dim
        self.curvature = curvature
        self.k_hop = k_hop
        self.delta_samples = delta_samples
        self.threshold = threshold
        self.gain = gain
        self.evolution_weight = evolution_weight
        self.consistency_weight = consistency_weight
        self.epochs = epochs
        self.patience = patience
        self.lr = lr
        self.weight_decay = weight_decay
        self.dropout = dropout
        self.seed = seed
        self.device = device

    @property
    def _uses_delta(self) -> bool:  # type: ignore[override]
        return self.routing in ("soft", "hard")

    def _check_params(self) -> None:
        super()._check_params()
        check_choice(self.routing, "routing", ROUTINGS)
        check_scalar(self.k_hop, "k_hop", low=1, integer=True)
        check_scalar(self.delta_samples, "delta_samples", low=1, integer=True)
        check_scalar(self.curvature, "curvature", low=0, low_inclusive=False)
        check_scalar(self.threshold, "threshold")
        check_scalar(self.gain, "gain", low=0, low_inclusive=False)

    def routing_weights(self, t: int | None = None) -> np.ndarray:
        """Each node's weight on the hyperbolic geometry after snapshot ``t`` (default the
        last observed), shape (N,)."""
        self._check_fitted()
        states = self._history_states
        if t is not None:
            check_scalar(t, "t", low=0, high=len(states) - 1, integer=True)
        return states[-1 if t is None else t]["alpha"].cpu().numpy()


class _Baseline(TemporalLinkPredictor):
    def __init__(
        self,
        *,
        hidden: int = 32,
        dim: int = 16,
        evolution_weight: float = 1.0,
        consistency_weight: float = 0.0,
        epochs: int = 200,
        patience: int = 30,
        lr: float = 0.01,
        weight_decay: float = 0.0,
        dropout: float = 0.0,
        seed: int = 0,
        device: str = "auto",
    ) -> None:
        self.hidden = hidden
        self.dim = dim
        self.evolution_weight = evolution_weight
        self.consistency_weight = consistency_weight
        self.epochs = epochs
        self.patience = patience
        self.lr = lr
        self.weight_decay = weight_decay
        self.dropout = dropout
        self.seed = seed
        self.device = device


class EvolveGCN(_Baseline):
    """EvolveGCN-O baseline (:class:`~geo_tlp.models.EvolveGCNNet`), trained with the same
    objective and selection as :class:`GeoTLP` (no node-dynamics term). Parameters as in
    :class:`GeoTLP`."""

    _net_class = EvolveGCNNet


class StaticGAE(_Baseline):
    """Static GAE baseline (:class:`~geo_tlp.models.StaticGAENet`): trained to reconstruct
    the last training snapshot only, selected on the validation snapshot, and predicting
    every later snapshot from the last observed one. Parameters as in :class:`GeoTLP`
    (``evolution_weight`` and ``consistency_weight`` are unused)."""

    _net_class = StaticGAENet
    _static = True
