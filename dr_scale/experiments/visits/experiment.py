"""The covariate-shift experiment (paper, Sec. 5.2, Fig. cv) as a few map-reduce passes.

For each fraction f and repetition r (a *fit* k = f_index·R + r), with S_k the keyed
subsample, a_i the keyed logging draw and p_i the sampler's propensity
(:mod:`dr_scale.experiments.visits.sampler`), π ≡ 1 and ρ̂_k(x) = b_k + w_k·x the ridge fit on
the sampled rows of S_k (:mod:`dr_scale.outofcore.ridge`):

    IPS_k = (1/|S_k|) Σ_{S_k} a_i v_i / p_i
    DR_k  = (1/|S_k|) Σ_{S_k} [ρ̂_k(x_i) + a_i (v_i − ρ̂_k(x_i)) / p_i]        (paper, eq. 1)
          = IPS_k + (1/|S_k|) [ b_k (|S_k| − Σ_{S_k} a_i/p_i) + w_k · c_k ],
    c_k   = Σ_{S_k} (1 − a_i/p_i) x_i ∈ R^d,

so both estimates come from per-part sums that merge with ``+``: no pass is needed
after the fits. The passes over the parts (kept between passes, :mod:`dr_scale.outofcore.passes`):

1. column sums, then one pass per Lanczos step for the principal component x̄;
2. the projections t_i = x_i·x̄: min, mean (the sampler's m and m̄);
3. one pass, per part (:func:`subsample_part`): p_i, the memberships (i, k) and draws
   a_i of all fits, and from them the per-fit sums |S_k|, Σ a, Σ a v, Σ a v/p, Σ a/p
   and the (F, d) matrices Σ a x, Σ a v x and c_k (:func:`add_fit_sums`); the part leaves
   behind only the "lifted" CSR L of its sampled memberships, whose row for (i, k)
   holds x_i in the column block k (columns k·d … k·d + d − 1);
4. the ridge fits by conjugate gradients, in blocks of fits where their rows are
   (:func:`dr_scale.outofcore.blocks.solve_in_blocks`): each part's L is cut into the
   blocks' pieces (:meth:`Lifted.piece`) once, and each block's task runs every CG
   iteration Lᵀ(L P) over its pieces (:func:`add_lifted_gram`);
5. the ridge fits' R² on all rows (first repetition of each fraction).

Not the reward-model fitter of :mod:`dr_scale.reward.fitting`: each of the F = fractions × repetitions fits is one
ridge on its own keyed subsample of rows (a row in many fits), not one per logged action and fold of a log.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass, field
from typing import Annotated, Literal

import dask
import numpy as np
import scipy.sparse as sp
from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from dr_scale.experiments.visits.data import VisitsPart, read_visits_part, visits_parts
from dr_scale.experiments.visits.pca import first_component
from dr_scale.experiments.visits.sampler import logging_actions, memberships, propensity
from dr_scale.io.config import Model, NonNegativeInt, PositiveFinite, PositiveInt
from dr_scale.logs.sparse import binary_csr, compact_index, ones
from dr_scale.outofcore import ridge
from dr_scale.outofcore.blocks import solve_in_blocks
from dr_scale.outofcore.compute import compute
from dr_scale.outofcore.passes import Held, PartSet
from dr_scale.outofcore.products import add_transposed_product

PAPER_FRACTIONS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05)


class Settings(Model):
    """The experiment's options, typed and checked (defaults: the paper's protocol).

    The one description of them: the visits job's keys of the same names
    (:class:`dr_scale.experiments.visits.job.VisitsJob` extends this model) and the Python API share
    its rules and defaults. Frozen, unknown keys refused; ``fractions`` may be given as a list.
    """

    fractions: Annotated[tuple[Annotated[float, Field(gt=0, le=1)], ...], Field(min_length=1)] = PAPER_FRACTIONS
    repetitions: PositiveInt = 100
    seed: NonNegativeInt = 0
    lam: PositiveFinite = 100.0  # ridge penalty λ (see docs/visits.md)
    kernel: Literal["density", "gaussian"] = "density"
    rtol: Annotated[float, Field(gt=0, lt=1)] = 3e-8  # CG: ‖residual‖ ≤ rtol ‖rhs‖ (docs/visits.md: ~1e-7)
    max_iter: PositiveInt = 1000

    @field_validator("fractions", mode="before")
    @classmethod
    def _a_list_as_a_tuple(cls, value):
        if not isinstance(value, (list, tuple)):
            raise PydanticCustomError("list_type", "Input should be a valid list")
        return tuple(value)

    @property
    def n_fits(self) -> int:
        """F = fractions × repetitions: the fits one pass computes together."""
        return len(self.fractions) * self.repetitions


# -- per-part steps -------------------------------------------------------------
@dataclass(frozen=True)
class Projections:
    """Count, sum and minimum of the rows' projections t_i = x_iᵀ x̄ (merge with ``+``): the sampler's
    m = min_i t_i and m̄ = Σ t_i / N."""

    n: int
    total: float
    minimum: float

    @classmethod
    def of(cls, t: np.ndarray) -> Projections:
        """The count, sum and minimum of the projections t of one part."""
        return cls(t.shape[0], t.sum(), float(t.min()) if t.size else np.inf)

    def __add__(self, other: Projections) -> Projections:
        return Projections(self.n + other.n, self.total + other.total, min(self.minimum, other.minimum))


def _projections(part: VisitsPart, xbar: np.ndarray) -> Projections:
    return Projections.of(part.X @ xbar)


def fit_bounds(fits: np.ndarray, n_fits: int) -> np.ndarray:
    """Start of each fit's memberships in ``fits`` (sorted), and the end: n_fits + 1 positions."""
    return np.searchsorted(fits, np.arange(n_fits + 1))


def lift(X: sp.csr_matrix, rows: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR arrays of memberships grouped by fit — fit k's are rows[bounds[k]:bounds[k + 1]]
    (:func:`fit_bounds`) —: the row of membership q of fit k holds x_{rows[q]} in column block k.

    The rows are gathered by scipy's row indexing of X's pattern with int8 values (the
    values are dropped: half the memory traffic of gathering float64 ones); then the
    column indices of fit k's memberships, one contiguous run, are shifted by k·d.
    """
    d, n_fits = X.shape[1], bounds.shape[0] - 1
    gathered = binary_csr(X.indptr, X.indices, d, np.int8)[rows]
    # one index type for indptr and indices, so scipy does not cast them on every product
    indptr, indices = compact_index(gathered.indptr, gathered.indices, n_fits * d)
    starts = indptr[bounds]
    for k in range(1, n_fits):
        indices[starts[k]:starts[k + 1]] += k * d
    return indptr, indices


@dataclass
class Lifted(Held):
    """The lifted CSR L of one part's sampled memberships: the row of (i, k) holds x_i in column block k.

    The rows are sorted by fit: fit k's are rows ``fit_rows[k]`` to ``fit_rows[k + 1]``.
    """

    indptr: np.ndarray
    indices: np.ndarray
    n_cols: int
    fit_rows: np.ndarray

    @property
    def matrix(self) -> sp.csr_matrix:
        """L as a binary CSR matrix (the rows of every fit, all columns)."""
        return binary_csr(self.indptr, self.indices, self.n_cols)

    def fits(self, first: int, stop: int) -> sp.csr_matrix:
        """L's rows of fits ``first`` … ``stop − 1`` (all columns)."""
        r0, r1 = self.fit_rows[first], self.fit_rows[stop]
        return binary_csr(self.indptr[r0:r1 + 1] - self.indptr[r0], self.indices[self.indptr[r0]:self.indptr[r1]],
                          self.n_cols)

    def piece(self, first: int, stop: int) -> Lifted:
        """The rows of fits ``first`` … ``stop − 1`` as a Lifted of their own: fit k becomes fit k − first,
        its column block moves down by ``first`` blocks (a copy)."""
        r0, r1 = self.fit_rows[first], self.fit_rows[stop]
        d = self.n_cols // (self.fit_rows.shape[0] - 1)
        return Lifted(self.indptr[r0:r1 + 1] - self.indptr[r0],
                      self.indices[self.indptr[r0]:self.indptr[r1]] - self.indices.dtype.type(first * d),
                      (stop - first) * d, self.fit_rows[first:stop + 1] - r0)


@dataclass(frozen=True)
class Population:
    """Sums over all rows (merge with ``+``): the true mean Σv/N, the visits' sd, the mean propensity
    Σp/N and the naive mean over sampled users Σpv/Σp come from them."""

    n: float = 0.0  # N
    visits: float = 0.0  # Σ v
    visits_squared: float = 0.0  # Σ v²
    propensity: float = 0.0  # Σ p
    propensity_visits: float = 0.0  # Σ p v

    @classmethod
    def of(cls, visits: np.ndarray, p: np.ndarray) -> Population:
        """The population sums of one part: n, Σ v, Σ v², Σ p, Σ p·v."""
        return cls(len(visits), visits.sum(), (visits ** 2).sum(), p.sum(), (p * visits).sum())

    def __add__(self, other: Population) -> Population:
        return Population(*(getattr(self, k) + getattr(other, k) for k in self.__dataclass_fields__))


@dataclass
class FitSums(Held):
    """Per-fit sums of one or more parts (merge with ``+``)."""

    n: np.ndarray  # |S_k|
    n_a: np.ndarray  # Σ a
    sy: np.ndarray  # Σ a v
    ips: np.ndarray  # Σ a v / p
    sap: np.ndarray  # Σ a / p
    sx: np.ndarray  # (F, d) Σ a x
    xy: np.ndarray  # (F, d) Σ a v x
    c: np.ndarray  # (F, d) Σ (1 − a/p) x
    population: Population

    @classmethod
    def empty(cls, n_fits: int, d: int) -> FitSums:
        """Zero sums of ``n_fits`` fits over ``d`` features: the identity of ``+``."""
        def zeros(*shape: int) -> np.ndarray:
            """Zeros of shape (F, *shape)."""
            return np.zeros((n_fits, *shape))

        return cls(zeros(), zeros(), zeros(), zeros(), zeros(), zeros(d), zeros(d), zeros(d), Population())

    def __add__(self, other: FitSums) -> FitSums:
        return FitSums(*(getattr(self, k) + getattr(other, k) for k in self.__dataclass_fields__))


#: Memberships per block of the lifted column counts in :func:`add_fit_sums` (a block's CSR: ~4 B per active feature).
SUM_BLOCK = 100_000


def subsample_part(total: FitSums | None, part: VisitsPart, xbar, m: float, mbar: float,
                   settings: Settings) -> tuple[FitSums, Lifted]:
    """One part's propensities, keyed memberships (i, k) and draws a of every fit → its per-fit sums
    (added into ``total``, or into new zero sums if None) and L.

    Memberships are grouped by fit k = f_index·R + r (:func:`memberships`), so each fit's lifted rows
    are contiguous and touch one block of the (F, d) arrays (cache-friendly products).
    Only L, the sampled memberships' lifted CSR, is kept for the ridge passes.
    """
    p = propensity(part.X @ xbar, m, mbar, settings.kernel)
    rows, fits, draws = [], [], []
    for fi, f in enumerate(settings.fractions):
        r, rep = memberships(part.row_id, f, settings.repetitions, settings.seed, fi)
        rows.append(r)
        fits.append(fi * settings.repetitions + rep)
        draws.append(logging_actions(p[r], part.row_id[r], rep, settings.seed, fi))
    fit_type = np.int16 if settings.n_fits <= np.iinfo(np.int16).max else np.int32
    row, fit, a = np.concatenate(rows).astype(np.int32), np.concatenate(fits).astype(fit_type), np.concatenate(draws)
    F = settings.n_fits
    bounds = fit_bounds(fit[a], F)
    lifted = Lifted(*lift(part.X, row[a], bounds), F * part.n_features, bounds)
    if total is None:
        total = FitSums.empty(F, part.n_features)
    return add_fit_sums(total, part, p, row, fit, a, lifted), lifted


def add_fit_sums(total: FitSums, part: VisitsPart, p: np.ndarray, row: np.ndarray, fit: np.ndarray,
                 a: np.ndarray, lifted: Lifted) -> FitSums:
    """Add the per-fit sums of one part's memberships (row[q], fit[q]) with draws a[q], sorted by fit, into ``total``.

    Σ_{S_k} a_i x_i and Σ_{S_k} a_i v_i x_i involve the sampled memberships only: the
    products Lᵀ1 and Lᵀv with their lifted CSR L. c_k = Σ_{S_k} (1 − a_i/p_i) x_i is
    Lᵀ(1 − 1/p) over the sampled memberships plus L₀ᵀ1 over the others, L₀ their lifted
    CSR, built over blocks of whole fits of about ``SUM_BLOCK`` memberships (a block's
    columns are its own fits' d-blocks, so the whole L₀ is never held, and no row is
    gathered twice). Every product adds into ``total``'s arrays in place
    (:func:`~dr_scale.outofcore.products.add_transposed_product`).
    """
    d, n_fits = part.n_features, lifted.n_cols // part.n_features
    sampled, sampled_fit, L = row[a], fit[a], lifted.matrix
    v, w = part.visits[sampled], 1.0 / p[sampled]
    c = total.c.reshape(-1)  # views: the products add into the (F, d) sums in place
    add_transposed_product(total.sx.reshape(-1), L, ones(sampled.shape[0]))
    add_transposed_product(total.xy.reshape(-1), L, v)
    add_transposed_product(c, L, 1.0 - w)
    unsampled = row[~a]
    bounds = fit_bounds(fit[~a], n_fits)
    k0 = 0
    while k0 < n_fits:
        k1 = min(n_fits, max(k0 + 1, int(np.searchsorted(bounds, bounds[k0] + SUM_BLOCK, side="right")) - 1))
        lo, hi = bounds[k0], bounds[k1]
        if hi > lo:
            block = binary_csr(*lift(part.X, unsampled[lo:hi], bounds[k0:k1 + 1] - lo), (k1 - k0) * d)
            add_transposed_product(c[k0 * d:k1 * d], block, ones(hi - lo))
        k0 = k1
    total.n[:] += np.bincount(fit, minlength=n_fits)
    for name, weights in (("n_a", None), ("sy", v), ("ips", v * w), ("sap", w)):  # sums over sampled memberships
        getattr(total, name)[:] += np.bincount(sampled_fit, weights=weights, minlength=n_fits)
    total.population += Population.of(part.visits, p)
    return total


def _estimate_sums(sums: FitSums) -> FitSums:
    """The sums the estimates use: all but the (F, d) Σ a x and Σ a v x, which only the ridge fits need
    (they stay where they were summed, :func:`_ridge_stats`)."""
    return dataclasses.replace(sums, sx=np.empty((0, 0)), xy=np.empty((0, 0)))


def _ridge_stats(sums: FitSums) -> ridge.RidgeStats:
    """The ridge fits' statistics from the per-fit sums (binary x: Σx² = Σx)."""
    return ridge.RidgeStats(sums.n_a, sums.sx, sums.sx, sums.sy, sums.xy)


def add_lifted_gram(total: np.ndarray | None, lifted: Lifted, P: np.ndarray, first: int, stop: int) -> np.ndarray:
    """total += Σ over a part's sampled memberships (i, k) of x_i (x_i · P_k) = Lᵀ(L vec P), in place (F·d,).

    Only the rows of fits ``first`` … ``stop − 1`` are visited: the caller passes the range
    of the fits whose P_k is not zero (the others' terms are zero).
    """
    L, p = lifted.fits(first, stop), P.ravel()
    return add_transposed_product(np.zeros(p.shape[0]) if total is None else total, L, L @ p)


def _r2_sums(part: VisitsPart, coef: np.ndarray, intercept: np.ndarray):
    """Σ_i (v_i − b_j − x_i·w_j)² per fit j (one-vector mat-vecs, which scipy runs faster than one (n, F) product)."""
    X = part.X
    return np.array([np.sum((part.visits - b - X @ w) ** 2) for w, b in zip(coef, intercept)])


# -- the experiment -----------------------------------------------------------------
@dataclass
class ExperimentResult:
    settings: Settings
    n_rows: int
    n_features: int
    n_parts: int
    truth: float  # mean visits over all rows
    calibration: dict
    ips: np.ndarray  # (F,) estimates per fit
    dr: np.ndarray
    subsample_size: np.ndarray
    sampled: np.ndarray
    ridge_iterations: int
    r2: np.ndarray  # (n_fractions,) R² on all rows of repetition 0's ridge fit
    timings: dict = field(default_factory=dict)

    def per_fraction(self) -> list[dict]:
        """Bias, std (ddof 0, so rmse² = bias² + std²) and rmse of IPS and DR per fraction."""
        R = self.settings.repetitions
        out = []
        for fi, f in enumerate(self.settings.fractions):
            sl = slice(fi * R, (fi + 1) * R)
            valid = self.subsample_size[sl] > 0
            row = {"fraction": f, "repetitions": int(valid.sum()),
                   "mean_subsample": float(self.subsample_size[sl].mean()),
                   "mean_sampled": float(self.sampled[sl].mean()), "ridge_r2": float(self.r2[fi])}
            for name, est in (("ips", self.ips[sl][valid]), ("dr", self.dr[sl][valid])):
                err = est - self.truth
                row[f"{name}_bias"] = float(err.mean()) if err.size else float("nan")
                row[f"{name}_std"] = float(err.std()) if err.size else float("nan")
                row[f"{name}_rmse"] = float(np.sqrt((err ** 2).mean())) if err.size else float("nan")
            row["dr_rmse_reduction"] = 1.0 - row["dr_rmse"] / row["ips_rmse"]
            out.append(row)
        return out

    def mean_rmse_reduction(self) -> float:
        """The mean over the fractions of DR's RMSE reduction, 1 − RMSE_DR / RMSE_IPS (NaN entries skipped)."""
        return float(np.nanmean([r["dr_rmse_reduction"] for r in self.per_fraction()]))


def _stage(progress: bool, message: str) -> None:
    if progress:
        print(message, file=sys.stderr, flush=True)


def load_parts(url: str, storage_options: dict | None = None, n_features: int | None = None, client=None,
               progress: bool = False, spill: str | None = None) -> PartSet:
    """Read every part once into Dask memory (local process or cluster workers) or a local ``spill`` folder."""
    fs, paths, d = visits_parts(url, storage_options, n_features)
    return PartSet.build(read_visits_part, [(fs, p, d) for p in paths], client, progress, spill)


def fit_sampler(parts: PartSet, *, progress: bool = False):
    """(principal component, m, m̄): what the sampler's propensities need, from passes over the parts."""
    _stage(progress, "principal component of the features …")
    comp = first_component(parts, progress=progress)
    t = parts.sum(_projections, comp.vector)
    return comp, t.minimum, t.total / t.n


def run_experiment(parts: PartSet, settings: Settings | None = None, *, progress: bool = False) -> ExperimentResult:
    """All fractions × repetitions of IPS and DR on the parts (see the module docstring); ``settings`` default:
    the paper's (:class:`Settings`)."""
    settings = settings if settings is not None else Settings()
    timings = {}
    clock = time.perf_counter()

    def lap(name):
        """Record the seconds since the previous lap as stage ``name``."""
        nonlocal clock
        now = time.perf_counter()
        timings[name] = round(now - clock, 3)
        clock = now

    comp, m, mbar = fit_sampler(parts, progress=progress)
    lap("principal_component")
    _stage(progress, f"propensities, {settings.n_fits} subsamples and logging draws …")
    kept, lifted = parts.sum_and_derive(subsample_part, comp.vector, m, mbar, settings, progress=progress, keep=True)
    (sums,) = compute(dask.delayed(_estimate_sums)(kept), client=parts.client)
    lap("subsamples")
    _stage(progress, f"ridge: {settings.n_fits} fits by conjugate gradients, in blocks of fits …")
    fitted = solve_in_blocks(lifted, Lifted.piece, add_lifted_gram, dask.delayed(_ridge_stats)(kept), settings.lam,
                             sums.n_a, n_features=sums.c.shape[1], rtol=settings.rtol, max_iter=settings.max_iter,
                             progress=progress)
    lap("ridge")
    size = sums.n
    with np.errstate(invalid="ignore", divide="ignore"):
        ips = np.where(size > 0, sums.ips / size, np.nan)
        correction = fitted.intercept * (size - sums.sap) + np.einsum("fd,fd->f", fitted.coef, sums.c)
        dr = np.where(size > 0, (sums.ips + correction) / size, np.nan)
    first = np.arange(len(settings.fractions)) * settings.repetitions
    sse = parts.sum(_r2_sums, fitted.coef[first], fitted.intercept[first])
    pop = sums.population
    N, truth, naive = pop.n, pop.visits / pop.n, pop.propensity_visits / pop.propensity
    r2 = 1.0 - sse / (pop.visits_squared - N * truth ** 2)
    lap("estimates")
    calibration = {"true_mean": truth, "visits_sd": float(np.sqrt(pop.visits_squared / N - truth ** 2)),
                   "mean_propensity": pop.propensity / N, "naive_sampled_mean": naive,
                   "naive_bias": naive / truth - 1.0, "projection_min": m, "projection_mean": mbar,
                   "component_variance": comp.variance, "lanczos_passes": comp.passes}
    return ExperimentResult(settings, int(N), comp.mean.shape[0], len(parts.parts), float(truth),
                            {k: float(v) for k, v in calibration.items()}, ips, dr, size, sums.n_a,
                            fitted.iterations, r2, timings)
