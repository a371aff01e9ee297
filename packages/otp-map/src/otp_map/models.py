r"""Semi-dual neural OT (:class:`SemiDualOT`) and its smoothed version (:class:`OTP`).

Both learn a potential :math:`V` and a map :math:`T` from the semi-dual (max-min) problem

.. math::

    \sup_V \inf_T \; \mathbb E_{x \sim \mu}\big[c(x, T(x)) - V(T(x))\big]
    + \mathbb E_{y \sim \nu}\big[V(y)\big],

alternating ``map_steps`` gradient steps on :math:`T` (minimise
:math:`c(x, T(x)) - V(T(x))`) with one step on :math:`V` (minimise
:math:`\mathbb E_\mu V(T(x)) - \mathbb E_\nu V(y)`). This is SNOT / OTM.

When :math:`\mu` charges a lower-dimensional set (a point mass, a segment, a mixture with
such a part) the max-min problem has *spurious* solutions whose :math:`T` does not push
:math:`\mu` to :math:`\nu`. OTP (Choi, Choi, Kwon, ICML 2025) trains the same problem
between the smoothed source :math:`\mu_\varepsilon = \mathrm{Law}(X + \varepsilon Z)`,
:math:`Z \sim \mathcal N(0, I)`, and :math:`\nu`, lowering :math:`\varepsilon` along a
:mod:`~otp_map.schedules` schedule. Its output is the plan
:math:`\pi_\varepsilon = \mathrm{Law}(X, T(X + \varepsilon Z))`: a stochastic map
:math:`x \mapsto T(x + \varepsilon z)` that converges to an optimal plan as
:math:`\varepsilon \to 0`, one-to-many where no optimal map exists.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from icml25_core import check_choice, check_memory, check_scalar, make_progress, select_device
from icml25_core.hub import CONFIG_NAME, atomic_directory, recover_directory

from . import checkpoint
from .costs import Cost, QuadraticCost, check_cost
from .networks import ACTIVATIONS, ARCHS, TransportNetworks, resolve_arch
from .samplers import make_sampler, to_tensor
from .schedules import (
    ConstantSchedule,
    GeometricSchedule,
    NoiseSchedule,
    schedule_from_dict,
    source_floor,
)

HISTORY = "history.json"
_LATE = 10**9  # a step far past any training: the schedule's final level


class NeuralOT:
    """The shared training loop; use :class:`SemiDualOT` or :class:`OTP`."""

    def __init__(
        self,
        *,
        schedule: NoiseSchedule | None,
        relative_noise: bool = True,
        standardize: bool = True,
        tau: float = 1.0,
        cost: Cost | None = None,
        arch: str = "auto",
        hidden: tuple[int, ...] = (256, 256, 256),
        channels: tuple[int, int] = (32, 64),
        activation: str = "silu",
        residual: bool = True,
        map_steps: int = 1,
        lr_map: float = 3e-4,
        lr_potential: float = 3e-4,
        betas: tuple[float, float] = (0.5, 0.9),
        r1: float = 0.0,
        device: str = "auto",
        seed: int = 0,
        progress: bool = False,
        log_every: int = 10,
    ):
        if schedule is not None and not isinstance(schedule, NoiseSchedule):
            raise TypeError(f"schedule must be None or a NoiseSchedule, got {schedule!r}")
        check_scalar(tau, "tau", low=0.0, low_inclusive=False)
        if cost is not None and not callable(cost):
            raise TypeError(f"cost must be None or callable cost(x, y) -> (n,), got {cost!r}")
        check_choice(arch, "arch", ARCHS)
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        if len(hidden) == 0 or any(not isinstance(h, int) or h < 1 for h in hidden):
            raise ValueError(f"hidden must be a non-empty tuple of positive ints, got {hidden!r}")
        if len(channels) != 2 or any(not isinstance(c, int) or c < 1 for c in channels):
            raise ValueError(f"channels must be two positive ints, got {channels!r}")
        check_scalar(map_steps, "map_steps", low=1, integer=True)
        check_scalar(lr_map, "lr_map", low=0.0, low_inclusive=False)
        check_scalar(lr_potential, "lr_potential", low=0.0, low_inclusive=False)
        if len(betas) != 2 or not all(0 <= b < 1 for b in betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {betas!r}")
        check_scalar(r1, "r1", low=0.0)
        check_scalar(seed, "seed", low=0, integer=True)
        check_scalar(log_every, "log_every", low=1, integer=True)
        self.schedule = schedule
        self.relative_noise = bool(relative_noise)
        self.standardize = bool(standardize)
        self.tau = float(tau)
        self.cost = cost
        self.arch = arch
        self.hidden = tuple(hidden)
        self.channels = tuple(channels)
        self.activation = activation
        self.residual = bool(residual)
        self.map_steps = int(map_steps)
        self.lr_map = float(lr_map)
        self.lr_potential = float(lr_potential)
        self.betas = (float(betas[0]), float(betas[1]))
        self.r1 = float(r1)
        self.device = device
        self.seed = int(seed)
        self.progress = bool(progress)
        self.log_every = int(log_every)
        self.step_ = 0
        self.networks_ = None
        self.map_net_ = None
        self.potential_net_ = None
        self.history_: dict[str, list[float]] = {}

    # ------------------------------------------------------------------ configuration
    def _params(self) -> dict[str, Any]:
        return {
            "relative_noise": self.relative_noise,
            "standardize": self.standardize,
            "tau": self.tau,
            "arch": self.arch,
            "hidden": list(self.hidden),
            "channels": list(self.channels),
            "activation": self.activation,
            "residual": self.residual,
            "map_steps": self.map_steps,
            "lr_map": self.lr_map,
            "lr_potential": self.lr_potential,
            "betas": list(self.betas),
            "r1": self.r1,
            "seed": self.seed,
            "log_every": self.log_every,
        }

    @property
    def is_fitted(self) -> bool:
        return self.map_net_ is not None and self.step_ > 0

    @property
    def eps_(self) -> float:
        """Noise level at the current step, in data units (0 for SemiDualOT)."""
        schedule = getattr(self, "schedule_", self.schedule)
        if schedule is None:
            raise RuntimeError(f"this {type(self).__name__} is not fitted: its schedule is unset")
        return schedule(self.step_) * getattr(self, "noise_scale_", 1.0)

    def _torch_device(self) -> torch.device:
        return torch.device(select_device(self.device))

    def _resolve_schedule(self, source: torch.Tensor, target_shape) -> NoiseSchedule:
        """The schedule to train with: the one given, or the default for this source."""
        if self.schedule is not None:
            return self.schedule
        return GeometricSchedule(floor=source_floor(source, math.prod(target_shape)))

    def _build(self, source_shape, target_shape, src, tgt, probe: int) -> None:
        if self.cost is None and source_shape != target_shape:
            raise ValueError(
                "source and target samples must have the same shape for the quadratic cost, got "
                f"{source_shape} and {target_shape}; pass cost=... for spaces of different shape"
            )
        arch = resolve_arch(self.arch, source_shape, target_shape)
        # statistics of the data: distinct source rows (atoms), target batch (scale, means)
        x, y = src(probe, replace=False), tgt(probe)
        self.schedule_ = self._resolve_schedule(x, target_shape)
        scale = _data_scale(y)
        self.net_config_ = {
            "arch": arch,
            "source_shape": list(source_shape),
            "target_shape": list(target_shape),
            "hidden": list(self.hidden),
            "channels": list(self.channels),
            "activation": self.activation,
            "residual": self.residual,
            "standardized": self.standardize,
        }
        self.noise_scale_ = scale if self.relative_noise else 1.0
        dev = self._torch_device()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            self.networks_ = TransportNetworks(self.net_config_).to(dev)
        if self.standardize:
            # the source side by the scale of the smoothed source the map sees once the
            # schedule has settled (its own spread and the final noise), so a Dirac or a
            # thin source does not blow up the networks' inputs; for a Dirac without noise
            # (SemiDualOT) that scale is 0 and the target's is used
            eps_end = self.schedule_(_LATE) * self.noise_scale_
            spread = math.hypot(_data_scale(x, default=0.0), eps_end)
            self.networks_.set_standardization(x.mean(0), y.mean(0), spread or scale, scale)
        self.map_net_, self.potential_net_ = self.networks_.map, self.networks_.potential
        self._make_optimizers()
        self.generator_ = torch.Generator(device=dev)
        self.generator_.manual_seed(self.seed)
        self.step_ = 0
        self.history_ = {"step": [], "eps": [], "map_loss": [], "potential_loss": []}

    def _make_optimizers(self) -> None:
        self.map_opt_ = torch.optim.Adam(
            self.map_net_.parameters(), lr=self.lr_map, betas=self.betas
        )
        self.potential_opt_ = torch.optim.Adam(
            self.potential_net_.parameters(), lr=self.lr_potential, betas=self.betas
        )

    def _cost_fn(self):
        return self.cost if self.cost is not None else QuadraticCost(self.tau)

    # ------------------------------------------------------------------ training
    def fit(
        self,
        source: Any,
        target: Any,
        n_iter: int = 5000,
        batch_size: int = 256,
        *,
        checkpoint_dir: str | Path | None = None,
        checkpoint_every: int = 1000,
        resume: bool = False,
    ):
        """Train on ``source`` and ``target`` until step ``n_iter``.

        Parameters
        ----------
        source, target : array_like, torch.Tensor or callable
            Samples shaped ``(n, *sample_shape)`` (an empirical measure, drawn from with
            replacement), or a callable ``f(n)`` returning such a batch (infinite data).
        n_iter : int
            Total number of training steps (one potential step and ``map_steps`` map steps
            each); with ``resume`` the count includes the steps already done.
        batch_size : int
            Samples per side per step.
        checkpoint_dir : path, optional
            Write a checkpoint (weights, optimizer and generator state, history) every
            ``checkpoint_every`` steps and at the end.
        resume : bool
            Continue from the checkpoint in ``checkpoint_dir`` if one exists, else from the
            model's current state (e.g. after :meth:`from_pretrained`); otherwise start over.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Bad data (empty, NaN/inf, shape mismatch for the quadratic cost).
        FloatingPointError
            The losses became NaN or inf: training diverged (lower the learning rates).
        """
        check_scalar(n_iter, "n_iter", low=1, integer=True)
        check_scalar(batch_size, "batch_size", low=1, integer=True)
        check_scalar(checkpoint_every, "checkpoint_every", low=1, integer=True)
        dev = self._torch_device()
        gen = torch.Generator(device=dev)
        src, src_shape = make_sampler(source, "source", dev, gen)
        tgt, tgt_shape = make_sampler(target, "target", dev, gen)
        ckpt = Path(checkpoint_dir) if checkpoint_dir is not None else None
        if ckpt is not None:
            recover_directory(ckpt)  # a save killed between its renames
        if resume and ckpt is not None and checkpoint.has_training_state(ckpt):
            self._load_checkpoint(ckpt, dev)
        elif not (resume and self.is_fitted):
            self._build(src_shape, tgt_shape, src, tgt, min(4096, 16 * batch_size))
        if (list(src_shape), list(tgt_shape)) != (
            self.net_config_["source_shape"],
            self.net_config_["target_shape"],
        ):
            raise ValueError(
                f"source/target sample shapes {src_shape}/{tgt_shape} differ from the ones the "
                f"model was built for {tuple(self.net_config_['source_shape'])}/"
                f"{tuple(self.net_config_['target_shape'])}"
            )
        # each step holds two batches of samples, their noisy copies and the map's outputs
        point = (math.prod(src_shape) + math.prod(tgt_shape)) * 4
        check_memory(
            4 * batch_size * point, "batch_size", device=dev, what="one training step's samples"
        )
        cost = self._cost_fn()
        if self.cost is not None:
            check_cost(cost, src(2), tgt(2))
        # the samplers draw from the model's generator so a resumed run continues its stream
        gen.set_state(self.generator_.get_state())
        self.generator_ = gen
        T, V = self.map_net_, self.potential_net_
        T.train()
        V.train()
        bar = make_progress(transient=True) if self.progress else None
        task = None
        if bar is not None:
            bar.start()
            task = bar.add_task(type(self).__name__, total=n_iter, completed=self.step_)
        try:
            while self.step_ < n_iter:
                eps = self.eps_
                for _ in range(self.map_steps):
                    map_loss = self._map_step(src, cost, eps, batch_size)
                potential_loss = self._potential_step(src, tgt, eps, batch_size)
                if not (math.isfinite(map_loss) and math.isfinite(potential_loss)):
                    self.step_ = 0  # not fitted: the weights are garbage now
                    raise FloatingPointError(
                        f"training diverged at step {len(self.history_['step'])}: map loss "
                        f"{map_loss}, potential loss {potential_loss}; lower the learning rates "
                        f"(lr_map={self.lr_map}, lr_potential={self.lr_potential}) or set r1 > 0"
                    )
                self.step_ += 1
                if self.step_ % self.log_every == 0 or self.step_ == n_iter:
                    for key, val in zip(
                        ("step", "eps", "map_loss", "potential_loss"),
                        (self.step_, eps, map_loss, potential_loss),
                        strict=True,
                    ):
                        self.history_[key].append(val)
                if ckpt is not None and (
                    self.step_ % checkpoint_every == 0 or self.step_ == n_iter
                ):
                    self.save_checkpoint(ckpt, overwrite=True)
                if bar is not None:
                    bar.update(task, completed=self.step_)
        finally:
            if bar is not None:
                bar.stop()
        T.eval()
        V.eval()
        return self

    def _noisy(self, x: torch.Tensor, eps: float) -> torch.Tensor:
        if eps == 0.0:
            return x
        z = torch.randn(x.shape, generator=self.generator_, device=x.device, dtype=x.dtype)
        return x + eps * z

    def _train_cost(self, cost, x: torch.Tensor, xn: torch.Tensor, yn: torch.Tensor):
        """The cost of a training pair: the quadratic cost in the networks' units (the same
        problem, see :class:`TransportNetworks`), a custom cost in data units."""
        if self.cost is None:
            return cost(xn, yn)
        return cost(x, self.networks_.target_out(yn))

    def _map_step(self, src, cost, eps: float, batch_size: int) -> float:
        T, V, nets = self.map_net_, self.potential_net_, self.networks_
        V.requires_grad_(False)
        x = self._noisy(src(batch_size), eps)
        xn = nets.source_in(x)
        yn = T(xn)
        loss = (self._train_cost(cost, x, xn, yn) - V(yn)).mean()
        self.map_opt_.zero_grad(set_to_none=True)
        loss.backward()
        self.map_opt_.step()
        V.requires_grad_(True)
        return float(loss.detach())

    def _potential_step(self, src, tgt, eps: float, batch_size: int) -> float:
        T, V, nets = self.map_net_, self.potential_net_, self.networks_
        with torch.no_grad():
            y_fake = T(nets.source_in(self._noisy(src(batch_size), eps)))
        y = nets.target_in(tgt(batch_size))
        if self.r1 > 0:
            y.requires_grad_(True)
        v_real = V(y)
        loss = V(y_fake).mean() - v_real.mean()
        total = loss
        if self.r1 > 0:
            (grad,) = torch.autograd.grad(v_real.sum(), y, create_graph=True)
            total = loss + 0.5 * self.r1 * grad.flatten(1).pow(2).sum(1).mean()
        self.potential_opt_.zero_grad(set_to_none=True)
        total.backward()
        self.potential_opt_.step()
        return float(loss.detach())

    # ------------------------------------------------------------------ inference
    def _check_fitted(self) -> None:
        if not self.is_fitted:
            raise RuntimeError(
                f"this {type(self).__name__} is not fitted; call fit() or from_pretrained()"
            )

    def _apply(self, net, x: Any, name: str, shape_key: str, batch_size: int, fn, dim=0):
        """Run ``fn(chunk)`` over ``x`` in chunks joined along ``dim``; return x's type."""
        self._check_fitted()
        check_scalar(batch_size, "batch_size", low=1, integer=True)
        expected = tuple(self.net_config_[shape_key])
        dev = next(net.parameters()).device
        xt = to_tensor(x, name, dev)
        if xt.ndim < 2 or tuple(xt.shape[1:]) != expected:
            raise ValueError(
                f"{name} must be shaped (n, {', '.join(map(str, expected))}), got {tuple(xt.shape)}"
            )
        with torch.no_grad():
            out = torch.cat([fn(c) for c in xt.split(batch_size)], dim=dim)
        if isinstance(x, torch.Tensor):
            dtype = x.dtype if x.is_floating_point() else out.dtype
            return out.to(device=x.device, dtype=dtype)
        arr = np.asarray(x)
        dtype = arr.dtype if np.issubdtype(arr.dtype, np.floating) else np.float32
        return out.cpu().numpy().astype(dtype, copy=False)

    def _map_data(self, x: torch.Tensor) -> torch.Tensor:
        nets = self.networks_
        return nets.target_out(self.map_net_(nets.source_in(x)))

    def map(self, x: Any, *, batch_size: int = 4096):
        """The map network without noise, ``T(x)``: shaped ``(n, *target_shape)``, x's type."""
        return self._apply(self.map_net_, x, "x", "source_shape", batch_size, self._map_data)

    def _potential_data(self, y: torch.Tensor) -> torch.Tensor:
        nets = self.networks_
        v = self.potential_net_(nets.target_in(y))
        if not nets.standardized or self.cost is not None:
            return v
        # undo the change of units (TransportNetworks): the potential of tau ||x - y||^2 is,
        # up to a constant, V(y) = s_mu s_nu V'(y') + tau (1 - s_mu / s_nu) ||y - m_nu||^2
        # - 2 tau <m_mu - m_nu, y - m_nu>
        s_mu, s_nu = nets.source_scale, nets.target_scale
        dy = (y - nets.target_shift).flatten(1)
        linear = dy @ (nets.source_shift - nets.target_shift).flatten()
        square = dy.pow(2).sum(1)
        return s_mu * s_nu * v + self.tau * ((1 - s_mu / s_nu) * square - 2.0 * linear)

    def potential(self, y: Any, *, batch_size: int = 4096):
        """The potential ``V(y)`` of the cost in data units (up to a constant): shaped
        ``(n,)``, in y's type."""
        return self._apply(
            self.potential_net_, y, "y", "target_shape", batch_size, self._potential_data
        )

    def transport(
        self, x: Any, n_samples: int = 1, *, seed: int | None = None, batch_size: int = 4096
    ):
        """Samples of the learned plan at each row of ``x``.

        Parameters
        ----------
        x : array_like or torch.Tensor, shape (n, *source_shape)
        n_samples : int
            Samples per row.
        seed : int, optional
            Seed of the sampling noise (OTP); ``None`` draws fresh noise.
        batch_size : int
            Rows per forward pass.

        Returns
        -------
        array or tensor (x's type, dtype and device)
            ``(n, *target_shape)`` when ``n_samples == 1``, else
            ``(n_samples, n, *target_shape)``. For :class:`SemiDualOT` every sample is
            ``T(x)``; for :class:`OTP` sample k is ``T(x + eps z_k)`` at the final noise level
            ``eps_``.
        """
        check_scalar(n_samples, "n_samples", low=1, integer=True)
        self._check_fitted()
        eps = self.eps_
        dev = next(self.map_net_.parameters()).device
        if hasattr(x, "__len__"):  # the output, stacked once more: refuse before allocating
            size = 2 * n_samples * len(x) * math.prod(self.net_config_["target_shape"]) * 4
            check_memory(
                size, "n_samples", device=dev, what=f"{n_samples} samples of {len(x)} points"
            )
        gen = torch.Generator(device=dev)
        if seed is None:
            gen.seed()
        else:
            gen.manual_seed(check_scalar(seed, "seed", low=0, integer=True))

        def sample(chunk):
            outs = []
            for _ in range(n_samples):
                noise = torch.randn(chunk.shape, generator=gen, device=dev) if eps > 0 else 0.0
                outs.append(self._map_data(chunk + eps * noise))
            return torch.stack(outs)

        out = self._apply(self.map_net_, x, "x", "source_shape", batch_size, sample, dim=1)
        return out[0] if n_samples == 1 else out

    # ------------------------------------------------------------------ persistence
    def _config(self) -> dict[str, Any]:
        from . import __version__

        return {
            "class": type(self).__name__,
            "otp_map_version": __version__,
            "params": self._params(),
            "schedule": self.schedule_.to_dict(),
            "cost": (
                QuadraticCost(self.tau).to_dict() if self.cost is None else {"kind": "custom"}
            ),
            "noise_scale": self.noise_scale_,
            "step": self.step_,
        }

    def _write_pretrained(self, folder: Path) -> None:
        """``config.json`` + ``model.safetensors`` (:class:`TransportNetworks`) and
        ``history.json`` into the existing, empty ``folder``."""
        config = {"network": self.net_config_, "estimator": self._config()}
        self.networks_.save_pretrained(folder, overwrite=True, config=config)
        (folder / HISTORY).write_text(json.dumps(self.history_))

    def save_pretrained(self, path: str | Path, *, overwrite: bool = False) -> Path:
        """Write ``config.json``, ``model.safetensors`` and ``history.json`` to the folder
        ``path``, atomically (an interrupted save leaves nothing half-written).

        An existing non-empty folder is replaced only with ``overwrite=True``.
        """
        self._check_fitted()
        path = Path(path)
        contents = (*TransportNetworks.saved_files, HISTORY)
        with atomic_directory(path, overwrite=overwrite, contents=contents) as tmp:
            self._write_pretrained(tmp)
        return path

    @classmethod
    def from_pretrained(cls, path: str | Path, *, cost: Cost | None = None, device: str = "auto"):
        """Load a model written by :meth:`save_pretrained` (or a checkpoint folder).

        ``path`` is a local folder or a hub id. ``cost`` must be given again when the model
        was trained with a custom cost (code is never stored). Loads safetensors and JSON
        only; nothing is unpickled.
        """
        dev = torch.device(select_device(device))
        nets = TransportNetworks.from_pretrained(path, map_location=str(dev))
        config = nets.estimator
        _check_estimator_config(config, Path(path) / CONFIG_NAME)
        classes = {c.__name__: c for c in (SemiDualOT, OTP)}
        name = config.get("class")
        if name not in classes or not issubclass(classes[name], cls):
            raise ValueError(f"{path} holds a {name!r} model, which is not a {cls.__name__}")
        if config["cost"]["kind"] == "custom" and cost is None:
            raise ValueError(
                "this model was trained with a custom cost; pass the same cost= to from_pretrained"
            )
        params = dict(config["params"])
        params.setdefault("standardize", False)  # saved before 0.2.3: no standardization
        params["hidden"] = tuple(params["hidden"])
        params["channels"] = tuple(params["channels"])
        params["betas"] = tuple(params["betas"])
        schedule = schedule_from_dict(config["schedule"])
        model = classes[name]._from_config(params, schedule)
        model.schedule_ = schedule
        model.cost = cost
        model.device = device
        model.net_config_ = nets.network
        model.noise_scale_ = float(config["noise_scale"])
        model.networks_ = nets.eval()
        model.map_net_, model.potential_net_ = nets.map, nets.potential
        model._make_optimizers()
        model.generator_ = torch.Generator(device=dev)
        model.generator_.manual_seed(model.seed + int(config["step"]))
        model.step_ = int(config["step"])
        history = Path(path) / HISTORY
        if history.is_file():
            try:
                model.history_ = json.loads(history.read_text())
            except json.JSONDecodeError as err:
                raise ValueError(f"{history} is not valid JSON: {err}") from None
        return model

    def save_checkpoint(self, path: str | Path, *, overwrite: bool = False) -> Path:
        """:meth:`save_pretrained` plus the optimizer and sampler state
        (:mod:`otp_map.checkpoint`), for ``fit(resume=True)``; atomic as a whole."""
        self._check_fitted()
        path = Path(path)
        contents = (*TransportNetworks.saved_files, HISTORY, checkpoint.OPTIMIZER, checkpoint.STATE)
        with atomic_directory(path, overwrite=overwrite, contents=contents) as tmp:
            self._write_pretrained(tmp)
            checkpoint.save_training_state(
                tmp,
                self.step_,
                {"map": self.map_opt_, "potential": self.potential_opt_},
                self.generator_,
            )
        return path

    def _load_checkpoint(self, path: Path, dev: torch.device) -> None:
        step = checkpoint.verify_manifest(path)
        loaded = type(self).from_pretrained(path, cost=self.cost, device=self.device)
        if loaded.step_ != step:
            raise ValueError(
                f"the checkpoint in {path} disagrees with itself: its model is at step "
                f"{loaded.step_}, its training state at step {step}"
            )
        if loaded._params() != self._params() or (
            self.schedule is not None and loaded.schedule_ != self.schedule
        ):
            raise ValueError(
                f"the checkpoint in {path} was written with other settings "
                f"({loaded._params()}, {loaded.schedule_}); resume with the same ones"
            )
        for attr in (
            "schedule_",
            "net_config_",
            "noise_scale_",
            "networks_",
            "map_net_",
            "potential_net_",
            "history_",
        ):
            setattr(self, attr, getattr(loaded, attr))
        self.step_ = loaded.step_
        self._make_optimizers()
        self.generator_ = checkpoint.load_training_state(
            path, {"map": self.map_opt_, "potential": self.potential_opt_}, dev
        )

    @classmethod
    def _from_config(cls, params: dict[str, Any], schedule: NoiseSchedule):
        raise NotImplementedError

    def __repr__(self) -> str:
        if getattr(self, "schedule_", self.schedule) is None:
            return f"{type(self).__name__}(step={self.step_}, not fitted)"
        return f"{type(self).__name__}(step={self.step_}, eps={self.eps_:.3g})"


def _data_scale(y: torch.Tensor, default: float = 1.0) -> float:
    """Root mean per-coordinate variance of a batch (``default`` for a constant batch)."""
    scale = float(y.flatten(1).var(0).mean().sqrt())
    return scale if scale > 0 and math.isfinite(scale) else default


class SemiDualOT(NeuralOT):
    """Semi-dual neural OT (SNOT / OTM): a deterministic map ``T`` and a potential ``V``.

    The baseline OTP improves on. All keyword arguments are those of :class:`OTP` except
    the noise (there is none).

    Examples
    --------
    >>> import numpy as np
    >>> from otp_map import SemiDualOT
    >>> rng = np.random.default_rng(0)
    >>> model = SemiDualOT(hidden=(32, 32), seed=0).fit(
    ...     rng.normal(size=(500, 2)), rng.normal(size=(500, 2)) + 3, n_iter=50
    ... )
    >>> model.transport(np.zeros((4, 2))).shape
    (4, 2)
    """

    def __init__(self, **kwargs):
        if "schedule" in kwargs or "relative_noise" in kwargs:
            raise TypeError("SemiDualOT has no noise; use OTP for a noise schedule")
        super().__init__(schedule=ConstantSchedule(0.0), relative_noise=False, **kwargs)

    @classmethod
    def _from_config(cls, params, schedule):
        params = {k: v for k, v in params.items() if k != "relative_noise"}
        return cls(**params)


class OTP(NeuralOT):
    r"""Optimal transport plan by source smoothing (Choi, Choi, Kwon, ICML 2025).

    Parameters
    ----------
    schedule : NoiseSchedule, optional
        Noise level per step. Default (``None``): ``GeometricSchedule(start=1.0,
        floor=source_floor(source), decay=0.999)``, resolved at ``fit`` (``schedule_``): a
        floor of 0.2, raised to :math:`K^{-1/d}` for a source of :math:`K` atoms in
        :math:`d` dimensions (see :mod:`otp_map.schedules` for why).
    relative_noise : bool
        Multiply the schedule by the target's scale (root mean per-coordinate variance,
        estimated from a batch at the start of ``fit``), so the defaults suit any units.
    standardize : bool
        Train the networks on standardised data: each side centred on its mean and
        divided by a scalar scale (the target by its scale, the source by that of the
        smoothed source at the schedule's final noise: its own spread and that noise). The
        quadratic cost's plans are unchanged by this (see
        :class:`~otp_map.networks.TransportNetworks`); inputs and outputs of
        :meth:`transport`, :meth:`map` and :meth:`potential` stay in data units, the R1
        penalty is in the networks' units. Without it the residual map starts at the
        identity and must learn the whole shift and scale between the two sides. With a
        custom cost the networks still see standardised inputs while the cost gets data
        units.
    tau : float
        Weight of the quadratic cost ``tau * ||x - y||^2``.
    cost : callable, optional
        A user cost ``cost(x, y) -> (n,)`` on torch batches, replacing the quadratic one.
    arch : {"auto", "mlp", "conv"}
        Networks: MLPs for vectors, a small UNet map and a conv potential for images
        ``(C, H, W)``; ``"auto"`` picks by the sample shape.
    hidden, channels, activation, residual
        MLP widths; UNet widths at full and half resolution; activation; ``T(x) = x + f(x)``
        when source and target shapes agree.
    map_steps : int
        Map updates per potential update.
    lr_map, lr_potential, betas
        Adam settings.
    r1 : float
        Weight of an R1 gradient penalty :math:`\tfrac{r_1}{2}\|\nabla V(y)\|^2` at target
        samples (0: none, the default). It can steady training but biases the solution:
        the OT potential's gradient at ``y`` is the displacement, not 0, so keep it small.
    device : {"auto", "cpu", "cuda", "mps"}
    seed : int
        Seeds the networks' initialisation, the batches and the noise.
    progress : bool
        Show a progress bar.
    log_every : int
        Record ``history_`` (step, eps, map and potential losses) every this many steps.

    Attributes
    ----------
    schedule_ : NoiseSchedule
        The schedule trained with (``schedule`` or the default resolved for the source).
    map_net_, potential_net_ : torch.nn.Module
    history_ : dict of lists
    step_ : int
    eps_ : float
        Current noise level in data units (the level :meth:`transport` samples with).
    """

    def __init__(self, schedule: NoiseSchedule | None = None, **kwargs):
        super().__init__(schedule=schedule, **kwargs)

    @classmethod
    def _from_config(cls, params, schedule):
        return cls(schedule=schedule, **params)


def _check_estimator_config(config: Any, where: Path) -> None:
    """The estimator part of a saved config: every key present, ``noise_scale`` finite
    and non-negative, ``step`` a non-negative integer; errors name the file."""
    if not isinstance(config, dict):
        raise ValueError(f"{where}: 'estimator' must be a JSON object, got {type(config).__name__}")
    missing = [
        k for k in ("class", "cost", "params", "schedule", "noise_scale", "step") if k not in config
    ]
    if missing:
        raise ValueError(f"{where} is missing estimator keys {missing}")
    noise = config["noise_scale"]
    if (
        isinstance(noise, bool)
        or not isinstance(noise, int | float)
        or not math.isfinite(noise)
        or noise < 0
    ):
        raise ValueError(f"{where}: noise_scale must be a finite number >= 0, got {noise!r}")
    step = config["step"]
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"{where}: step must be an integer >= 0, got {step!r}")
