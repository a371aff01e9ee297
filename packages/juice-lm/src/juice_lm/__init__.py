"""juice-lm: Just Run Twice head steering for knowledge conflicts (Li, Chen & Tong, ICML 2025).

When a prompt's context contradicts what a language model knows, JuICE steers the model
toward its parametric memory (or toward the context) at test time, without training: a
few attention heads are scored on four samples (:func:`score_heads`, :func:`select_heads`),
and at every decoding step the model runs twice, the second run adding scaled outputs of
those heads taken from the first (:class:`JuICE`). Heads are edited through forward hooks
on the attention output projection of any supported Hugging Face causal LM (Llama, Qwen2,
Mistral, Gemma, Gemma2, GPT-NeoX, Phi, GPT-2; :func:`register_adapter` for more). The
package ships the paper's baselines: JUNE (run once), PH3 (head pruning), context-aware
decoding and prompting, the paper's Section-5 toy world (:class:`ToyWorld`) and a world of templated
natural-language facts with copying and paraphrased prompts (:class:`FactWorld`).
"""

from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from icml25_core.lazy import lazy_exports

if TYPE_CHECKING:  # the public API, imported on first use (the entry point stays light)
    from .baselines import CAD, INSTRUCTIONS, Prompting
    from .facts import FactWorld
    from .heads import ADAPTERS, AttentionHeads, HeadAdapter, register_adapter
    from .samples import (
        KINDS,
        MODES,
        ConflictSample,
        answer_token_id,
        encode_batch,
        is_correct,
        normalize_answer,
    )
    from .scoring import HeadScores, Selection, ablation_ranking, score_heads, select_heads
    from .steering import (
        JUNE,
        PH3,
        TOKENS_PER_WORD,
        Completion,
        HeadSteering,
        JuICE,
        evaluate,
        plain,
    )
    from .toy import ToyWorld, toy_model, train_toy, word_tokenizer

__getattr__, __dir__ = lazy_exports(__name__, __file__)

__version__ = _version("juice-lm")

__all__ = [
    "ADAPTERS",
    "CAD",
    "INSTRUCTIONS",
    "JUNE",
    "KINDS",
    "MODES",
    "PH3",
    "TOKENS_PER_WORD",
    "AttentionHeads",
    "Completion",
    "ConflictSample",
    "FactWorld",
    "HeadAdapter",
    "HeadScores",
    "HeadSteering",
    "JuICE",
    "Prompting",
    "Selection",
    "ToyWorld",
    "__version__",
    "ablation_ranking",
    "answer_token_id",
    "encode_batch",
    "evaluate",
    "is_correct",
    "normalize_answer",
    "plain",
    "register_adapter",
    "score_heads",
    "select_heads",
    "toy_model",
    "train_toy",
    "word_tokenizer",
]
