"""How the out-of-core fitters fit: :class:`FitSettings` (λ, folds, tolerance, where parts wait between passes) and
the option rules they share, and :class:`Stages`, the record of a run's stages (passes and seconds of each).

Shared by the per-action reward models (:mod:`dr_scale.reward.fitting`: ridge and logistic) and the estimated
logging policy (:mod:`dr_scale.propensity.fitting`).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from dr_scale.core.errors import ParameterError
from dr_scale.io.config import Folds, NonNegativeInt, PositiveInt, check, penalty, tolerance

#: The penalties ``lam="auto"`` chooses from (binary or standardised features, rewards in [0, 1]).
LAMBDA_GRID = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
#: Rows of the keyed sample on which ``lam="auto"`` chooses λ.
SEARCH_ROWS = 200_000
#: Folds of the λ search when the model itself has none.
SEARCH_FOLDS = 5
#: CG stops when ‖residual‖ ≤ RTOL ‖rhs‖ for every fit (module docstring of :class:`FitSettings`).
RTOL = 1e-2
MAX_ITER = 1000
#: The reward models: per-action ridge regression, per-action logistic regression (0/1 rewards).
MODELS = ("ridge", "logistic")


def check_lam(lam: float | str | None, parameter: str = "lam", allow_none: bool = False) -> float | str | None:
    """``lam`` as a float, or ``"auto"`` (or None if allowed), by the one rule of λ
    (:func:`dr_scale.io.config.penalty`: a finite number ≥ 2.2e-308, or ``"auto"``)."""
    return None if lam is None and allow_none else penalty(lam, parameter)


def check_int(value: object, parameter: str, low: int, allow_none: bool = False) -> int | None:
    """``value`` as an int ≥ ``low`` ∈ {0, 1, 2} (or None if allowed), by the shared rules of
    :mod:`dr_scale.io.config` (:data:`~dr_scale.io.config.NonNegativeInt`, ``PositiveInt``, ``Folds``)."""
    if value is None and allow_none:
        return None
    return int(check({0: NonNegativeInt, 1: PositiveInt, 2: Folds}[low], parameter,
                     int(value) if isinstance(value, np.integer) else value))


@dataclass(frozen=True)
class FitSettings:
    """How :func:`fit_reward_model` fits ρ̂; checked at construction (errors name the parameter).

    ``lam``: λ > 0, or ``"auto"`` (default: the grid ``lam_grid`` by the out-of-fold error on a keyed
    sample of ``search_rows`` rows, module docstring); ``folds``: K ≥ 2 fold models for cross-fitting
    beside the full-data one, or None; ``seed``: the key of the folds and of the λ sample;
    ``rtol``, ``max_iter``: every CG solve (the search's and the final one) stops when
    ‖residual‖ ≤ rtol ‖rhs‖ for every fit, or after ``max_iter`` passes (λ and rtol by the rules of the
    command line, :func:`dr_scale.io.config.penalty` and :func:`~dr_scale.io.config.tolerance`). The default
    rtol = 1e-2 is sized to the statistical error, not to the arithmetic: on the generated 1M-row log (2^18 features, 10
    actions, ``folds=5``, λ = 100 as chosen) the fold models' out-of-fold squared error over all rows at
    rtol 1e-2 (7 CG passes) is 0.005% above the exact solve's (48 passes at 1e-10) — a twentieth of the
    error's own relative standard error there (0.10%), a hundredth of a 0.5% tolerance — at the
    same λ (docs/reward-models.md gives the table and the command). ``n_features``, ``n_actions``: d and k
    (default: the log's metadata, else the data). ``spill``: where local runs keep the parts between
    passes — ``"disk"`` (files under the cache folder, :func:`dr_scale.io.cache.spill_root`), ``"memory"``,
    or a folder.

    Parameters
    ----------
    lam : float or str
        The ridge penalty λ > 0, or ``"auto"``: the value of ``lam_grid`` with the least out-of-fold error.
    folds : int or None
        K ≥ 2 cross-fitting folds (K fold models beside the full-data one), or None.
    seed : int
        The key of the folds and of the λ search's sample.
    rtol : float
        Every conjugate-gradient solve stops when ‖residual‖ ≤ rtol ‖rhs‖.
    max_iter : int
        …or after this many passes over the data.
    lam_grid : tuple of float
        The λ values ``"auto"`` tries.
    search_rows : int
        The rows of the keyed sample the λ search fits on.
    n_features : int or None
        The number of features d (default: the log's metadata, else the data).
    n_actions : int or None
        The number of actions k (default: the log's metadata, else the data).
    spill : str
        ``"disk"``, ``"memory"`` or a folder: where local runs keep the parts between passes.
    model : str or None
        The reward model: ``"ridge"``, ``"logistic"`` (0/1 rewards only), or None (default): logistic when every
        reward is 0 or 1, ridge otherwise. The logistic fits stop when ‖∇L‖ ≤ rtol ‖∇L(x₀)‖ (L-BFGS,
        :mod:`dr_scale.outofcore.glm`), where ridge's conjugate gradients stop at ‖residual‖ ≤ rtol ‖rhs‖.

    See Also
    --------
    fit_reward_model : Fits with these settings.

    Examples
    --------
    >>> settings = FitSettings(lam=10.0, folds=5)
    >>> settings.lam, settings.folds, settings.spill
    (10.0, 5, 'disk')
    >>> FitSettings(folds=1)
    Traceback (most recent call last):
    ...
    dr_scale.core.errors.ParameterError: folds should be greater than or equal to 2 (got 1)
    """

    lam: float | str = "auto"
    folds: int | None = None
    seed: int = 0
    rtol: float = RTOL
    max_iter: int = MAX_ITER
    lam_grid: tuple = LAMBDA_GRID
    search_rows: int = SEARCH_ROWS
    n_features: int | None = None
    n_actions: int | None = None
    spill: str = "disk"
    model: str | None = None

    def __post_init__(self) -> None:
        put = object.__setattr__
        put(self, "lam", check_lam(self.lam))
        put(self, "folds", check_int(self.folds, "folds", 2, allow_none=True))
        put(self, "seed", check_int(self.seed, "seed", 0))
        put(self, "rtol", tolerance(self.rtol, "rtol"))
        put(self, "max_iter", check_int(self.max_iter, "max_iter", 1))
        grid = tuple(self.lam_grid) if isinstance(self.lam_grid, (tuple, list, np.ndarray)) else None
        if not grid:
            raise ParameterError(f"`lam_grid` must be a non-empty sequence of positive numbers, got {self.lam_grid!r}")
        put(self, "lam_grid", tuple(penalty(v, "lam_grid", auto=False) for v in grid))
        put(self, "search_rows", check_int(self.search_rows, "search_rows", 1))
        put(self, "n_features", check_int(self.n_features, "n_features", 1, allow_none=True))
        put(self, "n_actions", check_int(self.n_actions, "n_actions", 1, allow_none=True))
        if not isinstance(self.spill, str) or not self.spill:
            raise ParameterError(f"`spill` must be 'disk', 'memory' or a folder, got {self.spill!r}")
        if self.model is not None and self.model not in MODELS:
            raise ParameterError(f"`model` must be one of {', '.join(MODELS)} (or None: chosen by the rewards), "
                                 f"got {self.model!r}")

    @property
    def search_folds(self) -> int:
        """The folds of the λ search: the model's, else :data:`SEARCH_FOLDS`."""
        return self.folds or SEARCH_FOLDS



class Stages:
    """The stages of a run: name, passes over the parts and seconds of each (``fit`` and ``learn`` print them)."""

    def __init__(self, progress: bool):
        self.progress = progress
        self.done: list[tuple[str, int, float]] = []

    @contextlib.contextmanager
    def stage(self, name: str, detail: str = "") -> Iterator[list[int]]:
        """``with stages.stage(name, detail) as passes: … passes.append(n)``; the passes are summed."""
        _stage(self.progress, f"{name}: {detail} …" if detail else f"{name} …")
        passes: list[int] = []
        start = time.perf_counter()
        yield passes
        self.done.append((name, int(sum(passes)), time.perf_counter() - start))

    def passes(self) -> dict:
        """Each stage's passes over the parts, by name."""
        return {name: n for name, n, _ in self.done}


def _stage(progress: bool, message: str) -> None:
    if progress:
        print(message, file=sys.stderr, flush=True)
