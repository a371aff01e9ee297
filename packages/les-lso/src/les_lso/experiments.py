"""The paper's claim at laptop scale: ``over-exploration``.

A GRU sequence VAE (:class:`~les_lso.models.SequenceVAE`) is trained on arithmetic
expressions sampled from the grammar (:mod:`les_lso.grammar`). Two checks follow.

**Telling valid from invalid decodes.** The official protocol pools encoded training
latents with draws of ``N(0, eps^2 I)`` and ``N(0, (5 eps)^2 I)`` (``eps`` = the VAE's
latent scale, 0.1: the issue's ``N(0, 0.1^2)`` and ``N(0, 0.5^2)``), decodes each greedily
and labels it valid when the string parses. Every score ranks the pool: LES, polarity
LES, the decoder likelihood, the MC-dropout decoder uncertainty (the reference's
``uncertainty`` baseline, :func:`~les_lso.score.uncertainty_score`), the prior
log-density and the kNN distance to encoded expressions held out of training (k = 3).
Reported: AUROC (valid = positive) and the seconds each score took on the pool.

**Latent space optimization.** From ``n_init`` encoded training expressions with their
objective values, each optimizer runs ``rounds`` of Bayesian optimization (a
``SingleTaskGP`` on the valid points found so far, qLogEI): the reference's penalized,
normalized gradient ascent on qLogEI (no penalty, LES, polarity LES, likelihood, prior,
kNN; ``n_steps`` 10, ``alpha`` 0.5, ``lr`` 0.03, started from observed latents; LES also
with ``A`` frozen at the start as the official optimizer does, but exact), and BoTorch's
``optimize_acqf`` on qLogEI in
the box of the training latents widened by a quarter on each side, with and without
:class:`~les_lso.acquisition.LESPenalty` (hinge below LES's median on the training
latents, weight 1). Reported: the fraction of proposals that decode to valid
expressions, the best objective reached (initial data included) and its gain over the
initial best.

The claim (Ronen et al., 2025): LES detects invalid (out-of-distribution) decodes better
than the prior, likelihood and distance baselines, and penalizing with LES keeps LSO
valid. Here it holds when LES's mean AUROC exceeds each baseline's and the LES penalty
raises the validity rate of both gradient ascent and BoTorch over their unpenalized runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from icml25_core import Experiment, Row, Verdict, grouped_bars, mean_metric

from . import grammar
from .acquisition import LESPenalty
from .models import SequenceVAE
from .optimize import optimize_latent
from .score import knn_score, les, likelihood_score, prior_score, uncertainty_score
from .training import train_vae

PROFILES = {
    "smoke": {
        "n_train": 300,
        "n_ref": 60,
        "epochs": 1,
        "hidden": 32,
        "layers": 2,
        "n_pool": 16,
        "n_init": 30,
        "rounds": 1,
        "batch": 2,
        "ga_lr": 0.03,
        "n_steps": 2,
        "restarts": 2,
        "raw_samples": 8,
        "maxiter": 3,
        "uncertainty_preds": 2,
    },
    "quick": {
        "n_train": 3000,
        "n_ref": 300,
        "epochs": 15,
        "hidden": 128,
        "layers": 2,
        "n_pool": 200,
        "n_init": 100,
        "rounds": 3,
        "batch": 10,
        "ga_lr": 0.03,
        "n_steps": 10,
        "restarts": 2,
        "raw_samples": 32,
        "maxiter": 10,
        "uncertainty_preds": 10,
    },
    "full": {
        "n_train": 20000,
        "n_ref": 1000,
        "epochs": 20,
        "hidden": 128,
        "layers": 2,
        "n_pool": 500,
        "n_init": 300,
        "rounds": 8,
        "batch": 10,
        "ga_lr": 0.03,
        "n_steps": 10,
        "restarts": 2,
        "raw_samples": 64,
        "maxiter": 20,
        "uncertainty_preds": 40,
    },
}
"""Training expressions, kNN reference latents, VAE epochs, GRU width and depth, latents
per pool, initial LSO data, BO rounds, proposals per round, gradient-ascent step length
(the reference's default) and steps, BoTorch's restarts, raw samples and L-BFGS
iterations, and the greedy decodes of the uncertainty baseline (the reference's OOD study
takes 40). Two GRU layers: the reference's decoder has dropout only between its layers,
so a one-layer GRU has no MC-dropout ensemble for the uncertainty baseline."""

TRAINING = {"lr": 3e-3, "beta": 0.01, "batch_size": 32}
"""VAE training (:func:`~les_lso.training.train_vae`) in every profile."""
SCORE_BASELINES = ("likelihood", "uncertainty", "prior", "kNN")
SCORES = ("LES", "LES (polarity)", *SCORE_BASELINES)
GA_PENALTIES = {
    "GA": None,
    "GA + likelihood": "likelihood",
    "GA + prior": "prior",
    "GA + kNN": "kNN",
    "GA + LES": "les",
    "GA + LES (polarity)": "polarity",
    "GA + LES (A frozen at z0)": "les",
}
BOTORCH = ("BoTorch qLogEI", "BoTorch qLogEI + LES")
LSO_BASELINES = ("GA", "GA + likelihood", "GA + prior", "GA + kNN", "BoTorch qLogEI")
UNCERTAINTY_MODELS = 10
"""Dropout masks scoring each greedy decode of the uncertainty baseline (the reference's
``n_models``)."""
PENALTY_WEIGHT = 1.0
"""``regularization_parameter`` of the BoTorch LES penalty."""
PENALTY_QUANTILE = 0.5
"""The BoTorch penalty's hinge: LES's median on the initial (training) latents."""


def _auroc(valid: np.ndarray, score: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    if valid.min() == valid.max():
        return float("nan")
    return float(roc_auc_score(valid, score))


def _valid(vae: SequenceVAE, z: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        strings = grammar.decode(vae.decode(z).cpu().numpy())
    return np.array([grammar.is_valid(s) for s in strings], dtype=bool)


def _timed_scores(fn: Callable[[torch.Tensor], torch.Tensor], z: torch.Tensor, chunk: int = 64):
    """Scores of ``z`` in chunks and their wall time (after a warm-up call: the first
    forward-mode call loads torch's decompositions)."""
    with torch.no_grad():
        fn(z[:2])
    start = time.perf_counter()
    with torch.no_grad():
        out = torch.cat([fn(z[i : i + chunk]) for i in range(0, len(z), chunk)])
    return out.cpu().numpy(), time.perf_counter() - start


def _score_fns(vae: SequenceVAE, reference: torch.Tensor, n_preds: int) -> dict[str, Callable]:
    return {
        "LES": lambda z: les(vae.decoder, z),
        "LES (polarity)": lambda z: les(vae.decoder, z, polarity=True),
        "likelihood": lambda z: likelihood_score(vae.decoder, z),
        "uncertainty": lambda z: uncertainty_score(
            vae.decoder, z, n_models=UNCERTAINTY_MODELS, n_preds=n_preds
        ),
        "prior": lambda z: prior_score(z, scale=vae.eps_std),
        "kNN": lambda z: knn_score(z, reference),
    }


def _detection_rows(vae, train_tokens, reference, config, seed, g) -> list[Row]:
    n = config["n_pool"]
    with torch.no_grad():
        pools = {
            "data": vae.encode(train_tokens[:n]),
            "prior": vae.sample_prior(n, g),
            "far": 5.0 * vae.sample_prior(n, g),
        }
    z = torch.cat(list(pools.values()))
    valid = _valid(vae, z)
    fractions = {
        f"valid_{k}": float(v.mean()) for k, v in zip(pools, np.split(valid, 3), strict=True)
    }
    rows = [Row("VAE decodes", seed, fractions, {"task": "pool"}, baseline=True)]
    for name, fn in _score_fns(vae, reference, config["uncertainty_preds"]).items():
        scores, seconds = _timed_scores(fn, z)
        metrics = {"auroc": _auroc(valid, scores), "time_s": seconds}
        rows.append(
            Row(name, seed, metrics, {"task": "detection"}, baseline=name in SCORE_BASELINES)
        )
    return rows


def _evaluate(vae: SequenceVAE, z: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    with torch.no_grad():
        strings = grammar.decode(vae.decode(z).cpu().numpy())
    y = np.array([grammar.objective(s) for s in strings])
    return ~np.isnan(y), y


def _fit_gp(z: torch.Tensor, y: torch.Tensor):
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.models.transforms import Normalize
    from gpytorch.mlls import ExactMarginalLogLikelihood

    gp = SingleTaskGP(z, y[:, None], input_transform=Normalize(z.shape[1]))
    fit_gpytorch_mll(ExactMarginalLogLikelihood(gp.likelihood, gp))
    return gp


def _propose(name, vae, gp, best_f, z_obs, box, threshold, reference, config, g) -> torch.Tensor:
    from botorch.acquisition.logei import qLogExpectedImprovement
    from botorch.acquisition.penalized import PenalizedAcquisitionFunction
    from botorch.optim import optimize_acqf

    acqf = qLogExpectedImprovement(gp, best_f=best_f)
    if name in BOTORCH:
        if name.endswith("LES"):
            penalty = LESPenalty(vae.decoder, threshold=threshold)
            acqf = PenalizedAcquisitionFunction(
                acqf, penalty, regularization_parameter=PENALTY_WEIGHT
            )
        torch.manual_seed(int(torch.randint(2**31 - 1, (1,), generator=g)))
        cand, _ = optimize_acqf(
            acqf,
            bounds=box,
            q=config["batch"],
            num_restarts=config["restarts"],
            raw_samples=config["raw_samples"],
            options={"maxiter": config["maxiter"]},
            retry_on_optimization_warning=False,
        )
        return cand.detach()
    start = z_obs[torch.randperm(len(z_obs), generator=g)[: config["batch"]]]
    penalty = GA_PENALTIES[name]
    if penalty == "prior":
        penalty = lambda z: prior_score(z, scale=vae.eps_std)  # noqa: E731
    elif penalty == "kNN":
        penalty = lambda z: knn_score(z, reference.to(z))  # noqa: E731
    return optimize_latent(
        lambda z: acqf(z[:, None, :]),
        vae.decoder,
        start,
        n_steps=config["n_steps"],
        lr=config["ga_lr"],
        penalty=penalty,
        grad="reference" if name.endswith("(A frozen at z0)") else "full",
    )


def _lso_rows(vae, tokens, reference, config, seed, g) -> list[Row]:
    with torch.no_grad():
        z_init = vae.encode(tokens[: config["n_init"]]).double()
    strings = grammar.decode(tokens[: config["n_init"]].cpu().numpy())
    y_init = torch.tensor([grammar.objective(s) for s in strings], dtype=torch.float64)
    lo, hi = z_init.min(0).values, z_init.max(0).values
    box = torch.stack([lo - 0.25 * (hi - lo), hi + 0.25 * (hi - lo)])
    with torch.no_grad():
        threshold = float(torch.quantile(les(vae.decoder, z_init), PENALTY_QUANTILE))
    reference = reference.double()
    rows = []
    for name in (*GA_PENALTIES, *BOTORCH):
        z_obs, y_obs = z_init.clone(), y_init.clone()
        valid_all, y_new = [], []
        start = time.perf_counter()
        for _ in range(config["rounds"]):
            gp = _fit_gp(z_obs, y_obs)
            z = _propose(name, vae, gp, y_obs.max(), z_obs, box, threshold, reference, config, g)
            ok, y = _evaluate(vae, z.to(vae.encoder.mu.weight))
            valid_all.append(ok)
            y_new.extend(y[ok].tolist())
            keep = torch.as_tensor(ok)
            z_obs = torch.cat([z_obs, z[keep].to(z_obs)])
            y_obs = torch.cat([y_obs, torch.as_tensor(y[ok], dtype=torch.float64)])
        best0 = float(y_init.max())
        best = max([best0, *y_new])
        metrics = {
            "validity": float(np.concatenate(valid_all).mean()),
            "best": best,
            "improvement": best - best0,
            "time_s": time.perf_counter() - start,
        }
        rows.append(Row(name, seed, metrics, {"task": "lso"}, baseline=name in LSO_BASELINES))
    return rows


def _run(config: dict[str, Any], seed: int, out_dir: Path) -> list[Row]:
    exprs = grammar.sample_expressions(config["n_train"] + config["n_ref"], seed=seed)
    tokens = torch.as_tensor(grammar.encode(exprs))
    train, ref = tokens[: config["n_train"]], tokens[config["n_train"] :]
    torch.manual_seed(seed)
    vae = SequenceVAE(
        decoder="gru",
        hidden_size=config["hidden"],
        num_layers=config["layers"],
        encoder_size="wide",
    )
    train_vae(vae, train, epochs=config["epochs"], seed=seed, **TRAINING)
    with torch.no_grad():
        reference = vae.encode(ref)
    g = torch.Generator().manual_seed(seed)
    return _detection_rows(vae, train, reference, config, seed, g) + _lso_rows(
        vae, train, reference, config, seed, g
    )


def _judge(rows: list[Row]) -> Verdict:
    def mean(metric: str, method: str) -> float:
        return mean_metric(rows, metric, method)

    auroc = {m: mean("auroc", m) for m in SCORES}
    best = max(SCORE_BASELINES, key=lambda m: auroc[m])
    detects = auroc["LES"] > auroc[best]
    valid = {m: mean("validity", m) for m in (*GA_PENALTIES, *BOTORCH)}
    ga_ok = valid["GA + LES"] > valid["GA"]
    bo_ok = valid["BoTorch qLogEI + LES"] > valid["BoTorch qLogEI"]
    held = detects and ga_ok and bo_ok
    cost = mean("time_s", "LES") / mean("time_s", "likelihood")
    text = (
        f"{'held' if held else 'did not hold'}: AUROC LES {auroc['LES']:.3f} (polarity "
        f"{auroc['LES (polarity)']:.3f}) vs likelihood {auroc['likelihood']:.3f}, uncertainty "
        f"{auroc['uncertainty']:.3f}, prior "
        f"{auroc['prior']:.3f}, kNN {auroc['kNN']:.3f} (LES costs {cost:.0f}x the likelihood); "
        f"validity GA + LES {valid['GA + LES']:.2f} vs GA {valid['GA']:.2f} (likelihood "
        f"{valid['GA + likelihood']:.2f}, prior {valid['GA + prior']:.2f}), BoTorch + LES "
        f"{valid['BoTorch qLogEI + LES']:.2f} vs BoTorch {valid['BoTorch qLogEI']:.2f}; best "
        f"objective GA + LES {mean('best', 'GA + LES'):.3f} vs GA {mean('best', 'GA'):.3f}, "
        f"BoTorch + LES {mean('best', 'BoTorch qLogEI + LES'):.3f} vs BoTorch "
        f"{mean('best', 'BoTorch qLogEI'):.3f} (holds when LES's AUROC beats every baseline's "
        "and the LES penalty raises both optimizers' validity)"
    )
    return Verdict(held, text)


def _plot(rows: list[Row], out_dir: Path) -> list[Path]:
    auroc = {m: [mean_metric(rows, "auroc", m)] for m in SCORES}
    lso = (*GA_PENALTIES, *BOTORCH)
    validity = {m: [mean_metric(rows, "validity", m)] for m in lso}
    return [
        grouped_bars(
            auroc,
            ["valid vs invalid decodes"],
            out_dir / "auroc.png",
            ylabel="AUROC",
            ylim=(0, 1),
            hline=0.5,
        ),
        grouped_bars(
            validity,
            ["LSO proposals"],
            out_dir / "validity.png",
            ylabel="valid fraction",
            ylim=(0, 1),
        ),
    ]


OVER_EXPLORATION = Experiment(
    name="over-exploration",
    claim=(
        "LES tells valid from invalid decodes better (AUROC) than the prior, likelihood, "
        "MC-dropout uncertainty and kNN scores, and an LES penalty raises the validity of "
        "gradient-ascent and BoTorch "
        "latent space optimization"
    ),
    run=_run,
    judge=_judge,
    profiles=PROFILES,
    plot=_plot,
    default_seeds=3,
)
