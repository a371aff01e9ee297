r"""The temporal link prediction networks: geo-tlp's cross-geometric network and the
baselines' encoders.

Every network here is a recurrence over snapshots with one interface, so that one
training loop (:mod:`geo_tlp.estimators`) serves them all:

- ``init_state()`` -> state before any snapshot;
- ``step(state, edge_index, delta, x)`` -> the state after observing one snapshot
  (``delta``: the nodes' local hyperbolicity on it, shape (N,); ``x``: node features,
  shape (N, F), or ``None`` for learned ones);
- ``logits(state, pairs)`` -> one logit per node pair, shape (P,), for links of a later
  (or the same) snapshot;
- ``consistency(previous, state)`` -> the node-dynamics penalty between two consecutive
  states (0 for networks without one).

:class:`GeoTLPNet` (the method, as reconstructed here):

1. *Dynamic geometric modelling.* Each snapshot goes through a Euclidean GCN branch (PyG
   :class:`~torch_geometric.nn.GCNConv`) and a hyperbolic branch on the Poincare ball
   (:class:`~geo_tlp.geometry.HypGCNConv`, geoopt).
2. *Temporal state aggregator.* A GRU cell per geometry updates each node's state, the
   hyperbolic one in the tangent space at the origin:
   :math:`s^H_t = \mathrm{GRU}_H(\log_0 y^H_t, s^H_{t-1})`, :math:`s^E_t =
   \mathrm{GRU}_E(y^E_t, s^E_{t-1})`; the embeddings are :math:`p_t = \exp_0(W_H s^H_t)`
   on the ball and :math:`e_t = W_E s^E_t`.
3. *Routing by local hyperbolicity.* Node i's weight on the hyperbolic geometry is
   :math:`\alpha_i = \sigma(g(\tau - \delta_i))` (``routing="soft"``, gain g and
   threshold :math:`\tau` learned), :math:`\mathbb 1[\delta_i \le \tau]` (``"hard"``), 0
   (``"euclidean"``) or 1 (``"hyperbolic"``); :math:`\delta_i` is the relative Gromov
   delta of its k-hop ball in the last observed snapshot.
4. *Cross-geometric Fermi-Dirac decoder.* A pair's squared distance mixes the two
   geometries with the pair's mean weight :math:`\bar\alpha = (\alpha_i+\alpha_j)/2`:
   :math:`d^2 = \bar\alpha\, d_{\mathbb B}(p_i, p_j)^2 + (1-\bar\alpha) \lVert e_i -
   e_j\rVert^2`, and :math:`P(\text{link}) = 1 / (e^{(d^2 - r)/T} + 1)`.

The baselines: ``GeoTLPNet(routing="euclidean")`` (Euclidean only),
``GeoTLPNet(routing="hyperbolic")`` (hyperbolic only, HTGN-like: HGCN + tangent GRU +
Fermi-Dirac on the ball, without HTGN's attention over past states),
:class:`EvolveGCNNet` (EvolveGCN-O: GCN weights evolved by a GRU) and
:class:`StaticGAENet` (PyG's :class:`~torch_geometric.nn.GAE` on one snapshot).
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from icml25_core import check_choice, check_scalar
from icml25_core.hub import PretrainedModelMixin

from .geometry import HypGCNConv, poincare_ball, tangent_aggregate

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"`torch\.jit\.script` is deprecated")
    from torch_geometric.nn import GAE, GCNConv

__all__ = ["ROUTINGS", "EvolveGCNNet", "GeoTLPNet", "StaticGAENet"]

ROUTINGS = ("soft", "hard", "euclidean", "hyperbolic")
"""How :class:`GeoTLPNet` weighs the geometries per node."""

State = dict[str, torch.Tensor]


def _check_sizes(num_nodes, in_channels, hidden, dim) -> None:
    check_scalar(num_nodes, "num_nodes", low=1, integer=True)
    if in_channels is not None:
        check_scalar(in_channels, "in_channels", low=1, integer=True)
    check_scalar(hidden, "hidden", low=1, integer=True)
    check_scalar(dim, "dim", low=1, integer=True)


class _Features(nn.Module):
    """Node features: the given ``x``, or a learned table when ``in_channels`` is None."""

    def __init__(self, num_nodes: int, in_channels: int | None, hidden: int) -> None:
        super().__init__()
        self.learned = in_channels is None
        self.size = hidden if in_channels is None else in_channels
        if self.learned:
            self.table = nn.Parameter(torch.empty(num_nodes, hidden))
            nn.init.xavier_uniform_(self.table)

    def forward(self, x: torch.Tensor | None) -> torch.Tensor:
        if self.learned:
            return self.table
        if x is None:
            raise ValueError("this network was built with in_channels; pass node features x")
        return x


class _GCNEncoder(nn.Module):
    """Two GCN layers with a ReLU between: the GAE's encoder."""

    def __init__(self, in_channels: int, hidden: int, dim: int, dropout: float) -> None:
        super().__init__()
        self.conv = nn.ModuleList([GCNConv(in_channels, hidden), GCNConv(hidden, dim)])
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.conv[0](self.dropout(x), edge_index))
        return self.conv[1](self.dropout(h), edge_index)


class _NoNodeDynamics:
    """The baselines' node-dynamics penalty: none."""

    def consistency(self, previous: State, state: State) -> torch.Tensor:
        """Zero: no node-dynamics term."""
        return torch.zeros((), dtype=state["e"].dtype, device=state["e"].device)


class GeoTLPNet(nn.Module, PretrainedModelMixin):
    """Cross-geometric temporal link predictor (see the module docstring).

    Parameters
    ----------
    num_nodes : int
        N (the node set shared by all snapshots).
    in_channels : int, optional
        Size F of given node features; ``None``: learn an (N, hidden) table (transductive,
        as HTGN).
    hidden, dim : int
        Hidden size of the convolutions and size of the embeddings/states.
    routing : {"soft", "hard", "euclidean", "hyperbolic"}
        Geometry weights per node.
    curvature : float
        c > 0; the ball has curvature -c.
    dropout : float
        Dropout on the convolution inputs.
    fd_r, fd_t : float
        Fermi-Dirac radius and temperature.
    threshold, gain : float
        Initial :math:`\\tau` and g of the soft gate (the hard gate's fixed threshold).
    """

    def __init__(
        self,
        num_nodes: int,
        in_channels: int | None = None,
        hidden: int = 32,
        dim: int = 16,
        routing: str = "soft",
        curvature: float = 1.0,
        dropout: float = 0.0,
        fd_r: float = 2.0,
        fd_t: float = 1.0,
        threshold: float = 0.25,
        gain: float = 10.0,
    ) -> None:
        super().__init__()
        _check_sizes(num_nodes, in_channels, hidden, dim)
        check_choice(routing, "routing", ROUTINGS)
        check_scalar(fd_t, "fd_t", low=0, low_inclusive=False)
        check_scalar(fd_r, "fd_r")
        check_scalar(dropout, "dropout", low=0, high=1, high_inclusive=False)
        check_scalar(threshold, "threshold")
        check_scalar(gain, "gain", low=0, low_inclusive=False)
        self.num_nodes, self.dim, self.routing = num_nodes, dim, routing
        self.fd_r, self.fd_t = fd_r, fd_t
        self.features = _Features(num_nodes, in_channels, hidden)
        f = self.features.size
        self.euclidean = routing != "hyperbolic"
        self.hyperbolic = routing != "euclidean"
        if self.euclidean:
            self.encoder_e = _GCNEncoder(f, hidden, dim, dropout)
            self.gru_e = nn.GRUCell(dim, dim)
            self.out_e = nn.Linear(dim, dim)
        if self.hyperbolic:
            self.ball = poincare_ball(curvature)
            self.conv_h = nn.ModuleList(
                [
                    HypGCNConv(f, hidden, self.ball, dropout=dropout),
                    HypGCNConv(hidden, dim, self.ball, activation=False, dropout=dropout),
                ]
            )
            self.gru_h = nn.GRUCell(dim, dim)
            self.out_h = nn.Linear(dim, dim)
        if routing == "soft":
            self.threshold = nn.Parameter(torch.tensor(float(threshold)))
            self.gain = nn.Parameter(torch.tensor(float(gain)))
        else:
            self.register_buffer("threshold", torch.tensor(float(threshold)))

    def init_state(self) -> State:
        """Zero states and weights before the first snapshot."""
        ref = next(self.parameters())
        zeros = torch.zeros(self.num_nodes, self.dim, dtype=ref.dtype, device=ref.device)
        return {"s_e": zeros, "s_h": zeros, "alpha": self.alpha(zeros[:, 0])}

    def alpha(self, delta: torch.Tensor) -> torch.Tensor:
        """Weight on the hyperbolic geometry per node, shape (N,), from deltas (N,)."""
        if self.routing == "euclidean":
            return torch.zeros_like(delta)
        if self.routing == "hyperbolic":
            return torch.ones_like(delta)
        if self.routing == "hard":
            return (delta <= self.threshold).to(delta.dtype)
        return torch.sigmoid(self.gain * (self.threshold - delta))

    def step(self, state: State, edge_index, delta, x=None) -> State:
        """Observe one snapshot: ``edge_index`` (2, E), ``delta`` (N,), ``x`` (N, F)."""
        feats = self.features(x)
        out = {"alpha": self.alpha(delta), "s_e": state["s_e"], "s_h": state["s_h"]}
        if self.euclidean:
            out["s_e"] = self.gru_e(self.encoder_e(feats, edge_index), state["s_e"])
        if self.hyperbolic:
            y = self.ball.expmap0(feats)
            for conv in self.conv_h:
                y = conv(y, edge_index)
            out["s_h"] = self.gru_h(self.ball.logmap0(y), state["s_h"])
        return out

    def embeddings(self, state: State) -> dict[str, torch.Tensor]:
        """``e`` (N, dim) Euclidean, ``p`` (N, dim) on the ball, ``alpha`` (N,)."""
        out = {"alpha": state["alpha"]}
        if self.euclidean:
            out["e"] = self.out_e(state["s_e"])
        if self.hyperbolic:
            out["p"] = self.ball.expmap0(self.out_h(state["s_h"]))
        return out

    def sq_distance(self, state: State, pairs: torch.Tensor) -> torch.Tensor:
        """The cross-geometric squared distance of each pair, shape (P,)."""
        emb = self.embeddings(state)
        i, j = pairs
        a = (emb["alpha"][i] + emb["alpha"][j]) / 2
        d2 = torch.zeros(pairs.shape[1], dtype=emb["alpha"].dtype, device=pairs.device)
        if self.euclidean:
            d2 = d2 + (1 - a) * (emb["e"][i] - emb["e"][j]).pow(2).sum(-1)
        if self.hyperbolic:
            d2 = d2 + a * self.ball.dist(emb["p"][i], emb["p"][j]).pow(2)
        return d2

    def logits(self, state: State, pairs: torch.Tensor) -> torch.Tensor:
        """Fermi-Dirac logits :math:`(r - d^2)/T` of ``pairs`` (2, P)."""
        return (self.fd_r - self.sq_distance(state, pairs)) / self.fd_t

    def consistency(self, previous: State, state: State) -> torch.Tensor:
        """Mean squared move of the node embeddings between consecutive states, each
        geometry weighted by the node's routing weight."""
        a, b = self.embeddings(previous), self.embeddings(state)
        w = state["alpha"]
        total = torch.zeros((), dtype=w.dtype, device=w.device)
        if self.euclidean:
            total = total + ((1 - w) * (a["e"] - b["e"]).pow(2).sum(-1)).mean()
        if self.hyperbolic:
            total = total + (w * self.ball.dist(a["p"], b["p"]).pow(2)).mean()
        return total


class EvolveGCNNet(_NoNodeDynamics, nn.Module, PretrainedModelMixin):
    """EvolveGCN-O: a two-layer GCN whose weight matrices evolve through a GRU.

    :math:`W^{(l)}_t = \\mathrm{GRU}^{(l)}(W^{(l)}_{t-1}, W^{(l)}_{t-1})` (rows as the batch),
    :math:`Z_t = \\hat A_t\\, \\mathrm{relu}(\\hat A_t X W^{(1)}_t)\\, W^{(2)}_t`, decoded with
    the Fermi-Dirac function of the squared Euclidean distance (as the other temporal
    models here, so that the encoders are compared under one decoder).

    Parameters are those of :class:`GeoTLPNet` that apply.
    """

    def __init__(
        self,
        num_nodes: int,
        in_channels: int | None = None,
        hidden: int = 32,
        dim: int = 16,
        dropout: float = 0.0,
        fd_r: float = 2.0,
        fd_t: float = 1.0,
    ) -> None:
        super().__init__()
        _check_sizes(num_nodes, in_channels, hidden, dim)
        check_scalar(fd_t, "fd_t", low=0, low_inclusive=False)
        self.num_nodes, self.dim, self.fd_r, self.fd_t = num_nodes, dim, fd_r, fd_t
        self.features = _Features(num_nodes, in_channels, hidden)
        sizes = [(self.features.size, hidden), (hidden, dim)]
        self.w0 = nn.ParameterList([nn.Parameter(torch.empty(i, o)) for i, o in sizes])
        for w in self.w0:
            nn.init.xavier_uniform_(w)
        self.evolve = nn.ModuleList([nn.GRUCell(o, o) for _, o in sizes])
        self.dropout = nn.Dropout(dropout)

    def init_state(self) -> State:
        """The initial weights, before any snapshot."""
        state = {f"w{k}": w for k, w in enumerate(self.w0)}
        ref = self.w0[0]
        state["e"] = torch.zeros(self.num_nodes, self.dim, dtype=ref.dtype, device=ref.device)
        return state

    def step(self, state: State, edge_index, delta=None, x=None) -> State:
        """Evolve the weights, then convolve this snapshot with them."""
        out: State = {}
        h = self.features(x)
        for k, gru in enumerate(self.evolve):
            w = gru(state[f"w{k}"], state[f"w{k}"])
            out[f"w{k}"] = w
            h = tangent_aggregate(self.dropout(h) @ w, edge_index, self.num_nodes)
            if k < len(self.evolve) - 1:
                h = torch.relu(h)
        out["e"] = h
        return out

    def logits(self, state: State, pairs: torch.Tensor) -> torch.Tensor:
        """Fermi-Dirac logits of ``pairs`` (2, P)."""
        e = state["e"]
        return (self.fd_r - (e[pairs[0]] - e[pairs[1]]).pow(2).sum(-1)) / self.fd_t


class StaticGAENet(_NoNodeDynamics, nn.Module, PretrainedModelMixin):
    """A static graph auto-encoder (PyG's :class:`~torch_geometric.nn.GAE`, two-layer GCN
    encoder, inner-product decoder) that sees one snapshot at a time and keeps no state:
    scores for snapshot t come from snapshot t-1 alone.

    Parameters are those of :class:`GeoTLPNet` that apply.
    """

    def __init__(
        self,
        num_nodes: int,
        in_channels: int | None = None,
        hidden: int = 32,
        dim: int = 16,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        _check_sizes(num_nodes, in_channels, hidden, dim)
        self.num_nodes, self.dim = num_nodes, dim
        self.features = _Features(num_nodes, in_channels, hidden)
        self.gae = GAE(_GCNEncoder(self.features.size, hidden, dim, dropout))

    def init_state(self) -> State:
        """Zero embeddings (nothing observed)."""
        ref = next(self.parameters())
        return {"e": torch.zeros(self.num_nodes, self.dim, dtype=ref.dtype, device=ref.device)}

    def step(self, state: State, edge_index, delta=None, x=None) -> State:
        """Encode this snapshot alone."""
        return {"e": self.gae.encode(self.features(x), edge_index)}

    def logits(self, state: State, pairs: torch.Tensor) -> torch.Tensor:
        """Inner-product logits of ``pairs`` (2, P)."""
        return self.gae.decoder(state["e"], pairs, sigmoid=False)
