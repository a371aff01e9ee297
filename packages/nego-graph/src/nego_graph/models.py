r"""NeGo and the baselines (ERM, IRM, VREx, GSAT) as torch modules with one interface.

Every model maps a PyG batch to ``(logits, aux)`` and has ``loss(batch, logits, aux) ->
(total, parts)``; subgraph models also give ``edge_importance(batch)``.

NeGo's objective (our derivation from the paper's description; its code and full text were
not available). With extractor node embeddings :math:`h`, edge scores :math:`s_{uv} =
\mathrm{MLP}([h_u, h_v])`, mask :math:`m_{uv} \in [0, 1]` (soft concrete or top-r), causal
node weight :math:`c_v = \max_{u} m_{uv}` and spurious weight :math:`1 - c_v`:

- causal prediction :math:`\hat y = f(G \odot m)` (a GIN whose messages are weighted by
  :math:`m`), per-graph loss :math:`\ell_i = \mathrm{CE}(\hat y_i, y_i)`;
- **negative prompt environment inference**: spurious summary
  :math:`h^s = \sum_v (1 - c_v) h_v / \sum_v (1 - c_v)`, context :math:`h^g =
  \mathrm{mean}_v h_v`, query :math:`q = W[h^s, h^g]`, assignment to :math:`K` learnable
  prompts :math:`a = \mathrm{softmax}(P q / \sqrt{d})` and environment embedding
  :math:`e = a^\top P`, computed from :math:`h` and :math:`m` with gradients stopped (the
  environment branch must not reshape the extractor: letting it do so drove the mask onto
  the base graph, precision@k below chance). Trained *negatively*: a label head reads
  :math:`e` through gradient reversal,
  :math:`L_{neg} = \mathrm{CE}(g(\mathrm{GRL}(e)), y)`, so the head learns to predict
  :math:`y` while the prompts learn to carry no label information; and
  :math:`L_{info} = \|d(e) - \mathrm{sg}(h^s)\|^2` keeps :math:`e` informative of the
  spurious part; :math:`L_{bal} = -H(\bar a)` keeps all environments in use;
- **environment-enhanced invariance**: per inferred environment risk
  :math:`R_k = \sum_i a_{ik} \ell_i / \sum_i a_{ik}` (assignments detached) and
  :math:`L_{inv} = \mathrm{Var}_k R_k`;
- sparsity (GSAT): :math:`L_{sp} = \mathrm{mean}\,\mathrm{KL}(\mathrm{Bern}(m) \,\|\,
  \mathrm{Bern}(r))`.

:math:`L = \bar\ell + \lambda_{inv} L_{inv} + \lambda_{neg} L_{neg} + \lambda_{info}
L_{info} + \lambda_{bal} L_{bal} + \beta L_{sp}`; ``negative``, ``informative``,
``invariance`` switch the terms off for ablations.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from icml25_core import check_choice, check_scalar
from icml25_core.hub import PretrainedModelMixin

from ._compat import quiet_pyg_import
from .layers import POOLS, GNNEncoder, edge_mask, grad_reverse, mlp

with quiet_pyg_import():  # PyG's import calls the deprecated torch.jit.script
    from torch_geometric.utils import scatter

PENALTIES = (None, "irm", "vrex")


def _risk_variance(losses: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Variance of the per-environment risks; ``weights`` (B, K) soft or one-hot
    assignments, empty environments ignored (0 with fewer than two environments)."""
    mass = weights.sum(0)
    keep = mass > 1e-6
    risks = (weights[:, keep] * losses[:, None]).sum(0) / mass[keep]
    return risks.var(unbiased=False) if risks.numel() > 1 else losses.sum() * 0


def _check_sizes(in_dim, n_classes, hidden, layers, dropout, pool) -> None:
    """The constructor arguments every model shares, checked before any layer is built."""
    check_scalar(in_dim, "in_dim", low=1, integer=True)
    check_scalar(n_classes, "n_classes", low=2, integer=True)
    check_scalar(hidden, "hidden", low=1, integer=True)
    check_scalar(layers, "layers", low=1, integer=True)
    check_scalar(dropout, "dropout", low=0.0, high=1.0, high_inclusive=False)
    check_choice(pool, "pool", POOLS)


class GNNClassifier(nn.Module, PretrainedModelMixin):
    """ERM (``penalty=None``), IRMv1 (``"irm"``) or VREx (``"vrex"``) on the whole graph,
    with the training environments in ``batch.env``.

    ``save_pretrained(folder)`` / ``GNNClassifier.from_pretrained(folder or hub id)`` store
    the constructor arguments (``config.json``) and the weights (``model.safetensors``);
    the same holds for :class:`GSAT` and :class:`NeGo`.
    """

    def __init__(
        self,
        in_dim,
        n_classes,
        hidden=64,
        layers=3,
        pool="mean",
        dropout=0.0,
        penalty=None,
        penalty_weight=1.0,
    ):
        super().__init__()
        _check_sizes(in_dim, n_classes, hidden, layers, dropout, pool)
        check_choice(penalty, "penalty", PENALTIES)
        check_scalar(penalty_weight, "penalty_weight", low=0.0)
        self.in_dim, self.n_classes = int(in_dim), int(n_classes)
        self.encoder = GNNEncoder(in_dim, hidden, layers, dropout)
        self.pool = POOLS[pool]
        self.head = mlp([hidden, hidden, n_classes])
        self.penalty = penalty
        self.penalty_weight = float(penalty_weight)

    def forward(self, batch):
        h = self.encoder(batch.x, batch.edge_index)
        return self.head(self.pool(h, batch.batch)), {}

    def loss(self, batch, logits, aux):
        y = batch.y.view(-1)
        losses = F.cross_entropy(logits, y, reduction="none")
        parts = {"task": losses.mean()}
        if self.penalty is not None:
            ids = _environments(batch, self.penalty)
            env = F.one_hot(ids, int(ids.max()) + 1).float()
            if self.penalty == "vrex":
                parts["penalty"] = _risk_variance(losses, env)
            else:
                scale = torch.ones(1, device=logits.device, requires_grad=True)
                pen = logits.new_zeros(())
                for k in range(env.shape[1]):
                    idx = env[:, k] > 0
                    if idx.any():
                        r = F.cross_entropy(logits[idx] * scale, y[idx])
                        (g,) = torch.autograd.grad(r, scale, create_graph=True)
                        pen = pen + g.pow(2).sum()
                parts["penalty"] = pen
        total = parts["task"] + self.penalty_weight * parts.get("penalty", 0.0)
        return total, parts


def _environments(batch, penalty: str) -> torch.Tensor:
    """``batch.env`` as non-negative integer ids (B,); refused naming what is missing."""
    env = getattr(batch, "env", None)
    if env is None:
        raise ValueError(
            f"penalty={penalty!r} needs each graph's training environment in `env` "
            "(an integer per graph); these graphs have none"
        )
    if env.dtype.is_floating_point or env.dtype == torch.bool or env.is_complex():
        raise TypeError(f"env must hold integer environment ids, got dtype {env.dtype}")
    env = env.view(-1).long()
    if env.numel() != batch.num_graphs or bool((env < 0).any()):
        raise ValueError("env must hold one non-negative integer environment id per graph")
    return env


class SubgraphModel(nn.Module, PretrainedModelMixin):
    """Extractor + causal classifier: the shared body of GSAT and NeGo."""

    def __init__(
        self,
        in_dim,
        n_classes,
        hidden=64,
        layers=3,
        pool="mean",
        dropout=0.0,
        mask="soft",
        ratio=0.5,
        beta=1.0,
    ):
        super().__init__()
        _check_sizes(in_dim, n_classes, hidden, layers, dropout, pool)
        check_choice(mask, "mask", ("soft", "topr"))
        check_scalar(ratio, "ratio", low=0.0, high=1.0, low_inclusive=False)
        check_scalar(beta, "beta", low=0.0)
        self.in_dim, self.hidden, self.n_classes = int(in_dim), int(hidden), int(n_classes)
        self.extractor = GNNEncoder(in_dim, hidden, layers, dropout)
        self.scorer = mlp([2 * hidden, hidden, 1])
        self.classifier = GNNEncoder(in_dim, hidden, layers, dropout)
        self.pool = POOLS[pool]
        self.head = mlp([hidden, hidden, n_classes])
        self.mask_mode, self.ratio, self.beta = mask, float(ratio), float(beta)

    def _extract(self, batch):
        h = self.extractor(batch.x, batch.edge_index)
        src, dst = batch.edge_index
        logits = self.scorer(torch.cat([h[src], h[dst]], 1)).view(-1)
        m = edge_mask(logits, batch.batch[src], self.mask_mode, self.ratio, self.training)
        return h, logits, m

    def forward(self, batch):
        h, scores, m = self._extract(batch)
        z = self.classifier(batch.x, batch.edge_index, m)
        return self.head(self.pool(z, batch.batch)), {"h": h, "mask": m, "scores": scores}

    def _sparsity(self, m):
        r = self.ratio
        m = m.clamp(1e-6, 1 - 1e-6)
        return (m * torch.log(m / r) + (1 - m) * torch.log((1 - m) / (1 - r))).mean()

    def _base_parts(self, batch, logits, aux):
        """Per-graph task losses and the task and sparsity terms."""
        losses = F.cross_entropy(logits, batch.y.view(-1), reduction="none")
        return losses, {"task": losses.mean(), "sparsity": self._sparsity(aux["mask"])}

    def loss(self, batch, logits, aux):
        _, parts = self._base_parts(batch, logits, aux)
        return parts["task"] + self.beta * parts["sparsity"], parts

    @torch.no_grad()
    def edge_importance(self, batch) -> torch.Tensor:
        """Deterministic edge scores in [0, 1] (sigmoid of the scorer), shape (E,)."""
        was = self.training
        self.eval()
        _, scores, _ = self._extract(batch)
        self.train(was)
        return torch.sigmoid(scores)


class GSAT(SubgraphModel):
    """Graph stochastic attention (Miao et al., 2022): soft concrete mask, KL to Bern(r)."""


class NeGo(SubgraphModel):
    """NeGo: the subgraph model plus negative prompt environment inference and the
    environment-enhanced invariance penalty (see the module docstring for the losses).

    Parameters (keywords; ``hidden`` ... ``beta`` are :class:`SubgraphModel`'s)
    ----------
    n_envs : int
        Number of environment prompts K.
    lambda_inv, lambda_neg, lambda_info, lambda_bal : float
        Weights of the invariance, negative, informativeness and balance terms.
    negative, informative, invariance : bool
        Switch the terms off for ablations.
    """

    def __init__(
        self,
        in_dim,
        n_classes,
        *,
        n_envs=4,
        lambda_inv=1.0,
        lambda_neg=1.0,
        lambda_info=1.0,
        lambda_bal=0.1,
        negative=True,
        informative=True,
        invariance=True,
        hidden=64,
        layers=3,
        pool="mean",
        dropout=0.0,
        mask="soft",
        ratio=0.5,
        beta=1.0,
    ):
        super().__init__(
            in_dim,
            n_classes,
            hidden=hidden,
            layers=layers,
            pool=pool,
            dropout=dropout,
            mask=mask,
            ratio=ratio,
            beta=beta,
        )
        hidden = self.hidden
        check_scalar(n_envs, "n_envs", low=2, integer=True)
        for name, value in (
            ("lambda_inv", lambda_inv),
            ("lambda_neg", lambda_neg),
            ("lambda_info", lambda_info),
            ("lambda_bal", lambda_bal),
        ):
            check_scalar(value, name, low=0.0)  # finite and non-negative (NaN refused)
        self.prompts = nn.Parameter(torch.randn(n_envs, hidden) / math.sqrt(hidden))
        self.query = nn.Linear(2 * hidden, hidden)
        self.label_head = mlp([hidden, hidden, n_classes])
        self.decoder = mlp([hidden, hidden, hidden])
        self.lambdas = {
            "inv": lambda_inv,
            "neg": lambda_neg,
            "info": lambda_info,
            "bal": lambda_bal,
        }
        self.switches = {"neg": negative, "info": informative, "inv": invariance}

    def environments(self, batch, h, m):
        """Soft environment assignments ``(B, K)``, embeddings ``(B, d)``, spurious summary."""
        src = batch.edge_index[0]
        causal = scatter(m, src, dim=0, dim_size=h.shape[0], reduce="max")
        spur = (1.0 - causal).clamp(min=0.0).unsqueeze(1)
        num = scatter(spur * h, batch.batch, dim=0, reduce="sum")
        den = scatter(spur, batch.batch, dim=0, reduce="sum").clamp(min=1e-6)
        h_s = num / den
        h_g = scatter(h, batch.batch, dim=0, reduce="mean")
        q = self.query(torch.cat([h_s, h_g], 1))
        a = torch.softmax(q @ self.prompts.T / math.sqrt(q.shape[1]), dim=1)
        return a, a @ self.prompts, h_s

    def forward(self, batch):
        logits, aux = super().forward(batch)
        # the environment branch reads the extractor's output without shaping it: the mask
        # is trained by the task, sparsity and invariance terms only
        h, m = aux["h"].detach(), aux["mask"].detach()
        aux["assign"], aux["env"], aux["h_spur"] = self.environments(batch, h, m)
        return logits, aux

    def loss(self, batch, logits, aux):
        losses, parts = self._base_parts(batch, logits, aux)
        a, e = aux["assign"], aux["env"]
        if self.switches["inv"]:
            parts["inv"] = _risk_variance(losses, a.detach())
        if self.switches["neg"]:
            parts["neg"] = F.cross_entropy(self.label_head(grad_reverse(e)), batch.y.view(-1))
        if self.switches["info"]:  # h_spur is computed from detached embeddings
            parts["info"] = (self.decoder(e) - aux["h_spur"]).pow(2).mean()
        mean_a = a.mean(0).clamp(min=1e-8)
        parts["bal"] = (mean_a * torch.log(mean_a)).sum()  # = -H(mean assignment)
        total = parts["task"] + self.beta * parts["sparsity"]
        for key in ("inv", "neg", "info", "bal"):
            if key in parts:
                total = total + self.lambdas[key] * parts[key]
        return total, parts


MODEL_CLASSES = {"GNNClassifier": GNNClassifier, "GSAT": GSAT, "NeGo": NeGo}
"""The classes a checkpoint may name (nothing else is ever instantiated from a file)."""


def ERM(in_dim, n_classes, **kw):
    """Empirical risk minimisation with the same GIN."""
    return GNNClassifier(in_dim, n_classes, penalty=None, **kw)


def IRM(in_dim, n_classes, penalty_weight=1.0, **kw):
    """IRMv1 over the training environments ``batch.env``."""
    return GNNClassifier(in_dim, n_classes, penalty="irm", penalty_weight=penalty_weight, **kw)


def VREx(in_dim, n_classes, penalty_weight=1.0, **kw):
    """Variance of risks over the training environments ``batch.env``."""
    return GNNClassifier(in_dim, n_classes, penalty="vrex", penalty_weight=penalty_weight, **kw)
