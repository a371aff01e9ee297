"""A word-level tokenizer for captions of a closed vocabulary (the synthetic data), as a
transformers ``PreTrainedTokenizerFast`` with CLIP's start/end-of-text tokens."""

from __future__ import annotations

from collections.abc import Iterable


def word_tokenizer(words: Iterable[str]):
    """Tokenizer whose vocabulary is ``<pad> <|startoftext|> <unk> <|endoftext|> . words``
    (ids 0, 1, 2, 3, ...); text is lower-cased and split on whitespace and punctuation.

    EOS is id 3, not 2: transformers' CLIP treats ``eos_token_id == 2`` as the legacy
    OpenAI vocabulary and pools at the highest token id instead of at EOS.
    """
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    special = ["<pad>", "<|startoftext|>", "<unk>", "<|endoftext|>"]
    vocab = {t: i for i, t in enumerate(special)}
    for w in [".", *sorted({w.lower() for w in words})]:
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
    )
    tok.post_processor = processors.TemplateProcessing(
        single="<|startoftext|> $A <|endoftext|>",
        special_tokens=[("<|startoftext|>", 1), ("<|endoftext|>", 3)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        bos_token="<|startoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<unk>",
    )
