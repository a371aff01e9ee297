"""les-lso: the Latent Exploration Score for latent space optimization (Ronen et al.,
ICML 2025).

Latent space optimization searches a VAE's latent space for a decoded object with a
high objective value; the search wanders where the decoder never saw data and decodes
garbage. LES scores a latent by how much the decoder's (softmax-composed) map contracts
volume there, ``-1/2 log det(J^T J)`` from the singular values of its Jacobian: high
where the decoder was trained. It is batched and differentiable, so it serves as a
penalty for gradient ascent (:func:`optimize_latent`) and in BoTorch
(:class:`LESPenalty`, :func:`les_constraint`). The package ships sequence VAEs with GRU,
LSTM and Transformer decoders (loading the official GRU and LSTM checkpoints), the
arithmetic expression grammar, its objective, and the prior, likelihood, MC-dropout
uncertainty and kNN baselines.
"""

from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from icml25_core.lazy import lazy_exports

if TYPE_CHECKING:  # the public API, imported on first use (the entry point stays light)
    from .acquisition import LESPenalty, les_constraint
    from .models import (
        DECODERS,
        OFFICIAL_PRESETS,
        ConvEncoder,
        GRUDecoder,
        LSTMDecoder,
        SequenceVAE,
        TransformerDecoder,
    )
    from .optimize import GRADS, PENALTIES, normalize_rows, optimize_latent
    from .score import (
        JACOBIANS,
        decoder_jacobian,
        knn_score,
        les,
        likelihood_score,
        prior_score,
        softmax_jacobian,
        uncertainty_score,
    )
    from .training import train_vae

__getattr__, __dir__ = lazy_exports(__name__, __file__)

__version__ = _version("les-lso")

__all__ = [
    "DECODERS",
    "GRADS",
    "JACOBIANS",
    "OFFICIAL_PRESETS",
    "PENALTIES",
    "ConvEncoder",
    "GRUDecoder",
    "LESPenalty",
    "LSTMDecoder",
    "SequenceVAE",
    "TransformerDecoder",
    "__version__",
    "decoder_jacobian",
    "knn_score",
    "les",
    "les_constraint",
    "likelihood_score",
    "normalize_rows",
    "optimize_latent",
    "prior_score",
    "softmax_jacobian",
    "train_vae",
    "uncertainty_score",
]
