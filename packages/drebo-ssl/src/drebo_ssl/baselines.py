"""Baselines on the same ask/tell interface: BORE (supervised density ratio), BoTorch
GP + LogEI, TPE (optuna), random search.

- :class:`BORE` (Tiao et al., 2021): the same quantile labels as DRE-BO-SSL, but the
  classifier (an MLP or a random forest from scikit-learn) sees the labelled points only.
  This is the paper's direct comparison. By default it maximises the classifier's
  probability as in the BORE paper (``certain=None``: L-BFGS-B with the network's exact
  gradient from the best candidates for the MLP, the best candidate for the
  piecewise-constant forest); ``certain=0.99``
  adds DRE-BO-SSL's random pick among sure candidates, as the DRE-BO-SSL scripts do.
- :class:`GPLogEI`: BoTorch's ``SingleTaskGP`` (inputs in the unit cube, standardised
  outputs) with ``LogExpectedImprovement``, maximised by ``optimize_acqf`` (sampling) or over
  the unevaluated pool points (pool).
- :class:`TPE`: optuna's ``TPESampler`` with its defaults (sampling scenario only;
  install ``drebo-ssl[tpe]``).
- :class:`RandomSearch`: uniform points, or pool points without replacement.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.neural_network import MLPClassifier

from icml25_core import check_choice, check_scalar

from .acquisition import maximize_pool, maximize_sampling
from .base import AskTellOptimizer, DensityRatioOptimizer

CLASSIFIERS = ("mlp", "rf")


class RandomSearch(AskTellOptimizer):
    """Uniform random search (pool: random unevaluated points)."""


class BORE(DensityRatioOptimizer):
    """Supervised density-ratio BO: a classifier on the labelled points only.

    Parameters are those of :class:`~drebo_ssl.DREBOSSL` that apply, plus ``classifier``
    (``"mlp"``: two hidden layers of 32, or ``"rf"``: 100 trees) and ``certain`` (default
    ``None``: always maximise; ``0.99``: DRE-BO-SSL's random pick among sure candidates).
    """

    def __init__(
        self,
        bounds,
        classifier: str = "mlp",
        zeta: float = 0.33,
        pool=None,
        n_candidates: int = 1000,
        seed: int | None = None,
        *,
        n_starts: int = 100,
        certain: float | None = None,
        maximize: bool = False,
    ):
        super().__init__(
            bounds,
            zeta=zeta,
            n_candidates=n_candidates,
            n_starts=n_starts,
            certain=certain,
            pool=pool,
            maximize=maximize,
            seed=seed,
        )
        self.classifier = check_choice(classifier, "classifier", CLASSIFIERS)

    def _model(self):
        """The fitted classifier's class-1 probability ``(m, d) -> (m,)`` and, for the MLP,
        its exact value and gradient at one point (else ``None``); ``None`` before both
        classes exist."""
        labels = self._labels()
        if labels is None:
            return None
        seed = int(self.rng.integers(2**31))
        if self.classifier == "rf":
            clf = RandomForestClassifier(n_estimators=100, random_state=seed)
        else:
            clf = MLPClassifier((32, 32), max_iter=2000, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            clf.fit(self.to_unit(self.X_), labels)
        col = list(clf.classes_).index(1)
        grad = (lambda z: mlp_value_and_grad(clf, z)) if self.classifier == "mlp" else None
        return (lambda Z: clf.predict_proba(Z)[:, col]), grad

    def _suggest(self, n: int) -> tuple[np.ndarray, dict]:
        model = self._model()
        if model is None:
            return self._random_unit(n), {"branch": "random"}
        proba, value_and_grad = model
        return maximize_sampling(
            proba,
            self.dim,
            self.rng,
            n=n,
            n_candidates=self.n_candidates,
            n_starts=self.n_starts,
            value_and_grad=value_and_grad,
            certain=self.certain,
            optimize=self.classifier == "mlp",  # a forest is piecewise constant
        )

    def _suggest_pool(self, free: np.ndarray, n: int) -> tuple[np.ndarray, dict]:
        model = self._model()
        if model is None:
            return self.rng.choice(free.size, size=n, replace=False), {"branch": "random"}
        return maximize_pool(
            model[0], self.to_unit(self.pool[free]), self.rng, n=n, certain=self.certain
        )


def mlp_value_and_grad(clf, z: np.ndarray) -> tuple[float, np.ndarray]:
    """Class-1 probability of a fitted binary scikit-learn ``MLPClassifier`` (ReLU hidden
    layers, logistic output) at one point ``z`` (d,), and its exact gradient (d,)."""
    if clf.activation != "relu" or clf.out_activation_ != "logistic":
        raise ValueError("mlp_value_and_grad needs a binary MLPClassifier with ReLU layers")
    h, masks = np.asarray(z, dtype=float), []
    for W, b in zip(clf.coefs_[:-1], clf.intercepts_[:-1], strict=True):
        a = h @ W + b
        masks.append(a > 0)
        h = np.maximum(a, 0.0)
    logit = float(h @ clf.coefs_[-1][:, 0] + clf.intercepts_[-1][0])
    p1 = 1.0 / (1.0 + np.exp(-logit))  # scikit-learn's probability of classes_[1]
    g = clf.coefs_[-1][:, 0] * p1 * (1.0 - p1)  # d p1 / d h_last
    for W, mask in zip(reversed(clf.coefs_[:-1]), reversed(masks), strict=True):
        g = W @ (g * mask)
    if list(clf.classes_).index(1) == 0:  # class 1 is scikit-learn's negative class
        return 1.0 - p1, -g
    return p1, g


class GPLogEI(AskTellOptimizer):
    """BoTorch GP + LogEI. ``num_restarts`` / ``raw_samples`` go to ``optimize_acqf``."""

    def __init__(
        self,
        bounds,
        pool=None,
        seed: int | None = None,
        *,
        num_restarts: int = 10,
        raw_samples: int = 256,
        maximize: bool = False,
    ):
        super().__init__(bounds, pool=pool, maximize=maximize, seed=seed)
        self.num_restarts = check_scalar(num_restarts, "num_restarts", low=1, integer=True)
        self.raw_samples = check_scalar(raw_samples, "raw_samples", low=1, integer=True)

    def _acquisition(self, q: int = 1):
        """Analytic LogEI for one point, qLogEI for a joint batch of ``q`` points."""
        import torch
        from botorch.acquisition import LogExpectedImprovement, qLogExpectedImprovement
        from botorch.fit import fit_gpytorch_mll
        from botorch.models import SingleTaskGP
        from botorch.models.transforms import Standardize
        from gpytorch.mlls import ExactMarginalLogLikelihood

        finite = np.isfinite(self.losses_)
        if finite.sum() < 2:
            return None
        X = torch.as_tensor(self.to_unit(self.X_[finite]), dtype=torch.float64)
        Y = torch.as_tensor(-self.losses_[finite], dtype=torch.float64)[:, None]  # maximise
        torch.manual_seed(int(self.rng.integers(2**31)))
        model = SingleTaskGP(X, Y, outcome_transform=Standardize(m=1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        if q == 1:
            return LogExpectedImprovement(model, best_f=Y.max())
        return qLogExpectedImprovement(model, best_f=Y.max())

    def _suggest(self, n: int) -> tuple[np.ndarray, dict]:
        import torch
        from botorch.optim import optimize_acqf

        acq = self._acquisition(q=n)
        if acq is None:
            return self._random_unit(n), {"branch": "random"}
        unit = torch.stack([torch.zeros(self.dim), torch.ones(self.dim)]).double()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cand, _ = optimize_acqf(
                acq, bounds=unit, q=n, num_restarts=self.num_restarts, raw_samples=self.raw_samples
            )
        return cand.detach().numpy(), {"branch": "optimizer"}

    def _suggest_pool(self, free: np.ndarray, n: int) -> tuple[np.ndarray, dict]:
        import torch

        acq = self._acquisition()
        if acq is None:
            return self.rng.choice(free.size, size=n, replace=False), {"branch": "random"}
        Z = torch.as_tensor(self.to_unit(self.pool[free]), dtype=torch.float64)
        with torch.no_grad():
            values = torch.cat([acq(c[:, None, :]) for c in Z.split(1024)]).numpy()
        return maximize_pool(lambda _: values, Z.numpy(), self.rng, n=n, certain=None)


class TPE(AskTellOptimizer):
    """optuna's Tree-structured Parzen Estimator (``TPESampler`` defaults: 10 random
    start-up trials, then TPE), on the unit cube. Sampling scenario only.

    Every suggestion rebuilds the study from the told points (failed evaluations as
    failed trials), so ask/tell, ``state_dict`` and the history stay this package's.
    """

    def __init__(self, bounds, pool=None, seed: int | None = None, *, maximize: bool = False):
        if pool is not None:
            raise ValueError("pool must be None: TPE proposes points of the box, not pool rows")
        super().__init__(bounds, maximize=maximize, seed=seed)
        try:
            import optuna  # noqa: F401
        except ImportError as err:
            raise ImportError(
                "TPE needs optuna: pip install 'drebo-ssl[tpe]' (or pip install optuna)"
            ) from err

    def _suggest(self, n: int) -> tuple[np.ndarray, dict]:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        space = {f"x{k}": optuna.distributions.FloatDistribution(0.0, 1.0) for k in range(self.dim)}
        sampler = optuna.samplers.TPESampler(seed=int(self.rng.integers(2**31)))
        study = optuna.create_study(sampler=sampler, direction="minimize")
        for z, loss in zip(self.to_unit(self.X_), self.losses_, strict=True):
            finite = bool(np.isfinite(loss))
            study.add_trial(
                optuna.trial.create_trial(
                    params={f"x{k}": float(np.clip(v, 0.0, 1.0)) for k, v in enumerate(z)},
                    distributions=space,
                    value=float(loss) if finite else None,
                    state=optuna.trial.TrialState.COMPLETE
                    if finite
                    else optuna.trial.TrialState.FAIL,
                )
            )
        Z = np.empty((n, self.dim))
        for i in range(n):
            trial = study.ask(space)
            Z[i] = [trial.params[f"x{k}"] for k in range(self.dim)]
        return Z, {"branch": "optimizer"}
