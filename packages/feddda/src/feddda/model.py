"""FedDDA's model: a frozen transformers ``CLIPModel`` with a decoupled prompt learner,
shared and specific visual adapters and a 3-way gate.

Text: every class prompt is ``[SOS] <global ctx> <class name> with a style of <local ctx> .
[EOS]``; the global context (the textual prior, shared by all clients) and the local
context (the client's style) are learnable token embeddings, initialised ``N(0, 0.02)``;
the text feature is the final-layer state at EOS through the text projection.

Image: the frozen image feature ``f``; adapters ``A(f) = ReLU(W2 ReLU(W1 f))`` (``d -> d/4
-> d``, no bias), one shared and one client-specific; gate ``g = softmax(W_g f)`` (``d -> 3``,
no bias); ``f' = g0 f + g1 A_specific(f) + g2 A_shared(f)``.

Logits: ``exp(logit_scale) cos(f', t_c)``. The shared part (global context, shared adapter)
is what the server averages; the personal part (local context, specific adapter, gate)
stays on the client.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

SHARED_PREFIXES = ("prompt.global_ctx", "shared_adapter.")
PERSONAL_PREFIXES = ("prompt.local_ctx", "specific_adapter.", "gate.")


class Adapter(nn.Module):
    """``ReLU(W2 ReLU(W1 f))`` with ``W1: d -> d / reduction``, ``W2: d / reduction -> d``."""

    def __init__(self, dim: int, reduction: int = 4):
        super().__init__()
        self.down = nn.Linear(dim, dim // reduction, bias=False)
        self.up = nn.Linear(dim // reduction, dim, bias=False)

    def forward(self, f: torch.Tensor) -> torch.Tensor:
        return F.relu(self.up(F.relu(self.down(f))))


class PromptLearner(nn.Module):
    """Learnable global and local contexts around every class name.

    Parameters
    ----------
    token_embedding : nn.Embedding
        The frozen CLIP token embedding (read, never trained).
    tokenizer : transformers tokenizer adding BOS and EOS
    classnames : sequence of str
    n_global, n_local : int
        Context lengths (16 and 16 in the paper); ``n_local = 0`` gives a CoOp prompt
        ``[SOS] <ctx> <class name> . [EOS]`` (the baselines).
    style_phrase : str
        The words between the class name and the local context.
    max_length : int
        The text tower's position limit.
    """

    def __init__(
        self,
        token_embedding: nn.Embedding,
        tokenizer,
        classnames: Sequence[str],
        n_global: int = 16,
        n_local: int = 16,
        style_phrase: str = "with a style of",
        max_length: int = 77,
        init_std: float = 0.02,
    ):
        super().__init__()
        if not classnames or any(not isinstance(c, str) or not c.strip() for c in classnames):
            raise ValueError(f"classnames must be non-empty strings, got {classnames!r}")
        if len(set(classnames)) != len(classnames):
            raise ValueError(f"classnames must be distinct, got {classnames!r}")
        if n_global < 1 or n_local < 0:
            raise ValueError(f"need n_global >= 1 and n_local >= 0, got {n_global}, {n_local}")
        dim = token_embedding.weight.shape[1]
        self.classnames = list(classnames)
        self.n_global, self.n_local = n_global, n_local
        self.global_ctx = nn.Parameter(torch.randn(n_global, dim) * init_std)
        self.local_ctx = nn.Parameter(torch.randn(n_local, dim) * init_std) if n_local else None

        unk = getattr(tokenizer, "unk_token_id", None)

        def ids(text: str) -> list[int]:
            out = list(tokenizer(text, add_special_tokens=False)["input_ids"])
            if not out:
                raise ValueError(f"the tokenizer maps {text!r} to no token")
            if unk is not None and unk in out:
                raise ValueError(
                    f"unknown class name or word in {text!r}: the tokenizer maps "
                    "part of it to its unknown token"
                )
            return out

        bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
        if bos is None or eos is None:
            raise ValueError("the tokenizer needs BOS and EOS tokens (CLIP's start/end of text)")
        style = ids(style_phrase) if n_local else []
        period = ids(".")
        rows, eot = [], []
        for name in self.classnames:
            middle = ids(name) + style
            length = 1 + n_global + len(middle) + n_local + len(period) + 1
            if length > max_length:
                raise ValueError(
                    f"prompt for class {name!r} needs {length} tokens, more than the text "
                    f"tower's {max_length}: shorten the contexts or the class name"
                )
            rows.append((middle, period))
            eot.append(length - 1)
        width = max(eot) + 1
        # frozen token embeddings of the fixed words, padded with EOS embeddings
        emb = token_embedding.weight.detach()
        pieces = torch.zeros(len(rows), width, dim)
        slots = torch.zeros(len(rows), width, dtype=torch.long)  # 0 word, 1 global, 2 local
        for r, (middle, period_ids) in enumerate(rows):
            seq = [bos] + [-1] * n_global + middle + [-2] * n_local + period_ids + [eos]
            seq += [eos] * (width - len(seq))
            for p, t in enumerate(seq):
                if t >= 0:
                    pieces[r, p] = emb[t]
                slots[r, p] = {-1: 1, -2: 2}.get(t, 0)
        self.register_buffer("word_embeds", pieces)
        self.register_buffer("slots", slots)
        self.register_buffer("eot", torch.tensor(eot))

    def forward(self) -> torch.Tensor:
        """Prompt embeddings ``(classes, width, dim)``."""
        out = self.word_embeds.clone()
        n = out.shape[0]
        out[self.slots == 1] = self.global_ctx.repeat(n, 1).to(out.dtype)
        if self.local_ctx is not None:
            out[self.slots == 2] = self.local_ctx.repeat(n, 1).to(out.dtype)
        return out


class FedDDAModel(nn.Module):
    """FedDDA (or a CoOp / PromptFL baseline) on a frozen ``CLIPModel``.

    Parameters
    ----------
    clip : transformers.CLIPModel
        Loaded with ``CLIPModel.from_pretrained(path_or_id)``; frozen here.
    tokenizer : its tokenizer
    classnames : sequence of str
    n_global, n_local : int
        Context lengths; ``n_local = 0`` with ``adapters=False`` is the CoOp / PromptFL
        prompt learner.
    adapters : bool
        Use the shared / specific adapters and the gate (FedDDA) or the raw image feature.
    """

    def __init__(
        self,
        clip,
        tokenizer,
        classnames: Sequence[str],
        n_global: int = 16,
        n_local: int = 16,
        adapters: bool = True,
        reduction: int = 4,
    ):
        super().__init__()
        self.clip = clip.eval()
        for p in self.clip.parameters():
            p.requires_grad_(False)
        text = clip.text_model
        self.prompt = PromptLearner(
            text.embeddings.token_embedding,
            tokenizer,
            classnames,
            n_global,
            n_local,
            max_length=clip.config.text_config.max_position_embeddings,
        )
        dim = clip.config.projection_dim
        self.adapters = adapters
        if adapters:
            self.shared_adapter = Adapter(dim, reduction)
            self.specific_adapter = Adapter(dim, reduction)
            self.gate = nn.Linear(dim, 3, bias=False)

    @property
    def classnames(self) -> list[str]:
        return self.prompt.classnames

    @property
    def device(self) -> torch.device:
        return self.clip.logit_scale.device

    def text_features(self) -> torch.Tensor:
        """Normalised class text features ``(classes, dim)``."""
        text = self.clip.text_model
        embeds = self.prompt()
        hidden = text.embeddings(inputs_embeds=embeds)
        # CLIP's causal mask as a 4-D additive mask (what eager and SDPA attention take in
        # every transformers 5.x; transformers' own mask helper changed its arguments three
        # times between 5.0 and 5.24)
        n, length = hidden.shape[:2]
        mask = torch.full(
            (length, length),
            torch.finfo(hidden.dtype).min,
            dtype=hidden.dtype,
            device=hidden.device,
        ).triu(1)
        mask = mask[None, None].expand(n, 1, length, length)
        out = text.encoder(inputs_embeds=hidden, attention_mask=mask, is_causal=True)
        last = text.final_layer_norm(out.last_hidden_state)
        pooled = last[torch.arange(len(last), device=last.device), self.prompt.eot]
        return F.normalize(self.clip.text_projection(pooled), dim=-1)

    def gate_weights(self, f: torch.Tensor) -> torch.Tensor:
        """``softmax(W_g f)``, ``(batch, 3)``: raw feature, specific, shared adapter."""
        return torch.softmax(self.gate(f), dim=-1)

    def image_features(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Gated, adapted, normalised image features ``(batch, dim)``."""
        with torch.no_grad():
            f = self.clip.get_image_features(pixel_values=pixel_values)
            f = f.pooler_output if hasattr(f, "pooler_output") else f
        if self.adapters:
            g = self.gate_weights(f)
            f = (
                g[:, :1] * f
                + g[:, 1:2] * self.specific_adapter(f)
                + g[:, 2:] * self.shared_adapter(f)
            )
        return F.normalize(f, dim=-1)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Class logits ``(batch, classes)``."""
        scale = self.clip.logit_scale.exp()
        return scale * self.image_features(pixel_values) @ self.text_features().T

    def trainable_state(self) -> dict[str, torch.Tensor]:
        """Every trained tensor (contexts, adapters, gate), detached."""
        return {k: p.detach() for k, p in self.named_parameters() if p.requires_grad}

    def shared_state(self) -> dict[str, torch.Tensor]:
        """What the server averages: global context and shared adapter."""
        return {k: v for k, v in self.trainable_state().items() if k.startswith(SHARED_PREFIXES)}

    def personal_state(self) -> dict[str, torch.Tensor]:
        """What stays on the client: local context, specific adapter and gate."""
        return {k: v for k, v in self.trainable_state().items() if k.startswith(PERSONAL_PREFIXES)}

    def load_partial(self, state: dict[str, torch.Tensor]) -> None:
        """Load some trainable tensors (a shared or personal part); others are untouched."""
        own = self.trainable_state()
        unknown = sorted(set(state) - set(own))
        if unknown:
            raise ValueError(f"unknown or frozen entries in state: {unknown[:5]}")
        for k, v in state.items():
            if own[k].shape != v.shape:
                hint = (
                    " (n_global / n_local differ between sender and receiver?)"
                    if k.startswith("prompt.")
                    else ""
                )
                raise ValueError(
                    f"{k}: shape {tuple(v.shape)} does not match {tuple(own[k].shape)}{hint}"
                )
        self.load_state_dict(state, strict=False)
