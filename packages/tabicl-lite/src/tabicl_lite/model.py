"""The TabICL network: column embedding, row interaction, in-context learning.

Shapes: a batch of ``B`` tables with ``T`` rows (the first ``n_train`` are the training
rows, the rest are test rows) and ``H`` features, ``X`` of shape ``(B, T, H)``; training
labels ``y_train`` of shape ``(B, n_train)`` with values in ``[0, max_classes)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from icml25_core import check_scalar
from icml25_core.hub import PretrainedModelMixin

from .layers import Block, InducedSetBlock, RotaryEmbedding


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
        if not isinstance(self.standardize, bool):
            raise TypeError(f"standardize must be True or False, got {self.standardize!r}")
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
    summaries : list of Tensor (B, H, n_inducing, E)
        Per column-embedding block, its inducing points after reading the training rows.
    rows : Tensor (B, n_train, icl_dim)
        The training rows' representations (column and row stages).
    keys_values : list of (Tensor, Tensor), each (B, icl_heads, n_train, icl_dim / heads), or None
        Per in-context block, the keys and values of the labelled training rows (``None``
        when built with ``keys_values=False``: the in-context stage then runs on the
        cached representations).
    views : (LongTensor (V,), LongTensor (V, H')) or None
        The views the context was built with (:meth:`TabICL.forward`); ``B`` above is
        then ``V`` except for ``stats`` and ``summaries``, which stay per table.
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


class ColumnEmbedding(nn.Module):
    """Distribution-aware column embedding: ``e_ij = x_ij * W_ij + B_ij``.

    Each column is a set of its ``T`` values: ``Linear(1, E)`` then induced set attention
    whose inducing points read the training rows only; ``W = LN(Linear(h))`` and
    ``B = LN(Linear(h))``. ``(B, T, H) -> (B, T, H, E)``.
    """

    def __init__(self, cfg: TabICLConfig):
        super().__init__()
        e = cfg.embed_dim
        self.inp = nn.Linear(1, e)
        self.blocks = nn.ModuleList(
            InducedSetBlock(e, cfg.col_heads, cfg.n_inducing, cfg.ff_factor)
            for _ in range(cfg.col_blocks)
        )
        self.out_w = nn.Sequential(nn.Linear(e, e), nn.LayerNorm(e))
        self.out_b = nn.Sequential(nn.Linear(e, e), nn.LayerNorm(e))

    def forward(self, X: torch.Tensor, n_train: int) -> torch.Tensor:
        cols, z = self._lift(X)
        for block in self.blocks:
            z = block(z, n_train)
        return self._embed(cols, z)

    def context(self, X: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The training rows ``X`` (B, n, H) alone: their embedding (B, n, H, E) and every
        block's inducing summary (B, H, n_inducing, E)."""
        cols, z = self._lift(X)
        summaries = []
        for block in self.blocks:
            summary = block.summarize(z)
            z = block.write(z, summary)
            summaries.append(summary.unflatten(0, cols.shape[:2]))
        return self._embed(cols, z), summaries

    def embed(self, X: torch.Tensor, summaries: list[torch.Tensor]) -> torch.Tensor:
        """Rows ``X`` (B, T, H) against the training rows' :meth:`context` summaries:
        what :meth:`forward` gives those rows, (B, T, H, E)."""
        cols, z = self._lift(X)
        for block, summary in zip(self.blocks, summaries, strict=True):
            z = block.write(z, summary.flatten(0, 1))
        return self._embed(cols, z)

    def _lift(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cols = X.transpose(1, 2).unsqueeze(-1)  # (B, H, T, 1)
        b, h, t, _ = cols.shape
        return cols, self.inp(cols).reshape(b * h, t, -1)

    def _embed(self, cols: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        z = z.reshape(*cols.shape[:3], -1)
        emb = cols * self.out_w(z) + self.out_b(z)
        return emb.transpose(1, 2)  # (B, T, H, E)


class RowInteraction(nn.Module):
    """Per-row transformer over the features with rotary position and CLS tokens.

    ``(B, T, H, E) -> (B, T, n_cls * E)``: the CLS outputs, layer-normalised and
    concatenated, so every row gets a fixed-width vector whatever ``H`` is.
    """

    def __init__(self, cfg: TabICLConfig):
        super().__init__()
        e = cfg.embed_dim
        self.cls = nn.Parameter(torch.randn(cfg.n_cls, e) * e**-0.5)
        rope = RotaryEmbedding(e // cfg.row_heads, cfg.rope_base)
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
            Block(d, cfg.icl_heads, cfg.ff_factor) for _ in range(cfg.icl_blocks)
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
        rows = self.represent(X, n_train, views=views)
        return self._mask(self.icl(rows, y_train), n_classes)

    def _check_labels(self, y_train: torch.Tensor, n_classes) -> None:
        """``y_train`` integer labels in ``[0, n_classes)``, ``n_classes`` in
        ``[2, max_classes]`` (per table, or ``max_classes`` when not given)."""
        top = self.config.max_classes
        if (
            y_train.dtype.is_floating_point
            or y_train.dtype.is_complex
            or y_train.dtype == torch.bool
        ):
            raise TypeError(f"y_train must hold integer class labels, got dtype {y_train.dtype}")
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
    ) -> torch.Tensor:
        """Row representations: the column and row stages, ``(B, T, H) -> (B, T, icl_dim)``
        (``(V, T, icl_dim)`` with ``views``, as in :meth:`forward`).

        The in-context stage (``self.icl(rows, y_train)``) can then run on any subset of
        the rows, as the class hierarchy does, without embedding the columns again.
        """
        if X.ndim != 3:
            raise ValueError(f"X must be (B, T, H), got shape {tuple(X.shape)}")
        if not 0 < n_train <= X.shape[1]:
            raise ValueError(f"need 0 < n_train <= T rows, got n_train={n_train}, T={X.shape[1]}")
        _check_views(views, X)
        stats = _column_stats(X[:, :n_train]) if self.config.standardize else None
        X = self._input(X, stats)
        per_cols, _ = self._chunks(X)
        h = X.shape[2]
        emb = torch.cat(
            [self.col(X[..., j : j + per_cols], n_train) for j in range(0, h, per_cols)], dim=2
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
        stats = _column_stats(X_train) if self.config.standardize else None
        X = self._input(X_train, stats)
        per_cols, _ = self._chunks(X)
        parts = [self.col.context(X[..., j : j + per_cols]) for j in range(0, X.shape[2], per_cols)]
        emb = torch.cat([emb for emb, _ in parts], dim=2)
        summaries = [torch.cat(block, dim=1) for block in zip(*(s for _, s in parts), strict=True)]
        rows = self._rows(_select(emb, views))
        cache = self.icl.context(rows, y_train) if keys_values else None
        return Context(y_train, X.shape[2], stats, summaries, rows, cache, views)

    def represent_context(self, X: torch.Tensor, context: Context) -> torch.Tensor:
        """Representations ``(B, T, icl_dim)`` of rows ``X`` (B, T, H) given the training
        rows' :class:`Context`: what :meth:`represent` gives them beside those rows."""
        b, h = context.summaries[0].shape[0], context.n_features
        if X.ndim != 3 or X.shape[0] != b or X.shape[2] != h:
            raise ValueError(
                f"X must be (B, T, H) = ({b}, T, {h}) like the context's training rows, got "
                f"shape {tuple(X.shape)}"
            )
        X = self._input(X, context.stats)
        per_cols, _ = self._chunks(X)
        emb = torch.cat(
            [
                self.col.embed(
                    X[..., j : j + per_cols], [s[:, j : j + per_cols] for s in context.summaries]
                )
                for j in range(0, h, per_cols)
            ],
            dim=2,
        )
        return self._rows(_select(emb, context.views))

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
