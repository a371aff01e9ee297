"""A small Mixtral-architecture MoE language model trained on text every machine has: the
Python standard library's own source files. Used by the experiment and the benchmark;
cached after the first run (``save_pretrained`` folders, no pickles)."""

from __future__ import annotations

import hashlib
import math
import sysconfig
import zlib
from pathlib import Path

import torch

from icml25_core import build_once, track


def stdlib_texts(max_chars: int = 4_000_000) -> tuple[list[str], list[str]]:
    """Source files of the standard library (no tests), split by file name: about one file
    in ten (``crc32(name) % 10 == 0``) is held out. Returns ``(train, test)`` texts, each
    list capped at ``max_chars`` characters, in sorted file order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    skip = {"test", "tests", "idlelib", "site-packages", "dist-packages", "lib2to3", "tkinter"}
    files = sorted(p for p in root.rglob("*.py") if not skip & set(p.relative_to(root).parts[:-1]))
    train, test, sizes = [], [], [0, 0]
    for p in files:
        try:
            text = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        held = zlib.crc32(str(p.relative_to(root)).encode()) % 10 == 0
        if sizes[held] + len(text) > max_chars:
            continue
        (test if held else train).append(text)
        sizes[held] += len(text)
    if not train or not test:
        raise RuntimeError(f"found no standard-library sources under {root}")
    return train, test


def train_tokenizer(texts: list[str], vocab_size: int = 1024):
    """A byte-level BPE tokenizer (``tokenizers``) with ``<s>`` / ``</s>``, as a
    ``PreTrainedTokenizerFast``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<s>", "</s>"],
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")


def encode(tokenizer, texts: list[str]) -> torch.Tensor:
    """One long 1-D id stream: every text as ``<s> text </s>``."""
    ids = []
    for t in texts:
        ids += [tokenizer.bos_token_id, *tokenizer(t)["input_ids"], tokenizer.eos_token_id]
    return torch.tensor(ids)


def tiny_mixtral(
    vocab_size: int, hidden: int = 128, layers: int = 4, experts: int = 8, seed: int = 0
):
    """A small ``MixtralForCausalLM`` (top-2 of ``experts``; intermediate size 2 x hidden)."""
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(seed)
    config = MixtralConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=experts,
        num_experts_per_tok=2,
        max_position_embeddings=1024,
        bos_token_id=0,
        eos_token_id=1,
        tie_word_embeddings=False,
        router_aux_loss_coef=0.02,
    )
    return MixtralForCausalLM(config)


def train_lm(
    model,
    ids: torch.Tensor,
    steps: int,
    seq_len: int = 128,
    batch_size: int = 16,
    lr: float = 3e-3,
    seed: int = 0,
    show_progress: bool = False,
) -> list[float]:
    """Next-token training on random windows of ``ids`` with the router load-balancing loss;
    warm-up + cosine AdamW. Returns the language-model loss per step."""
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.95))
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)),
    )
    model.train()
    losses = []
    for _ in track(range(steps), "train") if show_progress else range(steps):
        starts = torch.randint(0, len(ids) - seq_len - 1, (batch_size,), generator=g)
        batch = torch.stack([ids[s : s + seq_len] for s in starts.tolist()])
        out = model(batch, labels=batch, output_router_logits=True, use_cache=False)
        opt.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        lm_loss = out.loss - model.config.router_aux_loss_coef * out.aux_loss
        losses.append(float(lm_loss.detach()))
    model.eval()
    return losses


def cached_model(
    steps: int,
    vocab_size: int = 1024,
    hidden: int = 128,
    seed: int = 0,
    show_progress: bool = False,
):
    """``(model, tokenizer, train_ids, test_ids)``: trained once, then loaded from the
    icml25 cache (:func:`icml25_core.build_once`, entry ``moequant/<key>``; the key names
    the settings and hashes the corpus). A second process waits for the first one's
    training instead of training again; an interrupted training leaves no entry."""
    from transformers import AutoTokenizer, MixtralForCausalLM

    train, test = stdlib_texts()
    digest = hashlib.sha256("".join(train[:50] + test[:5]).encode()).hexdigest()[:8]

    def build(folder: Path) -> None:
        # One thread: top-2 routing turns the last-bit differences between thread counts
        # into a different model, so a cache built by a one-thread test worker and one built
        # by a two-thread run would disagree. The key names the torch version for the same
        # reason.
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            tokenizer = train_tokenizer(train, vocab_size)
            model = tiny_mixtral(vocab_size, hidden, seed=seed)
            ids = encode(tokenizer, train)
            train_lm(model, ids, steps, seed=seed, show_progress=show_progress)
        finally:
            torch.set_num_threads(threads)
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)

    version = torch.__version__.split("+")[0]
    name = f"mixtral-v{vocab_size}-h{hidden}-s{steps}-seed{seed}-{digest}-t1-torch{version}"
    folder = build_once(name, build, package="moequant")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = MixtralForCausalLM.from_pretrained(folder).eval()
    return model, tokenizer, encode(tokenizer, train), encode(tokenizer, test)
