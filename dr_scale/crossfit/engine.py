"""The one cross-fitting driver behind every fitted model: an :class:`Objective` says what one model family sums,
solves and scores; :func:`fit_log` and :func:`fit_parts` run the same steps for all of them.

1. **Read** (:func:`fit_log`): the log's parts read through the contract and grouped by (fold, action)
   (:func:`~dr_scale.crossfit.parts.read_grouped_parts`), kept between passes in memory, on a cluster's workers or
   spilled to local files. For an objective ``sized_by_use`` (the reward and propensity models), the features
   some row has are found in one pass and the parts' feature ids renumbered 0 … m − 1 in another
   (:func:`~dr_scale.crossfit.parts.used_features`): every sum, solve and model below is then over m used
   features, not the d = 2^hash_bits of the hashed space, and the model keeps their sorted ids (``features``).
2. **Sums**: the objective's per-part sums over all rows (:meth:`Objective.count`, then
   :meth:`Objective.sums`); with λ = ``"auto"`` the keyed λ sample — row i when u(row_id_i) < ``search_rows`` / n,
   u keyed by (seed, "lambda sample") — is drawn in the same pass and held as one part grouped over the search's
   folds, its features renumbered (:func:`~dr_scale.crossfit.parts.concatenated`).
3. **λ** (:func:`scan_lambdas`, the one rule): for each λ of the grid, from the largest down, the K fold models
   fitted on the sample (:meth:`Objective.solve`) and scored by their out-of-fold loss
   Σ_i ℓ(r_i, ρ̂^{(f_i)}(x_i)) (:meth:`Objective.out_of_fold`) — cross-fitting doubles as cross-validation; the λ of
   least total loss is used on all rows.
4. **Fit**: the K fold models and the full-data model at that λ in the same passes
   (:class:`~dr_scale.crossfit.parts.Fits`); a fit that did not reach ``rtol`` in ``max_iter`` passes is a
   :class:`~dr_scale.core.errors.ConvergenceWarning`.
5. **Record**: one metadata record — ``lam``, ``folds``, ``seed``, ``rtol``, ``n_features``, ``n_actions``, the λ
   search (``lambda_search``), the data's fingerprint and the passes of each stage — beside what the objective adds.

Everything runs downward: the driver calls the objective; nothing below calls back up.
"""

from __future__ import annotations

import abc
import warnings
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from dr_scale.core.errors import ConvergenceWarning, ParameterError
from dr_scale.crossfit.limits import check_fit_limits, check_fit_size
from dr_scale.crossfit.parts import (
    Fits,
    GroupedPart,
    concatenated,
    read_grouped_parts,
    read_log_part,
    sample_of,
    used_features,
)
from dr_scale.crossfit.settings import FitSettings, Stages
from dr_scale.io.cache import spill_root
from dr_scale.logs.opened import open_log
from dr_scale.outofcore.compute import check_client, compute
from dr_scale.outofcore.passes import PartSet, given, load_part, spill_folder


@dataclass
class Solved:
    """A solve at one λ: the fits' parameters ``x`` (the objective's layout), the passes it took, which fits reached
    ``rtol``, anything else the objective's model needs (``extra``), and the model's calibration on the rows where
    the objective measures it (recorded as the metadata's ``calibration``)."""

    x: np.ndarray
    passes: int
    converged: np.ndarray
    extra: Any = None
    calibration: dict | None = None


class Reads:
    """How a fitter reads one part: through the contract (:func:`~dr_scale.crossfit.parts.read_log_part`) unless it
    says otherwise (the estimated logging policy: without propensities; the balancing weights: the pairs)."""

    #: Whether its model is fitted on the features the rows have only (:func:`fit_log`), a
    #: :class:`~dr_scale.crossfit.folded.FoldedLinearModel` with ``features``.
    sized_by_use: ClassVar[bool] = False

    def read_part(self, fs, path: str, n_features: int | None, n_actions: int | None):
        """One part of the log at ``path`` as a :class:`~dr_scale.crossfit.parts.LogPart`."""
        return read_log_part(fs, path, n_features, n_actions)


class Objective(Reads, abc.ABC):
    """One model family as the driver fits it (module docstring): its sums, its solve at λ, its out-of-fold loss and
    the model it makes. An objective is sent to the workers with the passes' functions: keep it small."""

    # A subclass sets each of these as a class attribute, or a property where it depends on the objective's fields.
    @property
    def label(self) -> str:
        """The model in stage lines: ``"ρ̂"``, ``"π̂₀"``."""
        return "model"

    @property
    def loss(self) -> str:
        """The out-of-fold loss: ``"sse"`` (squared error) or ``"log_loss"``; the search records
        ``out_of_fold_<loss>``."""
        return "sse"

    @property
    def per_action(self) -> bool:
        """One fit per (fold, action) (the per-action models) or one per fold for all actions."""
        return True

    def coefficients(self, n_features: int, n_actions: int) -> int:
        """The coefficients of one fit over ``n_features`` features (its size,
        :func:`~dr_scale.crossfit.limits.check_fit_size`): a weight per feature and an intercept."""
        return n_features + 1

    @property
    def what(self) -> str:
        """What a fit is in stage lines: ``"ridge models"``, ``"multinomial model(s)"`` …"""
        return "models"

    @property
    def full(self) -> bool:
        """Whether the full-data model is fitted beside the K fold models (the balancing weights: fold models
        only)."""
        return True

    def fits(self, folds: int, n_actions: int, full: bool) -> Fits:
        """The fits over ``folds`` fold models (and the full-data one if ``full``)."""
        return Fits(folds, n_actions if self.per_action else 1, full)

    @abc.abstractmethod
    def count(self, part: GroupedPart, n_features: int, groups: int, n_actions: int):
        """The part's term of the first pass (an array or tuple of arrays, summed over the parts)."""

    def sums(self, parts: PartSet, n_features: int, counts, fits: Fits) -> tuple[object, int]:
        """(the statistics the solves of ``fits`` need, from the first pass's ``counts`` and further passes; those
        passes)."""
        return counts, 0

    @abc.abstractmethod
    def solve(self, parts: PartSet, sums, n_features: int, lam: float, fits: Fits, settings: FitSettings,
              progress: bool) -> Solved:
        """The ``fits`` at penalty λ on ``parts`` (their statistics ``sums``)."""

    @abc.abstractmethod
    def out_of_fold(self, part: GroupedPart, solved: Solved, n_features: int, folds: int,
                    n_actions: int) -> np.ndarray:
        """The part's out-of-fold loss Σ_i ℓ(r_i, fold model f_i at x_i) per action (or (1,)): summed over the
        sample's parts (the fold models are the first ``folds`` fits of ``solved``)."""

    def search_record(self, sample: PartSet, sums, n_features: int, folds: int, n_actions: int,
                      losses: list) -> dict:
        """What the search records beside the grid, the losses, the chosen λ and its passes: the sample's rows."""
        return {}

    @abc.abstractmethod
    def model(self, solved: Solved, sums, lam: float, fits: Fits, n_features: int, n_actions: int,
              settings: FitSettings):
        """The fitted model (full-data model and fold models) and what its metadata adds to the driver's record."""


class Family(Reads, abc.ABC):
    """Objectives of which the data chooses one once the parts are read (the reward models: ridge, or logistic
    when every reward is 0 or 1)."""

    @abc.abstractmethod
    def objective(self, parts: PartSet, settings: FitSettings) -> Objective:
        """The objective to fit on ``parts``."""


def scan_lambdas(grid, loss_at) -> tuple[int, list, int]:
    """The λ rule: (index of the λ of ``grid`` with the least total out-of-fold loss, ties to the first in ``grid``;
    each λ's per-action losses, None where not fitted; passes), ``loss_at(λ)`` giving (per-action losses, passes).

    The grid is scanned from the largest λ down (the best conditioned, fewest passes) and the scan stops at the
    first λ whose loss exceeds the least so far: the out-of-fold loss is taken to be unimodal in λ (falling while
    the penalty's bias dominates, rising once the variance does), so the smaller, costlier penalties past the
    minimum are not fitted.

    Examples
    --------
    >>> import numpy as np
    >>> losses = {0.01: 5.0, 0.1: 4.0, 1.0: 3.0, 10.0: 6.0}
    >>> best, seen, passes = scan_lambdas([0.01, 0.1, 1.0, 10.0], lambda lam: (np.array([losses[lam]]), 2))
    >>> best, [None if v is None else float(v[0]) for v in seen], passes  # 0.1 rose: 0.01 is not fitted
    (2, [None, 4.0, 3.0, 6.0], 6)
    """
    losses: list[np.ndarray | None] = [None] * len(grid)
    passes = 0
    for i in sorted(range(len(grid)), key=lambda i: -grid[i]):
        loss, used = loss_at(grid[i])
        losses[i] = loss
        passes += used
        if loss.sum() > min(v.sum() for v in losses if v is not None):
            break
    best = min((v.sum(), i) for i, v in enumerate(losses) if v is not None)[1]
    return best, losses, passes


def _count_and_sample(_, part: GroupedPart, objective: Objective, d: int, groups: int, k: int, share: float,
                      seed: int):
    """The part's first-pass term, and its rows in the λ sample (a step of :meth:`PartSet.sum_and_derive`)."""
    return objective.count(part, d, groups, k), sample_of(part, share, d, seed)


def search_lambda(objective: Objective, sample: PartSet, d: int, k: int, settings: FitSettings,
                  progress: bool) -> tuple[float, dict, int]:
    """(the λ chosen, the search's record, its passes) on the keyed sample (one part, over the search's folds)."""
    sk = settings.search_folds
    counts = sample.sum(objective.count, d, sk, k)
    fits = objective.fits(sk, k, full=False)
    sums, passes = objective.sums(sample, d, counts, fits)

    def loss_at(lam):
        """(per-action out-of-fold losses of the fits at λ = ``lam``, passes)."""
        solved = objective.solve(sample, sums, d, lam, fits, settings, progress)
        return sample.sum(objective.out_of_fold, solved, d, sk, k), solved.passes + 1

    best, losses, scanned = scan_lambdas(settings.lam_grid, loss_at)
    record = {"grid": [float(v) for v in settings.lam_grid],
              **objective.search_record(sample, sums, d, sk, k, losses),
              f"out_of_fold_{objective.loss}": [None if v is None else [float(e) for e in v] for v in losses],
              "chosen": best, "passes": scanned}
    return settings.lam_grid[best], record, scanned + passes + 1


def fit_parts(parts: PartSet, n_rows: float, n_features: int, n_actions: int, settings: FitSettings,
              objective: Objective | Family, *, progress: bool = False, stages: Stages | None = None):
    """The objective's model (of a :class:`Family`, the one it chooses) on parts grouped by (fold, action) over
    ``settings.folds`` folds, ``n_rows`` rows in all: the sums (and the keyed λ sample in the same pass), λ as
    ``settings.lam`` says (``"auto"``: :func:`scan_lambdas` on the sample), the K fold models and the full-data
    model in the same passes, and the metadata record (module docstring)."""
    stages = stages or Stages(progress)
    if isinstance(objective, Family):
        objective = objective.objective(parts, settings)
    d, k, folds = n_features, n_actions, settings.folds
    groups, auto = max(folds or 1, 1), settings.lam == "auto"
    share = min(1.0, settings.search_rows / max(n_rows, 1.0))
    fits = objective.fits(folds or 0, k, full=objective.full)
    check_fit_size(objective.label, fits.count, objective.coefficients(d, k))
    with stages.stage(f"{objective.label} sums", "per (fold, action) block" + (", and the λ sample" if auto else "")
                      ) as p:
        if auto:
            counts, sampled = parts.sum_and_derive(_count_and_sample, objective, d, groups, k, share, settings.seed)
        else:
            counts = parts.sum(objective.count, d, groups, k)
        sums, passes = objective.sums(parts, d, counts, fits)
        p.append(1 + passes)
    search, lam = None, settings.lam
    if isinstance(lam, str):  # "auto"
        with stages.stage(f"{objective.label} λ", f"up to {len(settings.lam_grid)} values by the out-of-fold "
                          f"{objective.loss.replace('_', ' ')} of {'the sampled' if share < 1 else 'all'} rows") as p:
            one, sample_d = concatenated([load_part(s) for s in compute(*sampled.parts, client=parts.client)],
                                         settings.search_folds, k, settings.seed)
            sample = PartSet.build(given, [(one,)], parts.client, spill=parts.spill)  # one part: small passes
            del sampled, one
            lam, search, passes = search_lambda(objective, sample, sample_d, k, settings, progress)
            del sample
            p.append(passes)
    with stages.stage(objective.label, f"{fits.count} {objective.what} on all rows, λ = {lam:g}") as p:
        solved = objective.solve(parts, sums, d, lam, fits, settings, progress)
        p.append(solved.passes)
    if not solved.converged.all():
        warnings.warn(f"{objective.label}: {int((~solved.converged).sum())} of {fits.count} fit(s) did not reach rtol "
                      f"{settings.rtol:g} within the pass budget of {settings.max_iter} passes; the model is used as "
                      f"its last pass left it — give a larger budget (`max_iter`, --max-iter) or rtol (--rtol)",
                      ConvergenceWarning, stacklevel=3)
    model = objective.model(solved, sums, lam, fits, d, k, settings)
    model.metadata.update(lam=float(lam), folds=folds or 0, seed=settings.seed, rtol=settings.rtol, n_features=d,
                          n_actions=k, passes=int(solved.passes))
    if search is not None:
        model.metadata["lambda_search"] = search
    if solved.calibration is not None:
        model.metadata["calibration"] = solved.calibration
    return model


def fit_log(logs, settings: FitSettings | None, objective: Objective | Family, *, client=None,
            storage_options: dict | None = None, progress: bool = False, n_actions: int | None = None):
    """The objective's model on the log ``logs`` (a URL, or opened: :func:`~dr_scale.logs.opened.open_log`, its
    parts listed and footers read once): ``settings`` (None: ``FitSettings()``) and ``client`` checked,
    the parts read by the objective (:meth:`Reads.read_part`) and grouped
    (:func:`~dr_scale.crossfit.parts.read_grouped_parts`; d and k by the log's one rule,
    :meth:`~dr_scale.logs.opened.OpenedLog.dimensions`: from ``settings`` (else ``n_actions``), else the log's
    metadata, else the data) in the spill folder of ``settings.spill``, renumbered to the used features if the
    objective is ``sized_by_use`` (:func:`~dr_scale.crossfit.parts.used_features`; the model gets their ids as
    ``features`` and d as ``dimension``), then :func:`fit_parts`; the model's
    metadata gets the data's fingerprint (``rows:hash``, :class:`~dr_scale.crossfit.parts.Extent`) and the passes
    of each stage."""
    settings = settings or FitSettings()
    if not isinstance(settings, FitSettings):
        raise ParameterError(f"`settings` must be a FitSettings, e.g. FitSettings(folds=2), got "
                             f"{type(settings).__name__} {settings!r:.80}")
    check_client(client)
    logs = open_log(logs, storage_options)
    check_fit_limits(logs, folds=settings.folds, n_features=settings.n_features)
    fs, paths = logs.listing()
    n_features, n_actions = logs.dimensions(settings.n_features, settings.n_actions or n_actions)
    stages = Stages(progress)
    with spill_folder(settings.spill, client, disk=spill_root()) as folder:
        with stages.stage("read", f"{len(paths)} part(s) of {logs}") as p:
            parts, extent, d, k, passes = read_grouped_parts(fs, paths, n_features, n_actions, settings.folds,
                                                             settings.seed, client=client, progress=progress,
                                                             folder=folder, logs=str(logs),
                                                             read_part=objective.read_part)
            p.append(passes)
        ids = None
        if objective.sized_by_use:
            with stages.stage("features", "the features the rows have, renumbered") as p:
                parts, ids = used_features(parts, d)
                p.append(2)
        model = fit_parts(parts, extent.n, d if ids is None else ids.size, k, settings, objective,
                          progress=progress, stages=stages)
        del parts
    if ids is not None:
        model.features, model.dimension = ids, d
        model.metadata.update(n_features=d, used_features=int(ids.size))
    model.metadata.update(fingerprint=f"{extent.n}:{extent.fingerprint:016x}", stage_passes=stages.passes())
    return model
