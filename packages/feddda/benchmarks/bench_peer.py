"""FedDDA vs PromptFL on Flower's simulation engine: rounds per second and bytes per round.

The peer is the paper's baseline run by the same Flower app (``method = "promptfl"``):
PromptFL averages the whole prompt (``n_global + n_local`` context tokens), FedDDA only
the global context and the shared adapter (its local context, specific adapter and gate
never leave the client). Both run 4 clients (one synthetic style each) on the package's
pretrained CLIP (``--smoke``: a tiny random CLIP, 2 clients, 1 round, clients in this
process instead of Ray actors). Reported:

1. Wall time of a whole simulation (Ray start-up included), FedDDA vs PromptFL.
2. Per round, from the server's strategy: seconds per round (training + evaluation of all
   clients; round 1 also starts Ray's client actors, which import torch and load the CLIP,
   so rounds per second are given for the later rounds) and array bytes sent down and up
   (training and evaluation messages).

Run: ``icml25 bench feddda`` (or ``--smoke``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from feddda import simulate
from icml25_core import BenchReport, compare, make_report

ROUNDS, CLIENTS = 8, 4


def _tiny_clip(folder: Path) -> str:
    from transformers import CLIPConfig, CLIPModel

    from feddda.data import caption_words
    from feddda.pretrain import CONFIG
    from feddda.text import word_tokenizer

    CLIPModel(CLIPConfig(**CONFIG)).save_pretrained(folder)
    word_tokenizer(caption_words()).save_pretrained(folder)
    return str(folder)


def run(smoke: bool = False) -> BenchReport:
    with tempfile.TemporaryDirectory() as tmp:
        if smoke:
            clip, rounds, clients = _tiny_clip(Path(tmp) / "clip"), 1, 2
            extra = {"train_pool": 200, "test_per_client": 20}
            engine = "inprocess"
        else:
            from feddda.pretrain import cached_clip

            clip, rounds, clients = str(cached_clip(show_progress=True)), ROUNDS, CLIENTS
            extra, engine = {}, "ray"
        results = {}

        def job(method):
            def call():
                settings = {
                    "method": method,
                    "clip_path": clip,
                    "num_server_rounds": rounds,
                    **extra,
                }
                results[method] = simulate(settings, num_supernodes=clients, engine=engine)

            return call

        whole = compare(
            {"PromptFL": job("promptfl"), "FedDDA": job("feddda")},
            reference="PromptFL",
            label=f"{clients} clients x {rounds} rounds, simulation engine ({engine})",
            repeats=1,
            warmup=0,
            memory=False,
        )
    notes = []
    for method, result in results.items():
        traffic = [result["traffic"][str(r)] for r in range(1, rounds + 1)]
        down = sum(t["down"] for t in traffic) / rounds / 1024
        up = sum(t["up"] for t in traffic) / rounds / 1024
        per_round = ", ".join(f"{t['seconds']:.2f}" for t in traffic)
        later = [t["seconds"] for t in traffic[1:]]  # round 1 also starts the client actors
        speed = f"{len(later) / sum(later):.2f} rounds/s after round 1, " if later else ""
        notes.append(
            f"{method}: {speed}seconds per round {per_round}; "
            f"{down:.1f} KiB down + {up:.1f} KiB up per round ({clients} clients)"
        )
    fed, pfl = results["feddda"]["traffic"]["1"], results["promptfl"]["traffic"]["1"]
    notes.append(
        f"bytes per round FedDDA / PromptFL: {(fed['down'] + fed['up']) / (pfl['down'] + pfl['up']):.3f}"
    )
    return make_report("feddda", [whole], "flwr", "ray", "torch", "transformers", notes=notes)
