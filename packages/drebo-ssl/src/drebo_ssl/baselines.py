"""Baselines on the same ask/tell interface: BORE (supervised density ratio), BoTorch
GP + LogEI, random search.

- :class:`BORE` (Tiao et al., 2021): the same quantile labels and the same acquisition
  maximiser as DRE-BO-SSL, but the classifier (an MLP or a random forest from
  scikit-learn) sees the labelled points only. This is the paper's direct comparison.
- :class:`GPLogEI`: BoTorch's ``SingleTaskGP`` (inputs in the unit cube, standardised
  outputs) with ``LogExpectedImprovement``, maximised by ``optimize_acqf`` (sampling) or over
  the unevaluated pool points (pool).
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
    (``"mlp"``: two hidden layers of 32, or ``"rf"``: 100 trees).
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
        maximize: bool = False,
    ):
        super().__init__(
            bounds,
            zeta=zeta,
            n_candidates=n_candidates,
            n_starts=n_starts,
            pool=pool,
            maximize=maximize,
            seed=seed,
        )
        self.classifier = check_choice(classifier, "classifier", CLASSIFIERS)

    def _model(self):
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
        return lambda Z: clf.predict_proba(Z)[:, col]

    def _suggest(self, n: int) -> np.ndarray:
        proba = self._model()
        if proba is None:
            return self._random_unit(n)
        return maximize_sampling(
            proba, self.dim, self.rng, n=n, n_candidates=self.n_candidates, n_starts=self.n_starts
        )

    def _suggest_pool(self, free: np.ndarray, n: int) -> np.ndarray:
        proba = self._model()
        if proba is None:
            return self.rng.choice(free.size, size=n, replace=False)
        return maximize_pool(proba, self.to_unit(self.pool[free]), self.rng, n=n)


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

    def _suggest(self, n: int) -> np.ndarray:
        import torch
        from botorch.optim import optimize_acqf

        acq = self._acquisition(q=n)
        if acq is None:
            return self._random_unit(n)
        unit = torch.stack([torch.zeros(self.dim), torch.ones(self.dim)]).double()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cand, _ = optimize_acqf(
                acq, bounds=unit, q=n, num_restarts=self.num_restarts, raw_samples=self.raw_samples
            )
        return cand.detach().numpy()

    def _suggest_pool(self, free: np.ndarray, n: int) -> np.ndarray:
        import torch

        acq = self._acquisition()
        if acq is None:
            return self.rng.choice(free.size, size=n, replace=False)
        Z = torch.as_tensor(self.to_unit(self.pool[free]), dtype=torch.float64)
        with torch.no_grad():
            values = torch.cat([acq(c[:, None, :]) for c in Z.split(1024)]).numpy()
        return maximize_pool(lambda _: values, Z.numpy(), self.rng, n=n, certain=np.inf)
