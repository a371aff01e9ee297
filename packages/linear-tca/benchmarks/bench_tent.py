"""LinearTCA against Tent on the same test stream: time, peak memory, growth with the
embedding dimension.

For each embedding dimension ``d`` a :class:`~linear_tca.digits.DigitsCNN` of width ``d``
(random weights: the cost does not depend on training) meets the same stream of 8x8
images. Candidates: Tent's one online pass (the reference, the usual TTA peer), LinearTCA
end to end (``adapt``: the source model's pass plus the alignment), the source model's
pass alone (the floor any method pays), and the alignment step alone on stored
embeddings. Peak memory: the resident-set growth the harness measures, and in the extras
the peak of the tensors each candidate creates (``TensorMemoryTracker``, one extra
untimed call), which is the allocator-level figure a GPU report would show.

Run: ``icml25 bench linear-tca`` (or ``--smoke``).
"""

from __future__ import annotations

import torch

from icml25_core import BenchReport, compare, make_report
from linear_tca import DigitsCNN, LinearTCA, SourceOnly, TensorMemoryTracker, Tent, adapt, classify


def _case(width: int, n: int, repeats: int):
    torch.manual_seed(width)
    model = DigitsCNN(width=width).eval()
    x = torch.rand(n, 1, 8, 8)
    loader = [x[i : i + 64] for i in range(0, n, 64)]
    stream = SourceOnly(model.featurizer, model.head).run(loader)

    candidates = {
        "Tent": lambda: Tent(model.featurizer, model.head).run(loader),
        "LinearTCA (adapt)": lambda: adapt(model, model.featurizer, model.head, loader),
        "source pass": lambda: SourceOnly(model.featurizer, model.head).run(loader),
        "LinearTCA step": lambda: classify(
            model.head, LinearTCA().fit_transform(stream.embeddings, stream.logits)
        ),
    }
    extra = {}
    for name, fn in candidates.items():
        with TensorMemoryTracker() as mem:
            fn()
        extra[name] = {"tensor_peak_mib": mem.peak_bytes / 2**20}
    for name in candidates:
        extra[name]["tensor_peak_vs_tent"] = (
            extra[name]["tensor_peak_mib"] / extra["Tent"]["tensor_peak_mib"]
        )
    return compare(
        candidates, reference="Tent", label=f"d={width}", size=width, repeats=repeats, extra=extra
    )


def run(smoke: bool = False) -> BenchReport:
    widths = (16, 32) if smoke else (32, 128, 512)
    n = 256 if smoke else 1024
    repeats = 1 if smoke else 3
    comparisons = [_case(w, n, repeats) for w in widths]
    notes = [
        f"stream of {n} random 8x8 images in batches of 64, DigitsCNN of width d, CPU",
        "ratio < 1: faster than Tent's online pass on the same stream",
        "LinearTCA (adapt) = source pass + LinearTCA step; Tent pays a forward and a "
        "backward pass per batch",
        "tensor_peak_mib: peak of the tensors the candidate creates (TensorMemoryTracker)",
    ]
    return make_report("linear-tca vs Tent", comparisons, "linear-tca", "torch", notes=notes)


if __name__ == "__main__":
    run().render()
