"""LES cost: this package's batched forward-mode LES against the reference algorithm,
its finite-difference mode and the likelihood baseline, as the latent dimension and the
sequence length grow.

The reference algorithm (the official code's, written out here to time it): forward
finite differences with step 1e-4, one decoder call per latent direction, the dense
``L (V+1) x L V`` block-diagonal softmax Jacobian filled position by position, a batched
matrix product, and the SVD of ``J^T J``. Candidates: ``LES autograd`` (the default:
forward-mode ``torch.func`` Jacobian, ``J`` assembled block-wise, SVD of ``J``), ``LES
fd`` (five-point differences in float64, batched into one decoder call), ``likelihood`` (one decoder
pass). Decoders are random GRU decoders of width 64 (the cost does not depend on
training), a batch of 16 latents, CPU.

Run: ``icml25 bench les-lso`` (or ``--smoke``).
"""

from __future__ import annotations

import torch

from icml25_core import BenchReport, compare, make_report
from les_lso import GRUDecoder, les, likelihood_score


def reference_les(decoder, z: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """LES as the official code computes it (forward differences, dense ``S``)."""
    b, d = z.shape
    with torch.no_grad():
        base = decoder(z)
        cols = [(decoder(z + eps * torch.eye(d, dtype=z.dtype)[i]) - base) / eps for i in range(d)]
    length, vocab = base.shape[1:]
    a = torch.stack(cols, dim=-1).reshape(b, length * vocab, d)
    s_full = torch.zeros(b, length * (vocab + 1), length * vocab, dtype=z.dtype)
    probs = torch.softmax(base, -1)
    for i in range(b):
        for t in range(length):
            p = probs[i, t]
            block = torch.zeros(vocab + 1, vocab, dtype=z.dtype)
            block[:vocab] = torch.diag(p) - torch.outer(p, p)
            block[vocab] = -torch.exp(base[i, t]) / torch.exp(base[i, t]).sum() ** 2
            s_full[i, t * (vocab + 1) : (t + 1) * (vocab + 1), t * vocab : (t + 1) * vocab] = block
    j = s_full @ a
    return -0.5 * torch.log(torch.linalg.svdvals(j.transpose(1, 2) @ j)).sum(-1)


def _case(latent_dim: int, length: int, repeats: int, size: int | None, label: str):
    torch.manual_seed(0)
    decoder = GRUDecoder(latent_dim, 15, length, hidden=64, layers=1).eval()
    z = 0.1 * torch.randn(16, latent_dim)
    with torch.no_grad():
        exact = les(decoder.double(), z.double())
    decoder.float()
    extra = {}

    def error(name, fn):
        def run():
            with torch.no_grad():
                value = fn()
            extra[name] = {"max_abs_error": float((value.double() - exact).abs().max())}

        return run

    candidates = {
        "reference (forward FD, dense S)": error(
            "reference (forward FD, dense S)", lambda: reference_les(decoder, z)
        ),
        "LES autograd": error("LES autograd", lambda: les(decoder, z)),
        "LES fd": error("LES fd", lambda: les(decoder, z, jacobian="fd")),
        "likelihood": lambda: likelihood_score(decoder, z),
    }
    extra["likelihood"] = {"max_abs_error": float("nan")}
    return compare(
        candidates,
        reference="reference (forward FD, dense S)",
        label=label,
        size=size,
        repeats=repeats,
        extra=extra,
    )


def run(smoke: bool = False) -> BenchReport:
    length = 8 if smoke else 19
    dims = (4, 8) if smoke else (8, 25, 64)
    lengths = (6,) if smoke else (10, 40)
    repeats = 1 if smoke else 3
    # the latent-dimension sweep feeds the log-log slope; the length sweep is labelled only
    comparisons = [_case(d, length, repeats, d, f"d={d}, L={length}") for d in dims]
    comparisons += [
        _case(dims[-1 if smoke else 1], n, repeats, None, f"d={dims[-1 if smoke else 1]}, L={n}")
        for n in lengths
    ]
    notes = [
        "random GRU decoders (width 64, vocabulary 15), 16 latents, float32, CPU",
        "ratio < 1: faster than the reference algorithm on the same decoder and latents",
        "max_abs_error: against float64 forward-mode LES; the reference's float32 forward "
        "differences (step 1e-4) are noisy, and wrong where J is near-singular; this "
        "package's fd runs five-point differences in float64",
        "log-log slope: over the latent-dimension sweep at L = 19",
        "LES autograd / likelihood: the price of the score over one decoder pass",
    ]
    return make_report("les-lso LES cost", comparisons, "les-lso", "torch", notes=notes)


if __name__ == "__main__":
    run().render()
