"""The TabICL network: column embedding, row interaction, in-context learning.

Shapes: a batch of ``B`` tables with ``T`` rows (the first ``n_train`` are the training
rows, the rest are test rows) and ``H`` features, ``X`` of shape ``(B, T, H)``; training
labels ``y_train`` of shape ``(B, n_train)`` with values in ``[0, max_classes)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from icml25_core import check_scalar
from icml25_core.hub import PretrainedModelMixin

from .layers import SSMAX_TYPES, Block, InducedSetBlock, RotaryEmbedding

#: column groupings of :class:`TabICLConfig` (``feature_group``)
FEATURE_GROUPS = ("none", "same")


@dataclass(frozen=True)
class TabICLConfig:
    """Sizes of a :class:`TabICL` model.

    The paper's v1 model uses ``embed_dim=128``, column stage 3 blocks / 4 heads / 128
    inducing points, row stage 3 blocks / 8 heads / 4 CLS tokens, ICL stage 12 blocks /
    4 heads (width ``n_cls * embed_dim`` = 512). :meth:`lite` is the size shipped here.

    ``standardize=True`` standardises every column with its training rows and clips it at
    ``±clip_z`` inside the network (this package's checkpoints). The official checkpoints
    (:mod:`tabicl_lite.convert`) were trained on tables the classifier had already
    standardised: they have ``standardize=False`` and expect no missing values.

    TabICL v2's mechanisms (all off by default, the v1 network; the official v2
    classifier has ``col_affine=False, feature_group="same", target_aware=True,
    col_ssmax=icl_ssmax="qassmax-mlp-elementwise", rope_interleaved=False`` and 8 column
    and 8 in-context heads, :meth:`v2`):

    * ``col_affine=False``: the column embedding is the set transformer's output itself,
      not ``x * W + B``;
    * ``feature_group="same"``: cell ``(i, j)`` enters the column stage as the
      ``feature_group_size`` values ``x[i, (j + 2^k) mod H]``, ``k < size`` (each column
      embedded with its shifted neighbours);
    * ``target_aware=True``: the training cells get their row's label embedding before the
      column stage (with more classes than ``max_classes``, once per digit of a mixed-radix
      code of the label, the outputs averaged);
    * ``col_ssmax`` / ``icl_ssmax``: query-aware scalable softmax
      (:class:`~tabicl_lite.layers.QueryScaling`) in the inducing points' read of the
      training rows and in every in-context block;
    * ``rope_interleaved=False``: rotary pairs are the two halves of a head.
    """

    max_classes: int = 10
    embed_dim: int = 128
    col_blocks: int = 3
    col_heads: int = 4
    n_inducing: int = 128
    row_blocks: int = 3
    row_heads: int = 8
    n_cls: int = 4
    rope_base: float = 1e5
    icl_blocks: int = 12
    icl_heads: int = 4
    ff_factor: int = 2
    clip_z: float = 4.0
    standardize: bool = True
    col_affine: bool = True
    feature_group: str = "none"
    feature_group_size: int = 3
    target_aware: bool = False
    col_ssmax: str = "none"
    icl_ssmax: str = "none"
    rope_interleaved: bool = True

    @classmethod
    def lite(cls) -> TabICLConfig:
        """The shipped size: ``embed_dim=32``, 2 + 2 + 4 blocks, ICL width 128."""
        return cls(
            embed_dim=32,
            col_blocks=2,
            col_heads=2,
            n_inducing=32,
            row_blocks=2,
            row_heads=4,
            icl_blocks=4,
            icl_heads=4,
        )

    @classmethod
    def v2(cls, **sizes) -> TabICLConfig:
        """The official TabICL v2 classifier's architecture (``tabicl-classifier-v2``):
        the paper sizes with 8 column and in-context heads and every v2 mechanism;
        ``sizes`` override fields."""
        return cls(
            **{
                "col_heads": 8,
                "icl_heads": 8,
                "col_affine": False,
                "feature_group": "same",
                "target_aware": True,
                "col_ssmax": "qassmax-mlp-elementwise",
                "icl_ssmax": "qassmax-mlp-elementwise",
                "rope_interleaved": False,
                "standardize": False,
                **sizes,
            }
        )

    @property
    def generation(self) -> int:
        """2 when any TabICL v2 mechanism is on, else 1."""
        v1 = (
            self.col_affine
            and self.feature_group == "none"
            and not self.target_aware
            and self.col_ssmax == self.icl_ssmax == "none"
            and self.rope_interleaved
        )
        return 1 if v1 else 2

    def __post_init__(self):
        # every size, so a hand-edited checkpoint config fails here, naming the field
        for name in (
            "embed_dim",
            "col_blocks",
            "col_heads",
            "n_inducing",
            "row_blocks",
            "row_heads",
            "n_cls",
            "icl_blocks",
            "icl_heads",
            "ff_factor",
        ):
            check_scalar(getattr(self, name), name, low=1, integer=True)
        check_scalar(self.max_classes, "max_classes", low=2, integer=True)
        check_scalar(self.rope_base, "rope_base", low=0.0, low_inclusive=False)
        check_scalar(self.clip_z, "clip_z", low=0.0, low_inclusive=False)
        check_scalar(self.feature_group_size, "feature_group_size", low=1, integer=True)
        for name in ("standardize", "col_affine", "target_aware", "rope_interleaved"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.feature_group not in FEATURE_GROUPS:
            raise ValueError(
                f"feature_group must be one of {FEATURE_GROUPS}, got {self.feature_group!r} "
                "(the official 'valid' grouping is not implemented)"
            )
        if self.col_affine and self.feature_group != "none":
            raise ValueError(
                "col_affine=True needs feature_group='none': the affine embedding x * W + B "
                "multiplies one cell, a group has several (the official cannot compute it)"
            )
        for name in ("col_ssmax", "icl_ssmax"):
            if getattr(self, name) not in SSMAX_TYPES:
                raise ValueError(
                    f"{name} must be one of {SSMAX_TYPES}, got {getattr(self, name)!r} (the "
                    "official's other scalable softmaxes are not implemented)"
                )
        for dim, heads in (("embed_dim", "col_heads"), ("icl_dim", "icl_heads")):
            if getattr(self, dim) % getattr(self, heads):
                raise ValueError(
                    f"{dim} ({getattr(self, dim)}) must be a multiple of {heads} "
                    f"({getattr(self, heads)})"
                )
        if self.embed_dim % self.row_heads or (self.embed_dim // self.row_heads) % 2:
            raise ValueError(
                "embed_dim / row_heads must be an even integer (rotary embedding), got "
                f"embed_dim={self.embed_dim}, row_heads={self.row_heads}"
            )

    @property
    def icl_dim(self) -> int:
        return self.n_cls * self.embed_dim


def standardize(X: torch.Tensor, n_train: int, clip_z: float) -> torch.Tensor:
    """Standardize each column with its training rows' mean and std, clip at ``±clip_z``.

    NaN entries are ignored in the statistics and set to 0 (the training mean) after
    scaling. ``X`` is ``(B, T, H)``; constant columns become 0.
    """
    return _scale(X, *_column_stats(X[:, :n_train]), clip_z)


def _column_stats(train: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std ``(B, 1, H)`` of the training rows ``(B, n, H)``, NaN ignored."""
    mask = ~torch.isnan(train)
    count = mask.sum(1, keepdim=True).clamp_min(1)
    zero = torch.zeros((), dtype=train.dtype, device=train.device)
    mean = torch.where(mask, train, zero).sum(1, keepdim=True) / count
    var = torch.where(mask, train - mean, zero) ** 2
    return mean, (var.sum(1, keepdim=True) / (count - 1).clamp_min(1)).sqrt()


def _scale(X: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, clip_z: float) -> torch.Tensor:
    Z = torch.nan_to_num((X - mean) / (std + 1e-6), nan=0.0)
    return Z.clamp(-clip_z, clip_z)


@dataclass
class Context:
    """What :meth:`TabICL.context` keeps of the training rows (a KV cache): test rows
    then need only their own column, row and in-context stages.

    Attributes
    ----------
    y_train : LongTensor (B, n_train)
    n_features : int
        ``H``, the training rows' number of columns.
    stats : (mean, std) of shape (B, 1, H), or None
        The training rows' column statistics (``config.standardize``).
    summaries : list of Tensor (B, H, D, n_inducing, E)
        Per column-embedding block, its inducing points after reading the training rows
        (``D`` = 1, or the label digits of a target-aware model with more than
        ``max_classes`` classes, :func:`mixed_radix_digits`).
    rows : Tensor (B, n_train, icl_dim)
        The training rows' representations (column and row stages).
    keys_values : list of (Tensor, Tensor), each (B, icl_heads, n_train, icl_dim / heads), or None
        Per in-context block, the keys and values of the labelled training rows (``None``
        when built with ``keys_values=False``: the in-context stage then runs on the
        cached representations).
    views : (LongTensor (V,), LongTensor (V, H')) or None
        The views the context was built with (:meth:`TabICL.forward`); ``B`` above is
        then ``V`` except for ``stats``, which stay per table, and ``summaries``, which
        stay per table unless the column stage depends on the view (feature grouping,
        target-aware).
    """

    y_train: torch.Tensor
    n_features: int
    stats: tuple[torch.Tensor, torch.Tensor] | None
    summaries: list[torch.Tensor]
    rows: torch.Tensor
    keys_values: list[tuple[torch.Tensor, torch.Tensor]] | None
    views: tuple[torch.Tensor, torch.Tensor] | None = None

    @property
    def n_train(self) -> int:
        return self.y_train.shape[1]

    @property
    def nbytes(self) -> int:
        """Memory the context holds, in bytes."""
        tensors = [self.rows, *self.summaries, *(self.stats or ())]
        tensors += [t for kv in self.keys_values or () for t in kv]
        return sum(t.numel() * t.element_size() for t in tensors)


def mixed_radix_bases(n_classes: int, max_classes: int) -> list[int]:
    """Balanced bases ``[k_0, ..., k_{D-1}]``, each at most ``max_classes``, whose product
    covers ``n_classes``: ``D = ceil(log n / log max_classes)``, every ``k = ceil(n ** (1 /
    D))``, then bases raised by one in turn while the product falls short (the official
    v2's rule; 25 classes over 10 give ``[5, 5]``)."""
    if n_classes <= max_classes:
        return [n_classes]
    digits = math.ceil(math.log(n_classes) / math.log(max_classes))
    k = min(math.ceil(n_classes ** (1.0 / digits)), max_classes)
    bases, product = [k] * digits, k**digits
    for i in range(digits):
        if product >= n_classes:
            break
        if bases[i] < max_classes:
            product = product // bases[i] * (bases[i] + 1)
            bases[i] += 1
    return bases


def mixed_radix_digits(y: torch.Tensor, max_classes: int) -> list[torch.Tensor]:
    """Labels ``y`` as digits of :func:`mixed_radix_bases` of ``y.max() + 1`` classes, most
    significant first: one label tensor (values below ``max_classes``) per digit, or ``[y]``
    when ``y`` has at most ``max_classes`` classes."""
    bases = mixed_radix_bases(int(y.max()) + 1, max_classes)
    if len(bases) == 1:
        return [y]
    return [(y // math.prod(bases[d + 1 :])) % bases[d] for d in range(len(bases))]


class ColumnEmbedding(nn.Module):
    """Distribution-aware column embedding: every column is a set of its ``T`` cells.

    ``Linear(g, E)`` of each cell (``g`` values: the cell, or its group with
    ``feature_group``), plus its row's label embedding on the training rows
    (``target_aware``), then induced set attention whose inducing points read the training
    rows only. v1 (``col_affine``): ``e_ij = x_ij * W_ij + B_ij`` with ``W = LN(Linear(h))``
    and ``B = LN(Linear(h))``; v2: ``e_ij = h_ij``. Works on cells ``(B, H, T, g)``
    (:meth:`cells`) and gives ``(B, T, H, E)``.
    """

    def __init__(self, cfg: TabICLConfig):
        super().__init__()
        e = cfg.embed_dim
        self.group = cfg.feature_group_size if cfg.feature_group != "none" else 1
        self.max_classes = cfg.max_classes
        self.inp = nn.Linear(self.group, e)
        self.label = nn.Embedding(cfg.max_classes, e) if cfg.target_aware else None
        self.blocks = nn.ModuleList(
            InducedSetBlock(e, cfg.col_heads, cfg.n_inducing, cfg.ff_factor, cfg.col_ssmax)
            for _ in range(cfg.col_blocks)
        )
        self.affine = cfg.col_affine
        if self.affine:
            self.out_w = nn.Sequential(nn.Linear(e, e), nn.LayerNorm(e))
            self.out_b = nn.Sequential(nn.Linear(e, e), nn.LayerNorm(e))

    def cells(self, X: torch.Tensor) -> torch.Tensor:
        """The column stage's input of a table ``X`` (B, T, H): ``(B, H, T, g)``, cell
        ``(i, j)`` being ``x[i, (j + 2^k) mod H]`` for ``k < g`` with feature grouping (the
        official "same" grouping: every column keeps its place, read with shifted
        neighbours), else ``x[i, j]`` alone."""
        cols = X.transpose(1, 2)
        if self.group == 1:
            return cols.unsqueeze(-1)
        h = cols.shape[1]
        shifts = 2 ** torch.arange(self.group, device=X.device)
        index = (torch.arange(h, device=X.device)[:, None] + shifts) % h  # (H, g)
        return cols[:, index].transpose(2, 3)  # (B, H, g, T) -> (B, H, T, g)

    def forward(
        self, cells: torch.Tensor, n_train: int, y_train: torch.Tensor | None = None
    ) -> torch.Tensor:
        z = self._lift(cells)
        outs = []
        for labels in self._digits(y_train):
            zd = self._with_labels(z, labels, cells.shape[1])
            for block in self.blocks:
                zd = block(zd, n_train)
            outs.append(zd)
        return self._embed(cells, _mean(outs))

    def context(
        self, cells: torch.Tensor, y_train: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The training rows' cells (B, H, n, g) alone: their embedding (B, n, H, E) and
        every block's inducing summary (B, H, D, n_inducing, E), ``D`` the label digits
        (1 unless a target-aware model sees more than ``max_classes`` classes)."""
        z = self._lift(cells)
        outs, summaries = [], []
        for labels in self._digits(y_train):
            zd = self._with_labels(z, labels, cells.shape[1])
            per_block = []
            for block in self.blocks:
                summary = block.summarize(zd)
                zd = block.write(zd, summary)
                per_block.append(summary.unflatten(0, cells.shape[:2]))
            outs.append(zd)
            summaries.append(per_block)
        stacked = [torch.stack(block, dim=2) for block in zip(*summaries, strict=True)]
        return self._embed(cells, _mean(outs)), stacked

    def embed(self, cells: torch.Tensor, summaries: list[torch.Tensor]) -> torch.Tensor:
        """Rows' cells (B, H, T, g) against the training rows' :meth:`context` summaries:
        what :meth:`forward` gives those rows, (B, T, H, E)."""
        z = self._lift(cells)
        outs = []
        for d in range(summaries[0].shape[2]):
            zd = z
            for block, summary in zip(self.blocks, summaries, strict=True):
                zd = block.write(zd, summary[:, :, d].flatten(0, 1))
            outs.append(zd)
        return self._embed(cells, _mean(outs))

    def _digits(self, y_train: torch.Tensor | None) -> list[torch.Tensor | None]:
        if self.label is None:
            return [None]
        if y_train is None:
            raise ValueError("y_train is required: the model's column stage is target-aware")
        return mixed_radix_digits(y_train, self.max_classes)

    def _with_labels(self, z: torch.Tensor, labels: torch.Tensor | None, h: int) -> torch.Tensor:
        """``z`` (B * H, T, E) with the label embedding of ``labels`` (B, n_train) added
        to the training rows of every column."""
        if labels is None:
            return z
        n = labels.shape[1]
        emb = self.label(labels).unsqueeze(1).expand(-1, h, -1, -1).flatten(0, 1)
        return torch.cat((z[:, :n] + emb, z[:, n:]), dim=1)

    def _lift(self, cells: torch.Tensor) -> torch.Tensor:
        b, h, t, _ = cells.shape
        return self.inp(cells).reshape(b * h, t, -1)

    def _embed(self, cells: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        z = z.reshape(*cells.shape[:3], -1)
        emb = cells * self.out_w(z) + self.out_b(z) if self.affine else z
        return emb.transpose(1, 2)  # (B, T, H, E)


def _mean(outs: list[torch.Tensor]) -> torch.Tensor:
    """The average of the per-digit outputs, summed in order as the official does."""
    total = outs[0]
    for out in outs[1:]:
        total = total + out
    return total / len(outs)


class RowInteraction(nn.Module):
    """Per-row transformer over the features with rotary position and CLS tokens.

    ``(B, T, H, E) -> (B, T, n_cls * E)``: the CLS outputs, layer-normalised and
    concatenated, so every row gets a fixed-width vector whatever ``H`` is.
    """

    def __init__(self, cfg: TabICLConfig):
        super().__init__()
        e = cfg.embed_dim
        self.cls = nn.Parameter(torch.randn(cfg.n_cls, e) * e**-0.5)
        rope = RotaryEmbedding(e // cfg.row_heads, cfg.rope_base, cfg.rope_interleaved)
        self.blocks = nn.ModuleList(
            Block(e, cfg.row_heads, cfg.ff_factor, rope=rope) for _ in range(cfg.row_blocks)
        )
        self.norm = nn.LayerNorm(e)

    def forward(self, emb: torch.Tensor) -> torch.Tensor:
        b, t = emb.shape[:2]
        cls = self.cls.expand(b, t, -1, -1)
        z = torch.cat((cls, emb), dim=2)
        for block in self.blocks:
            z = block(z)
        return self.norm(z[:, :, : self.cls.shape[0]]).flatten(2)


class ICLearning(nn.Module):
    """Dataset-wise in-context learning: every row attends to the training rows only.

    Training rows get a label embedding added; the output of test rows goes through a
    final LayerNorm and an MLP decoder to ``max_classes`` logits.
    """

    def __init__(self, cfg: TabICLConfig):
        super().__init__()
        d = cfg.icl_dim
        self.label = nn.Embedding(cfg.max_classes, d)
        self.blocks = nn.ModuleList(
            Block(d, cfg.icl_heads, cfg.ff_factor, ssmax=cfg.icl_ssmax)
            for _ in range(cfg.icl_blocks)
        )
        self.norm = nn.LayerNorm(d)
        self.decoder = nn.Sequential(
            nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, cfg.max_classes)
        )

    def forward(self, rows: torch.Tensor, y_train: torch.Tensor) -> torch.Tensor:
        n_train = y_train.shape[1]
        z = torch.cat((rows[:, :n_train] + self.label(y_train), rows[:, n_train:]), dim=1)
        for block in self.blocks:
            z = block(z, kv_rows=n_train)
        return self.decoder(self.norm(z[:, n_train:]))

    def context(
        self, rows: torch.Tensor, y_train: torch.Tensor
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Every block's keys and values of the labelled training rows ``rows``
        (B, n_train, d): training rows attend only to each other, so they do not depend
        on any test row."""
        z = rows + self.label(y_train)
        keys_values = []
        for block in self.blocks:
            key, value = block.keys_values(z)
            keys_values.append((key, value))
            z = block.attend(z, key, value)
        return keys_values

    def predict(
        self, rows: torch.Tensor, keys_values: list[tuple[torch.Tensor, torch.Tensor]]
    ) -> torch.Tensor:
        """Logits of test rows ``rows`` (B, T, d) against a :meth:`context`."""
        z = rows
        for block, (key, value) in zip(self.blocks, keys_values, strict=True):
            z = block.attend(z, key, value)
        return self.decoder(self.norm(z))


def _check_integer(y_train: torch.Tensor) -> None:
    if y_train.dtype.is_floating_point or y_train.dtype.is_complex or y_train.dtype == torch.bool:
        raise TypeError(f"y_train must hold integer class labels, got dtype {y_train.dtype}")


def _check_views(views, X: torch.Tensor) -> None:
    if views is None:
        return
    tables, columns = views
    if tables.ndim != 1 or columns.ndim != 2 or columns.shape[0] != tables.shape[0]:
        raise ValueError(
            "views must be (tables (V,), columns (V, H')) index tensors, got shapes "
            f"{tuple(tables.shape)} and {tuple(columns.shape)}"
        )
    for name, index, size in (("tables", tables, X.shape[0]), ("columns", columns, X.shape[2])):
        if index.dtype != torch.long or (
            index.numel() and not 0 <= int(index.min()) <= int(index.max()) < size
        ):
            raise ValueError(f"views' {name} must be int64 indices in [0, {size}), got {index}")


def _select(emb: torch.Tensor, views) -> torch.Tensor:
    """Embeddings ``(B, T, H, E)`` of the tables -> ``(V, T, H', E)`` of the views."""
    if views is None:
        return emb
    tables, columns = views
    return emb[tables[:, None], :, columns].transpose(1, 2)  # (V, H', T, E) -> (V, T, H', E)


class TabICL(nn.Module, PretrainedModelMixin):
    """TabICL (Qu et al., ICML 2025): a tabular foundation model for in-context learning.

    ``forward(X, y_train)`` standardizes every column with its training rows (unless
    ``config.standardize`` is off), embeds the columns (:class:`ColumnEmbedding`), turns
    each row into a fixed-width vector (:class:`RowInteraction`) and predicts the test
    rows from the labelled training rows (:class:`ICLearning`). No weight changes at
    prediction time: the training rows are the context.

    Parameters
    ----------
    config : TabICLConfig, optional
        Sizes; the paper's v1 sizes by default.
    chunk_cells : int
        Cells (rows x columns) the column and row stages process at a time when gradients
        are off: columns are independent in the first stage and rows in the second, so
        chunking bounds their working memory without changing the result (with autograd
        on, activations are kept anyway and the stages run in one pass). A runtime
        setting, not saved.

    ``save_pretrained(folder)`` writes ``config.json`` (the :class:`TabICLConfig` fields)
    and ``model.safetensors`` atomically; ``TabICL.from_pretrained(folder or hub id,
    map_location=...)`` loads them (huggingface_hub's mixin, strict, no pickle).
    """

    def __init__(self, config: TabICLConfig | None = None, chunk_cells: int = 2**14):
        super().__init__()
        self.config = config or TabICLConfig()
        self._hub_mixin_config = self.config  # config.json holds the sizes, not chunk_cells
        self.chunk_cells = chunk_cells
        self.col = ColumnEmbedding(self.config)
        self.row = RowInteraction(self.config)
        self.icl = ICLearning(self.config)

    def forward(
        self,
        X: torch.Tensor,
        y_train: torch.Tensor,
        n_classes: torch.Tensor | int | None = None,
        *,
        views: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Logits of the test rows.

        Parameters
        ----------
        X : Tensor, shape (B, T, H)
            Training rows first, then test rows; NaN marks a missing value.
        y_train : LongTensor, shape (B, n_train)
            Labels in ``[0, max_classes)`` (one row per view with ``views``).
        n_classes : int or LongTensor of shape (B,), optional
            Classes per table; logits of absent classes are set to ``-inf``.
        views : (LongTensor (V,), LongTensor (V, H')), optional
            ``(tables, columns)``: the batch is ``V`` views, view ``v`` being columns
            ``columns[v]`` of table ``tables[v]`` of ``X``, as an ensemble of feature orders
            needs. Columns are embedded independently of each other, so each table's
            columns are embedded once and shared by its views: the same logits as
            ``forward(stacked views)``, for a fraction of the column stage's cost.

        Returns
        -------
        Tensor, shape (B or V, T - n_train, max_classes)
        """
        n_train = y_train.shape[1]
        batch = X.shape[0] if views is None else views[0].shape[0]
        if y_train.ndim != 2 or X.ndim != 3 or batch != y_train.shape[0]:
            raise ValueError(
                f"X must be (B, T, H) and y_train (B, n_train) (B = the number of views with "
                f"views=); got {tuple(X.shape)} and {tuple(y_train.shape)}"
            )
        if not 0 < n_train < X.shape[1]:
            raise ValueError(f"need 0 < n_train < T rows, got n_train={n_train}, T={X.shape[1]}")
        self._check_labels(y_train, n_classes)
        rows = self.represent(X, n_train, views=views, y_train=y_train)
        return self._mask(self.icl(rows, y_train), n_classes)

    def _check_labels(self, y_train: torch.Tensor, n_classes) -> None:
        """``y_train`` integer labels in ``[0, n_classes)``, ``n_classes`` in
        ``[2, max_classes]`` (per table, or ``max_classes`` when not given)."""
        top = self.config.max_classes
        _check_integer(y_train)
        k = torch.as_tensor(top if n_classes is None else n_classes, device=y_train.device)
        if k.dtype.is_floating_point or int(k.min()) < 2 or int(k.max()) > top:
            raise ValueError(
                f"n_classes must be integers in [2, max_classes={top}], got {n_classes!r}"
            )
        if y_train.numel() and (
            int(y_train.min()) < 0 or bool((y_train >= k.reshape(-1, 1)).any())
        ):
            shown = k.tolist() if n_classes is not None else top
            raise ValueError(
                f"y_train must hold labels in [0, n_classes) (n_classes {shown}), got "
                f"{int(y_train.min())}..{int(y_train.max())}"
            )

    def represent(
        self,
        X: torch.Tensor,
        n_train: int,
        *,
        views: tuple[torch.Tensor, torch.Tensor] | None = None,
        y_train: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Row representations: the column and row stages, ``(B, T, H) -> (B, T, icl_dim)``
        (``(V, T, icl_dim)`` with ``views``, as in :meth:`forward`).

        The in-context stage (``self.icl(rows, y_train)``) can then run on any subset of
        the rows, as the class hierarchy does, without embedding the columns again.
        ``y_train`` (B or V, n_train), integer labels, is needed by a target-aware model
        (``config.target_aware``); it may hold more than ``max_classes`` classes there
        (mixed-radix digits).
        """
        if X.ndim != 3:
            raise ValueError(f"X must be (B, T, H), got shape {tuple(X.shape)}")
        if not 0 < n_train <= X.shape[1]:
            raise ValueError(f"need 0 < n_train <= T rows, got n_train={n_train}, T={X.shape[1]}")
        _check_views(views, X)
        y_train = self._column_labels(y_train, n_train, X, views)
        stats = _column_stats(X[:, :n_train]) if self.config.standardize else None
        X, views = self._views_first(self._input(X, stats), views)
        cells = self.col.cells(X)
        per_cols, _ = self._chunks(X)
        h = X.shape[2]
        emb = torch.cat(
            [self.col(cells[:, j : j + per_cols], n_train, y_train) for j in range(0, h, per_cols)],
            dim=2,
        )
        return self._rows(_select(emb, views))

    def context(
        self,
        X_train: torch.Tensor,
        y_train: torch.Tensor,
        *,
        keys_values: bool = True,
        views: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> Context:
        """Run the training rows through the network once and keep what test rows need.

        Parameters
        ----------
        X_train : Tensor, shape (B, n_train, H)
        y_train : LongTensor, shape (B, n_train)
        keys_values : bool
            Keep every in-context block's keys and values (``2 * icl_blocks * n_train *
            icl_dim`` numbers per table): later test rows then cost only their own
            stages. ``False`` keeps only the training rows' representations (``icl_dim``
            per row) and re-runs the in-context stage on them for every call.
        views : (LongTensor (V,), LongTensor (V, H')), optional
            Views of the tables as in :meth:`forward`; ``y_train`` is then ``(V,
            n_train)`` and later test rows are given as the same tables.

        Returns
        -------
        Context
            For :meth:`forward_context`; its results equal :meth:`forward` on the
            training rows followed by the test rows (to float rounding).
        """
        batch = X_train.shape[0] if views is None else views[0].shape[0]
        if X_train.ndim != 3 or y_train.ndim != 2 or (batch, X_train.shape[1]) != y_train.shape:
            raise ValueError(
                "X_train must be (B, n_train, H) and y_train (B, n_train) (B = the number of "
                f"views with views=); got {tuple(X_train.shape)} and {tuple(y_train.shape)}"
            )
        if X_train.shape[1] < 1:
            raise ValueError("X_train has no rows; the context needs at least one")
        _check_views(views, X_train)
        labels = self._column_labels(y_train, X_train.shape[1], X_train, views)
        stats = _column_stats(X_train) if self.config.standardize else None
        X, col_views = self._views_first(self._input(X_train, stats), views)
        cells = self.col.cells(X)
        per_cols, _ = self._chunks(X)
        parts = [
            self.col.context(cells[:, j : j + per_cols], labels)
            for j in range(0, X.shape[2], per_cols)
        ]
        emb = torch.cat([emb for emb, _ in parts], dim=2)
        summaries = [torch.cat(block, dim=1) for block in zip(*(s for _, s in parts), strict=True)]
        rows = self._rows(_select(emb, col_views))
        cache = self.icl.context(rows, y_train) if keys_values else None
        return Context(y_train, X_train.shape[2], stats, summaries, rows, cache, views)

    def represent_context(self, X: torch.Tensor, context: Context) -> torch.Tensor:
        """Representations ``(B, T, icl_dim)`` of rows ``X`` (B, T, H) given the training
        rows' :class:`Context`: what :meth:`represent` gives them beside those rows."""
        h = context.n_features
        b = context.summaries[0].shape[0] if context.views is None else "B"
        if X.ndim != 3 or X.shape[2] != h or (context.views is None and X.shape[0] != b):
            raise ValueError(
                f"X must be (B, T, H) = ({b}, T, {h}) like the context's training rows, got "
                f"shape {tuple(X.shape)}"
            )
        _check_views(context.views, X)
        X, views = self._views_first(self._input(X, context.stats), context.views)
        cells = self.col.cells(X)
        per_cols, _ = self._chunks(X)
        emb = torch.cat(
            [
                self.col.embed(
                    cells[:, j : j + per_cols],
                    [s[:, j : j + per_cols] for s in context.summaries],
                )
                for j in range(0, h, per_cols)
            ],
            dim=2,
        )
        return self._rows(_select(emb, views))

    def forward_context(
        self,
        X: torch.Tensor,
        context: Context,
        n_classes: torch.Tensor | int | None = None,
    ) -> torch.Tensor:
        """Logits ``(B, T, max_classes)`` of test rows ``X`` (B, T, H) against a
        :meth:`context` of the training rows: :meth:`forward` without running the
        training rows again."""
        rows = self.represent_context(X, context)
        if context.keys_values is None:
            logits = self.icl(torch.cat((context.rows, rows), dim=1), context.y_train)
        else:
            logits = self.icl.predict(rows, context.keys_values)
        return self._mask(logits, n_classes)

    def _mask(self, logits: torch.Tensor, n_classes) -> torch.Tensor:
        if n_classes is None:
            return logits
        k = torch.as_tensor(n_classes, device=logits.device).reshape(-1, 1, 1)
        absent = torch.arange(self.config.max_classes, device=logits.device) >= k
        return logits.masked_fill(absent, float("-inf"))

    def _views_first(self, X: torch.Tensor, views) -> tuple[torch.Tensor, tuple | None]:
        """``(X, views)`` for the column stage. A column's embedding depends on the column
        order (``feature_group``) or on the labels (``target_aware``, which differ between
        class-shifted views): the views' tables are then built before it (``(V, T, H')``,
        no views left); otherwise the columns are embedded once per table and shared."""
        if views is None or (self.config.feature_group == "none" and not self.config.target_aware):
            return X, views
        tables, columns = views
        return X[tables[:, None], :, columns].transpose(1, 2), None

    def _column_labels(self, y_train, n_train: int, X: torch.Tensor, views) -> torch.Tensor | None:
        """``y_train`` checked for the column stage of a target-aware model (else unused)."""
        if not self.config.target_aware or y_train is None:  # the column stage says if needed
            return None
        batch = X.shape[0] if views is None else views[0].shape[0]
        _check_integer(y_train)
        if tuple(y_train.shape) != (batch, n_train):
            raise ValueError(
                f"y_train must be (B, n_train) = ({batch}, {n_train}), got {tuple(y_train.shape)}"
            )
        if y_train.numel() and int(y_train.min()) < 0:
            raise ValueError(f"y_train must hold labels >= 0, got {int(y_train.min())}")
        return y_train

    def _input(self, X: torch.Tensor, stats) -> torch.Tensor:
        """``X`` standardised with the training rows' ``stats`` (``config.standardize``),
        else checked for missing values; refused when infinite or not in the weights'
        floating dtype."""
        dtype = self.col.inp.weight.dtype
        if X.dtype != dtype:
            raise TypeError(
                f"X must have the model's dtype {dtype}, got {X.dtype} (X.to({dtype}), or "
                "TabICLClassifier, which converts tables)"
            )
        if torch.isinf(X).any():
            raise ValueError("X has infinite values; NaN marks a missing value, inf is refused")
        if self.config.standardize:
            return _scale(X, *stats, self.config.clip_z)
        if torch.isnan(X).any():
            raise ValueError(
                "X has missing values (NaN); a model with standardize=False (an official "
                "checkpoint) expects imputed, standardised tables: use TabICLClassifier"
            )
        return X

    def _chunks(self, X: torch.Tensor) -> tuple[int, int]:
        """Columns and rows per chunk of the column and row stages (``chunk_cells``)."""
        b, t, h = X.shape[:3]
        cells = self.chunk_cells if not torch.is_grad_enabled() else b * t * h
        return max(1, cells // (b * t)), max(1, cells // (b * h))

    def _rows(self, emb: torch.Tensor) -> torch.Tensor:
        """The row stage of embeddings ``(B, T, H, E)``, in chunks of rows."""
        _, per_rows = self._chunks(emb)
        t = emb.shape[1]
        return torch.cat([self.row(emb[:, i : i + per_rows]) for i in range(0, t, per_rows)], dim=1)

    @property
    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())
