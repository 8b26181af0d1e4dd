"""Per-action ridge reward models fitted out of core — the one fitter behind ``dr-scale fit``,
``evaluate --fit-reward-model`` and ``learn``'s ρ̂ (:func:`fit_reward_model`, :func:`fit_on_parts`).

For each action a, on the rows that logged a (the paper's ρ̂, Sec. 5: ridge regression),

    (w_a, b_a) = argmin_{w, b}  Σ_{i: a_i = a} (r_i − b − x_i·w)² + λ ‖w‖²        (b not penalised),

solved by :func:`dr_scale.outofcore.ridge.fit` (Jacobi-preconditioned block conjugate
gradients) for all fits at once: every CG iteration is one pass over the log's parts,
read once and then kept in memory (a cluster's workers, or this process) or spilled to
local files (:mod:`dr_scale.outofcore.passes`).

**Layout.** Every part's rows are sorted (stably) by the block b = f_i·k + a_i, with
f_i = ⌊K·u(row_id_i)⌋ the row's cross-fitting fold (:func:`dr_scale.reward.models.fold_of`;
f_i = 0 without folds) and a_i its logged action, so that the rows of block b are the
contiguous run [start_b, start_{b+1}) of the part (:class:`GroupedPart`). Fold model j of
action a has the Gram product Σ_{f≠j} X_{fa}ᵀ X_{fa} P_{ja} and the full-data model of a
Σ_f X_{fa}ᵀ X_{fa} P_a: one pair of sparse mat-vecs per block and fit that uses it, over
views of the part's arrays — a pass costs K mat-vec pairs per row (K − 1 fold models and
the full-data model), no lifted copy of the rows.

**Cross-fitting** (``folds=K``): fold model j is fitted on the rows of the other folds
and predicts the rows of fold j only. **The full-data model** (``coef``, ``intercept``)
is the ridge fit on all rows at the same λ, with or without folds — what predicts rows
without a row id, and the shrinkage centre of ``learn``'s policy; it is fitted in the
same passes as the fold models.

**λ = "auto"** (the default): the ridge penalty of a Gaussian prior w ~ N(0, τ²I) under
noise of variance σ² is λ = σ²/τ², which does not grow with the number of rows; so λ is
chosen on a keyed sample of at most ``search_rows`` rows (row i is in it when
u(row_id_i) < search_rows / n, u keyed by (seed, "lambda sample")): for each λ of the
grid the K·k fold models are fitted on the sample (K = ``folds``, or
:data:`SEARCH_FOLDS` without folds; the same folds as the model's), scored by the
sample's out-of-fold squared error Σ_i (r_i − ρ̂^{(f_i)}_{a_i}(x_i))² (cross-fitting
doubles as cross-validation), and the λ with the smallest error is used on all rows.

**An action without rows** in a fit (never logged; or, for a fold model, logged only in
that fold) has no data: its model is w_a = 0 and b_a = the mean reward of the fit's rows
over all actions (the pooled mean), with an :class:`UnloggedActionWarning`. DR then
corrects that constant guess with the importance-weighted residuals wherever the target
policy takes the action.
"""

from __future__ import annotations

import contextlib
import sys
import time
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from dr_scale.core import keyed_random
from dr_scale.core.errors import ParameterError, UserError
from dr_scale.core.numbers import number
from dr_scale.io.cache import spill_root
from dr_scale.io.config import Folds, NonNegativeInt, PositiveFinite, PositiveInt, check
from dr_scale.logs.contract import LogDataError, action_vocabulary, binary_csr, list_parts, log_metadata, read_partition
from dr_scale.outofcore import ridge
from dr_scale.outofcore.compute import check_client, compute
from dr_scale.outofcore.passes import Held, PartSet, load_part, spill_folder
from dr_scale.outofcore.products import add_transposed_product
from dr_scale.reward.models import LinearRewardModel, fold_of

#: The penalties ``lam="auto"`` chooses from (binary or standardised features, rewards in [0, 1]).
LAMBDA_GRID = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
#: Rows of the keyed sample on which ``lam="auto"`` chooses λ.
SEARCH_ROWS = 200_000
#: Folds of the λ search when the model itself has none.
SEARCH_FOLDS = 5
SAMPLE_PURPOSE = "lambda sample"
#: CG stops when ‖residual‖ ≤ RTOL ‖rhs‖ for every fit (module docstring of :class:`FitSettings`).
RTOL = 1e-2
MAX_ITER = 1000
#: ρ̂ is fitted on rewards with |r| ≤ MAX_ABS_REWARD: its sums of squares (CG's ‖Xᵀr‖², the λ search's
#: Σ (r − ρ̂)²) then stay finite in float64 for any realistic log (n |r|² ≤ 10²¹⁰ for n ≤ 10¹⁰ rows);
#: beyond it they overflow and the fit would be silently wrong. A larger reward is the log's error.
MAX_ABS_REWARD = 1e100


class UnloggedActionWarning(UserWarning):
    """An action has no rows to fit on; its model falls back to the pooled mean reward."""


def check_lam(lam, parameter: str = "lam", allow_none: bool = False):
    """``lam`` as a float, or ``"auto"`` (or None if allowed); a :class:`~dr_scale.core.errors.ParameterError`
    naming ``parameter`` otherwise (the rule of ``--lam``: a positive finite number or ``"auto"``)."""
    if lam == "auto" and isinstance(lam, str) or lam is None and allow_none:
        return lam
    if isinstance(lam, str):
        raise ParameterError(f"`{parameter}` must be a positive number or 'auto', got {lam!r}")
    return check(PositiveFinite, parameter, lam)


def check_int(value, parameter: str, low: int, allow_none: bool = False):
    """``value`` as an int ≥ ``low`` ∈ {0, 1, 2} (or None if allowed), by the shared rules of
    :mod:`dr_scale.io.config` (:data:`~dr_scale.io.config.NonNegativeInt`, ``PositiveInt``, ``Folds``)."""
    if value is None and allow_none:
        return None
    return int(check({0: NonNegativeInt, 1: PositiveInt, 2: Folds}[low], parameter,
                     int(value) if isinstance(value, np.integer) else value))


def check_positive(value, parameter: str) -> float:
    """``value`` as a positive finite float (the rule :data:`~dr_scale.io.config.PositiveFinite`)."""
    return float(check(PositiveFinite, parameter, value))


@dataclass(frozen=True)
class FitSettings:
    """How :func:`fit_reward_model` fits ρ̂; checked at construction (errors name the parameter).

    ``lam``: λ > 0, or ``"auto"`` (default: the grid ``lam_grid`` by the out-of-fold error on a keyed
    sample of ``search_rows`` rows, module docstring); ``folds``: K ≥ 2 fold models for cross-fitting
    beside the full-data one, or None; ``seed``: the key of the folds and of the λ sample;
    ``rtol``, ``max_iter``: every CG solve (the search's and the final one) stops when
    ‖residual‖ ≤ rtol ‖rhs‖ for every fit, or after ``max_iter`` passes. The default rtol = 1e-2 is sized
    to the statistical error, not to the arithmetic: on the generated 1M-row log (2^18 features, 10
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

    def __post_init__(self):
        put = object.__setattr__
        put(self, "lam", check_lam(self.lam))
        put(self, "folds", check_int(self.folds, "folds", 2, allow_none=True))
        put(self, "seed", check_int(self.seed, "seed", 0))
        put(self, "rtol", check_positive(self.rtol, "rtol"))
        put(self, "max_iter", check_int(self.max_iter, "max_iter", 1))
        grid = tuple(self.lam_grid) if isinstance(self.lam_grid, (tuple, list, np.ndarray)) else None
        if not grid:
            raise ParameterError(f"`lam_grid` must be a non-empty sequence of positive numbers, got {self.lam_grid!r}")
        put(self, "lam_grid", tuple(check_lam(float(v) if isinstance(v, np.floating) else v, "lam_grid")
                                    for v in grid))
        if "auto" in self.lam_grid:
            raise ParameterError("`lam_grid` must hold positive numbers, not 'auto'")
        put(self, "search_rows", check_int(self.search_rows, "search_rows", 1))
        put(self, "n_features", check_int(self.n_features, "n_features", 1, allow_none=True))
        put(self, "n_actions", check_int(self.n_actions, "n_actions", 1, allow_none=True))
        if not isinstance(self.spill, str) or not self.spill:
            raise ParameterError(f"`spill` must be 'disk', 'memory' or a folder, got {self.spill!r}")

    @property
    def search_folds(self) -> int:
        """The folds of the λ search: the model's, else :data:`SEARCH_FOLDS`."""
        return self.folds or SEARCH_FOLDS


# -- parts ------------------------------------------------------------------------------
@dataclass
class LogPart(Held):
    """One part as read and validated: CSR features (``data`` None: binary), actions, rewards, propensities."""

    row_id: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray | None
    action: np.ndarray
    reward: np.ndarray
    propensity: np.ndarray

    def __len__(self) -> int:
        return self.row_id.shape[0]

    def matrix(self, n_features: int) -> sp.csr_matrix:
        """The features as a CSR matrix with ``n_features`` columns (no copy)."""
        if self.data is None:
            return binary_csr(self.indptr, self.indices, n_features)
        return sp.csr_matrix((self.data, self.indices, self.indptr), shape=(len(self), n_features), copy=False)

    def rows(self, keep: np.ndarray, n_features: int) -> LogPart:
        """The part restricted to the rows where ``keep`` is true."""
        X = self.matrix(n_features)[keep]
        return LogPart(self.row_id[keep], X.indptr, X.indices, None if self.data is None else X.data,
                       self.action[keep], self.reward[keep], self.propensity[keep])


def read_log_part(fs, path: str, n_features: int | None, n_actions: int | None) -> LogPart:
    """Read one part through the logged-data contract (:func:`dr_scale.logs.contract.read_partition`)."""
    part = read_partition(fs, path, n_features=n_features, n_actions=n_actions)
    too_big = np.flatnonzero(np.abs(part.reward) > MAX_ABS_REWARD)
    if too_big.size:
        raise LogDataError(path, "reward", f"|reward| above {MAX_ABS_REWARD:g}, the largest that fit and learn take "
                           "(their sums of squares would overflow float64); rescale the rewards",
                           int(part.row_id[too_big[0]]))
    X = part.X
    data = np.asarray(X.data, dtype=np.float64) if "values" in part.table.column_names else None
    return LogPart(part.row_id, X.indptr, X.indices, data, part.action, part.reward, part.propensity)


@dataclass
class Extent:
    """Rows, the largest action and feature index, and the data's fingerprint: Σ_i h(row_id_i, a_i, r_i,
    |x_i|₀) mod 2⁶⁴ (:func:`dr_scale.core.keyed_random.row_hash`), the same for any partitioning. Merge with ``+``."""

    n: int
    max_action: int
    max_feature: int
    fingerprint: int

    def __add__(self, other: Extent) -> Extent:
        return Extent(self.n + other.n, max(self.max_action, other.max_action),
                      max(self.max_feature, other.max_feature), (self.fingerprint + other.fingerprint) % 2 ** 64)

    @classmethod
    def of(cls, part: LogPart) -> Extent:
        h = keyed_random.row_hash(part.row_id, part.action, part.reward, np.diff(part.indptr))
        return cls(len(part.row_id), int(part.action.max(initial=-1)), int(part.indices.max(initial=-1)),
                   int(h.sum(dtype=np.uint64)))


@dataclass
class GroupedPart(LogPart):
    """A :class:`LogPart` whose rows are sorted by block b = fold·k + action: block b is rows [start[b], start[b+1])."""

    start: np.ndarray = None

    def block(self, b: int, n_features: int) -> sp.csr_matrix:
        """The rows of block b as a CSR matrix over views of the part's arrays (no copy of the indices)."""
        lo, hi = int(self.start[b]), int(self.start[b + 1])
        indptr = self.indptr[lo:hi + 1] - self.indptr[lo]
        first, last = int(self.indptr[lo]), int(self.indptr[hi])
        if self.data is None:
            return binary_csr(indptr, self.indices[first:last], n_features)
        return sp.csr_matrix((self.data[first:last], self.indices[first:last], indptr), shape=(hi - lo, n_features),
                             copy=False)

    def subset(self, keep: np.ndarray, n_features: int) -> GroupedPart:
        """The rows where ``keep`` is true, still grouped."""
        blocks = np.repeat(np.arange(self.start.size - 1), np.diff(self.start))[keep]
        return grouped(self.rows(keep, n_features), blocks, self.start.size - 1)


def grouped(part: LogPart, blocks: np.ndarray, n_blocks: int) -> GroupedPart:
    """The part with its rows stably sorted by ``blocks``."""
    order = np.argsort(blocks, kind="stable")
    n_cols = int(part.indices.max(initial=0)) + 1
    X = (binary_csr(part.indptr, part.indices, n_cols, np.int8) if part.data is None else part.matrix(n_cols))[order]
    start = np.concatenate([[0], np.cumsum(np.bincount(blocks, minlength=n_blocks))])
    return GroupedPart(part.row_id[order], X.indptr, X.indices, None if part.data is None else X.data,
                       part.action[order], part.reward[order], part.propensity[order], start)


def group_blocks(part: LogPart, folds: int | None, n_actions: int, seed: int) -> tuple[np.ndarray, int]:
    """(each row's block f_i·k + a_i, the number of blocks max(K, 1)·k): f_i the row's fold, 0 without folds."""
    fold = fold_of(part.row_id, folds, seed) if folds else np.zeros(len(part), np.int64)
    return fold * n_actions + part.action, max(folds or 1, 1) * n_actions


def group(part: LogPart, folds: int | None, n_actions: int, seed: int) -> GroupedPart:
    """The part grouped by (fold, action) (module docstring)."""
    return grouped(part, *group_blocks(part, folds, n_actions, seed))


def read_grouped_part(fs, path: str, n_features: int, n_actions: int, folds: int | None, seed: int) -> GroupedPart:
    """Read one part (:func:`read_log_part`) and group its rows by (fold, action)."""
    return group(read_log_part(fs, path, n_features, n_actions), folds, n_actions, seed)


def concatenated(parts: list[GroupedPart], folds: int, n_actions: int, seed: int) -> tuple[GroupedPart, int]:
    """The parts' rows as one part grouped by (fold over ``folds`` folds, action) (each block's rows in the parts'
    order), its features renumbered 0 … m − 1 in the order of their ids (m, the number of distinct features,
    returned beside it): a ridge fit gives the features a part never shows weight 0, so fits on it need only its
    m columns."""
    offsets = np.cumsum([0] + [int(p.indptr[-1]) for p in parts[:-1]])
    indptr = np.concatenate([[0]] + [p.indptr[1:] + o for p, o in zip(parts, offsets)]).astype(parts[0].indptr.dtype)
    data = None if parts[0].data is None else np.concatenate([p.data for p in parts])
    cat = {f: np.concatenate([getattr(p, f) for p in parts]) for f in ("row_id", "indices", "action", "reward",
                                                                       "propensity")}
    present, indices = np.unique(cat["indices"], return_inverse=True)
    one = LogPart(cat["row_id"], indptr, indices.astype(cat["indices"].dtype), data, cat["action"], cat["reward"],
                  cat["propensity"])
    return group(one, folds, n_actions, seed), max(present.size, 1)


def sample_of(part: GroupedPart, share: float, n_features: int, seed: int) -> GroupedPart:
    """The part's rows in the keyed λ sample (u(row_id) < share)."""
    return part.subset(keyed_random.uniform(part.row_id, seed, SAMPLE_PURPOSE) < share, n_features)


# -- passes (functions of one part; their results are summed over the parts) ---------------
def block_counts(part: GroupedPart, n_features: int):
    """Per block b: (n_b, Σ r, Σ (x² − x) (B, d); (B, 0) while the features are binary) over the part's rows."""
    n_blocks = part.start.size - 1
    excess = np.zeros((n_blocks, n_features if part.data is not None else 0))
    if part.data is not None:
        for b in range(n_blocks):
            X = part.block(b, n_features)
            add_transposed_product(excess[b], X.multiply(X) - X, np.ones(X.shape[0]))
    sy = np.array([part.reward[part.start[b]:part.start[b + 1]].sum() for b in range(n_blocks)])
    return np.diff(part.start).astype(np.float64), sy, excess


def add_block_products(total, part: GroupedPart, n_features: int, weighted: bool) -> np.ndarray:
    """total += per block b the sum of the block's rows x_i (B, d), weighted by their rewards r_i if ``weighted``."""
    n_blocks = part.start.size - 1
    if total is None:
        total = np.zeros((n_blocks, n_features))
    for b in range(n_blocks):
        lo, hi = part.start[b], part.start[b + 1]
        weights = part.reward[lo:hi] if weighted else np.ones(hi - lo)
        add_transposed_product(total[b], part.block(b, n_features), weights)
    return total


def block_sums(parts, n_features: int, counts=None) -> tuple:
    """Per block b over the parts: (n_b, Σ r, Σ x (B, d), Σ r x (B, d), Σ (x² − x)) — the counts (:func:`block_counts`;
    given, or one pass), then Σ x and Σ r x in a pass each, so that a pass's terms are one (B, d) array (a task's
    summation tree holds a few of them at once)."""
    n, sy, excess = parts.sum(block_counts, n_features) if counts is None else counts
    return (n, sy, parts.accumulate(add_block_products, n_features, False),
            parts.accumulate(add_block_products, n_features, True), excess)


@dataclass(frozen=True)
class Fits:
    """The fits of one solve on parts grouped over ``groups`` folds: the fold models (fit j·k + a, j < ``folds``;
    ``folds`` = 0: none) and, if ``full``, the full-data models (fit K·k + a)."""

    folds: int
    n_actions: int
    full: bool

    @property
    def groups(self) -> int:
        return max(self.folds, 1)

    @property
    def count(self) -> int:
        return (self.folds + self.full) * self.n_actions

    def of_block(self, f: int, a: int) -> list[int]:
        """The fits whose rows include block (f, a): the fold models j ≠ f, and the full-data model."""
        k = self.n_actions
        return [j * k + a for j in range(self.folds) if j != f] + ([self.folds * k + a] if self.full else [])

    def combine(self, v: np.ndarray) -> np.ndarray:
        """Per-block values (B, …) summed into per-fit ones (F, …): fold model j over the blocks (f, a), f ≠ j,
        the full-data model over all blocks (f, a)."""
        per_block = v.reshape(self.groups, self.n_actions, *v.shape[1:])
        # summed, not the total minus fold j's: fold model j's statistics then do not depend, even in their
        # last bit, on the rows of fold j
        rows = [per_block[[f for f in range(self.folds) if f != j]].sum(axis=0) for j in range(self.folds)]
        return np.stack(rows + ([per_block.sum(axis=0)] if self.full else [])).reshape(self.count, *v.shape[1:])

    def stats(self, sums) -> ridge.RidgeStats:
        """The fits' statistics from the block sums (:func:`block_sums`): a fold model sums the blocks (f, a),
        f ≠ j; a full-data model all blocks (f, a)."""
        n, sy, sx, xy, excess = sums
        fits = self.combine
        sx_fits = fits(sx)
        return ridge.RidgeStats(fits(n), sx_fits, sx_fits + fits(excess) if excess.size else sx_fits, fits(sy),
                                fits(xy))


def add_fit_gram(total, part: GroupedPart, P: np.ndarray, fits: Fits, active: np.ndarray) -> np.ndarray:
    """total += the fits' Gram products: for fit F, Σ over the blocks of its rows of X_bᵀ X_b P_F; P is (F, d), and
    fits not ``active`` (converged: P_F = 0) are skipped."""
    if total is None:
        total = np.zeros_like(P)
    d = P.shape[1]
    for f in range(fits.groups):
        for a in range(fits.n_actions):
            using = [F for F in fits.of_block(f, a) if active[F]]
            if not using:
                continue
            X = part.block(f * fits.n_actions + a, d)
            if X.shape[0] == 0:
                continue
            for F in using:
                add_transposed_product(total[F], X, X @ P[F])
    return total


def out_of_fold_errors(part: GroupedPart, coef: np.ndarray, intercept: np.ndarray, folds: int) -> np.ndarray:
    """(3, k): per action Σ (r_i − ρ̂^{(f_i)}_{a_i}(x_i))², Σ r_i, Σ r_i² over the part's rows; coef (K·k, d),
    intercept (K·k,) the fold models."""
    k = coef.shape[0] // folds
    out = np.zeros((3, k))
    for b in range(folds * k):
        X = part.block(b, coef.shape[1])
        y = part.reward[part.start[b]:part.start[b + 1]]
        out[:, b % k] += [float(np.sum((y - X @ coef[b] - intercept[b]) ** 2)), float(y.sum()), float(y @ y)]
    return out


# -- fitting -----------------------------------------------------------------------------
def solve(parts: PartSet, stats: ridge.RidgeStats, lam: float, fits: Fits, *, rtol: float, max_iter: int,
          progress: bool = False) -> tuple[ridge.RidgeFit, np.ndarray]:
    """The fits at penalty λ by block CG, one pass over the parts per iteration; and their intercepts, where a
    fit had no rows the pooled mean reward of its rows over all actions (w = 0)."""
    def gram(P):
        active = P.any(axis=1)  # CG zeroes the directions of converged fits
        if not active.any():
            return np.zeros_like(P)
        return parts.accumulate(add_fit_gram, P, fits, active)

    fit = ridge.fit(gram, stats, lam, rtol=rtol, max_iter=max_iter, progress=progress)
    n = stats.n.reshape(-1, fits.n_actions)
    sy = stats.sy.reshape(-1, fits.n_actions)
    pooled = sy.sum(axis=1, keepdims=True) / np.maximum(n.sum(axis=1, keepdims=True), 1.0)
    return fit, np.where(n > 0, fit.intercept.reshape(n.shape), pooled).ravel()


def choose_lambda(sample: PartSet, stats: ridge.RidgeStats, folds: int, n_actions: int, grid, *, rtol: float,
                  max_iter: int, progress: bool = False) -> tuple[int, dict, int]:
    """(index of the λ of ``grid`` with the smallest out-of-fold squared error on the sample, the search's
    record — error per λ and action, the sample's rows and R² per action —, passes).

    The grid is scanned from the largest λ down (the best conditioned, fewest CG passes) and the scan stops at
    the first λ whose error exceeds the smallest so far: the out-of-fold error of ridge is taken to be unimodal
    in λ (falling while the penalty's bias dominates, rising once the variance does), so the smaller, costlier
    penalties past the minimum are not fitted (their errors are recorded as None).
    """
    fits = Fits(folds, n_actions, full=False)
    order = sorted(range(len(grid)), key=lambda i: -grid[i])
    sse, passes = [None] * len(grid), 0
    for i in order:
        fit, intercept = solve(sample, stats, grid[i], fits, rtol=rtol, max_iter=max_iter, progress=progress)
        errors, sy, syy = sample.sum(out_of_fold_errors, fit.coef, intercept, folds)
        sse[i] = errors
        passes += fit.iterations + 1
        if errors.sum() > min(e.sum() for e in sse if e is not None):
            break
    n = stats.n.reshape(folds, n_actions).sum(axis=0) / max(folds - 1, 1)  # each row is in K − 1 fold models
    best = min((i for i in range(len(grid)) if sse[i] is not None), key=lambda i: (sse[i].sum(), i))
    with np.errstate(invalid="ignore", divide="ignore"):
        r2 = [None if e is None else np.where(n > 1, 1.0 - e / (syy - sy * sy / np.where(n > 0, n, 1)), np.nan)
              for e in sse]
    return best, {"grid": [float(v) for v in grid], "sample_rows": int(round(n.sum())),
                  "sample_rows_per_action": np.rint(n).astype(int).tolist(),
                  "out_of_fold_sse": [None if e is None else [float(v) for v in e] for e in sse],
                  "out_of_fold_r2": [None if r is None else [_finite(v) for v in r] for r in r2], "chosen": best,
                  "passes": passes}, passes


def _finite(v: float):
    return float(v) if np.isfinite(v) else None


def fit_on_parts(parts: PartSet, n_rows: float, n_features: int, n_actions: int, settings: FitSettings, *,
                 progress: bool = False, stages: Stages | None = None, name: str = "the log"
                 ) -> LinearRewardModel:
    """ρ̂ on parts grouped by (fold, action) over ``settings.folds`` folds (:func:`group`), ``n_rows`` rows in all.

    λ as ``settings.lam`` says (``"auto"``: the out-of-fold error on the keyed sample); then the K·k fold models
    and the k full-data models in the same passes (module docstring). The model's metadata records λ (and its
    search), rows per action, folds, seed, rtol, the CG passes and the actions without rows.
    """
    stages = stages or Stages(progress)
    d, k, folds = n_features, n_actions, settings.folds
    auto = settings.lam == "auto"
    share = min(1.0, settings.search_rows / max(n_rows, 1.0))
    derive = auto and (share < 1 or settings.search_folds != (folds or 1))
    with stages.stage("ρ̂ sums", "per (fold, action) block" + (", and the λ sample" if derive else "")) as p:
        if derive:
            counts, sampled = parts.sum_and_derive(_counts_and_sample, d, share, settings.seed)
        else:
            counts = parts.sum(block_counts, d)
        sums = block_sums(parts, d, counts)
        p.append(3)
    search = None
    lam = settings.lam
    if auto:
        if derive:
            one, sample_d = concatenated([load_part(s) for s in compute(*sampled.parts, client=parts.client)],
                                         settings.search_folds, k, settings.seed)
            sample = PartSet.build(_given, [(one,)], parts.client, spill=parts.spill)  # one part: small passes
            sample_stats = Fits(settings.search_folds, k, False).stats(block_sums(sample, sample_d))
            del sampled, one
        else:
            sample, sample_stats = parts, Fits(folds, k, False).stats(sums)
        with stages.stage("ρ̂ λ", f"up to {len(settings.lam_grid)} values by the out-of-fold error of "
                                 f"{'the sampled' if share < 1 else 'all'} rows") as p:
            best, search, passes = choose_lambda(sample, sample_stats, settings.search_folds, k, settings.lam_grid,
                                                 rtol=settings.rtol, max_iter=settings.max_iter, progress=progress)
            p.append(passes + (3 if derive else 0))
        del sample, sample_stats
        lam = settings.lam_grid[best]
    fits = Fits(folds or 0, k, full=True)
    stats, n_fit = fits.stats(sums), fits.combine(sums[0]).reshape(-1, k)
    del sums  # the (B, d) block sums: not needed beside the fits' statistics
    with stages.stage("ρ̂", f"{fits.count} ridge models on all rows, λ = {lam:g}") as p:
        fit, intercept = solve(parts, stats, lam, fits, rtol=settings.rtol, max_iter=settings.max_iter,
                               progress=progress)
        p.append(fit.iterations)
    del stats
    if not fit.converged.all():
        warnings.warn(f"ridge: {int((~fit.converged).sum())} fit(s) did not reach rtol {settings.rtol:g} in "
                      f"{settings.max_iter} CG iterations", RuntimeWarning, stacklevel=2)
    _warn_unlogged(name, n_fit, intercept.reshape(-1, k), folds or 0)
    coef = fit.coef.reshape(-1, k, d).transpose(0, 2, 1)
    intercept = intercept.reshape(-1, k)
    rows = n_fit[-1].astype(int)
    metadata = {"lam": float(lam), "rows": int(rows.sum()), "rows_per_action": rows.tolist(), "folds": folds or 0,
                "n_features": d, "n_actions": k, "seed": settings.seed, "rtol": settings.rtol,
                "cg_iterations": fit.iterations, "unlogged_actions": np.flatnonzero(rows == 0).tolist()}
    if search is not None:
        metadata["lambda_search"] = search
    model = LinearRewardModel(np.ascontiguousarray(coef[-1]), intercept[-1], metadata=metadata)
    if folds:
        model.fold_coef, model.fold_intercept = np.ascontiguousarray(coef[:-1]), intercept[:-1]
        model.fold_seed = settings.seed
    return model


def _warn_unlogged(name: str, n: np.ndarray, intercept: np.ndarray, folds: int) -> None:
    """One :class:`UnloggedActionWarning` naming the actions never logged, and the fold models without rows."""
    never = np.flatnonzero(n[-1] == 0)
    messages = []
    if never.size:
        messages.append(f"action(s) {', '.join(map(str, never))} never logged: ρ̂ for them is the pooled mean reward "
                        f"{intercept[-1, never[0]]:.6g} (w = 0)")
    for j in range(folds):
        missing = np.flatnonzero((n[j] == 0) & (n[-1] > 0))
        if missing.size:
            messages.append(f"action(s) {', '.join(map(str, missing))} logged only in fold {j}: fold model {j} "
                            f"for them is the pooled mean reward of the other folds (w = 0)")
    if messages:
        warnings.warn(f"{name}: " + "; ".join(messages), UnloggedActionWarning, stacklevel=3)


def _given(part):
    return part


def _counts_and_sample(_, part, d: int, share: float, seed: int):
    """The part's block counts, and its rows in the λ sample (a step of :meth:`PartSet.sum_and_derive`)."""
    return block_counts(part, d), sample_of(part, share, d, seed)


def _group_step(_, part: LogPart, n_actions: int, folds: int | None, seed: int):
    """(nothing to sum, the part grouped by (fold, action)): a step of :meth:`PartSet.sum_and_derive`."""
    return np.zeros(1), group(part, folds, n_actions, seed)


def fit_reward_model(logs: str, settings: FitSettings | None = None, *, client=None,
                     storage_options: dict | None = None, progress: bool = False) -> LinearRewardModel:
    """Per-action ridge models ρ̂_a(x) = b_a + x·w_a on the log at ``logs`` (any fsspec URL), out of core.

    ``settings``: a :class:`FitSettings` (default: λ chosen by the out-of-fold error on a keyed sample, no
    folds); ``client``: a ``distributed.Client`` (else Dask's local threaded scheduler). d and k come from the
    log's schema metadata unless given, else from the data. The model's ``metadata`` records λ (and its search),
    rows per action, folds, the CG passes and the data's fingerprint (:class:`Extent`).

    Each ρ̂_a minimises Σ_{i: a_i = a} (r_i − b_a − x_i·w_a)² + λ ‖w_a‖², the regression of the reward
    on the features over the rows that logged action a, by conjugate gradients, one pass over the parts
    per iteration. It is the reward model of the direct method and of doubly robust estimation
    (Dudík, Langford & Li 2011, Sec. 2.1: ρ̂_a(x) estimates E[r_a | x]).

    Parameters
    ----------
    logs : str
        The log: a Parquet file, a folder of parts or any fsspec URL (a :class:`~dr_scale.logs.filters.LogFilter`'s
        ``.on(url)`` reads only its rows).
    settings : FitSettings or None
        How to fit (default ``FitSettings()``: λ by the out-of-fold error on a keyed sample, no folds).
    client : distributed.Client or None
        Run on this Dask cluster (default: Dask's local threaded scheduler).
    storage_options : dict or None
        fsspec's options for ``logs``.
    progress : bool
        Show each stage's progress on stderr.

    Returns
    -------
    LinearRewardModel
        ρ̂ with ``coef`` (d × k) and ``intercept`` (k); with ``folds``, the fold models too.

    See Also
    --------
    FitSettings : The settings.
    dr_scale.reward.models.LinearRewardModel : The model returned.

    Examples
    --------
    >>> import tempfile
    >>> from dr_scale.synthetic.bandit import generate_bandit
    >>> folder = tempfile.TemporaryDirectory()
    >>> logs = folder.name + "/log"
    >>> _ = generate_bandit(logs, rows=2000, features=100, actions=3)  # a generated 2,000-row log
    >>> model = fit_reward_model(logs, FitSettings(folds=2))
    >>> model.coef.shape, model.metadata["lam"], model.metadata["rows_per_action"]
    ((100, 3), 100.0, [843, 828, 329])
    >>> folder.cleanup()
    """
    settings = settings or FitSettings()
    if not isinstance(settings, FitSettings):
        raise ParameterError(f"`settings` must be a FitSettings, e.g. FitSettings(folds=2), got "
                             f"{type(settings).__name__} {settings!r:.80}")
    check_client(client)
    fs, paths = list_parts(logs, storage_options)
    meta = log_metadata(fs, paths[0])
    n_features = settings.n_features or meta.get("n_features")
    n_actions = settings.n_actions or meta.get("n_actions")
    stages = Stages(progress)
    with spill_folder(settings.spill, client, disk=spill_root()) as folder:
        with stages.stage("read", f"{len(paths)} part(s) of {logs}") as p:
            if n_features and n_actions:  # grouped as they are read
                parts = PartSet.build(read_grouped_part, [(fs, path, n_features, n_actions, settings.folds,
                                                           settings.seed) for path in paths], client, progress, folder)
                extent = parts.sum(Extent.of)
            else:  # d or k from the data first
                raw = PartSet.build(read_log_part, [(fs, path, n_features, n_actions) for path in paths], client,
                                    progress, folder)
                extent = raw.sum(Extent.of)
            if extent.n == 0:
                raise UserError(f"{logs}: the log has no rows; nothing to fit")
            d = int(n_features or extent.max_feature + 1)
            k = int(n_actions or extent.max_action + 1)
            if not (n_features and n_actions):
                _, parts = raw.sum_and_derive(_group_step, k, settings.folds, settings.seed)
                del raw
            p.append(2 if n_features and n_actions else 3)
        model = fit_on_parts(parts, extent.n, d, k, settings, progress=progress, stages=stages, name=str(logs))
    model.metadata.update(fingerprint=f"{extent.n}:{extent.fingerprint:016x}", stage_passes=stages.passes())
    vocabulary = action_vocabulary(logs, storage_options)
    if vocabulary is not None:  # the values its columns predict: another log's must be the same (check_model_actions)
        model.metadata["actions"] = vocabulary
    return model


def summary(model: LinearRewardModel) -> str:
    """A fitted model's figures as text: λ, rows, and per action its rows, intercept, ‖w‖ and out-of-fold R²."""
    m = model.metadata
    search = m.get("lambda_search")
    head = (f"λ = {m['lam']:g}{' (auto)' if search else ''}, {m['rows']:,} rows, {m['n_features']} features, "
            f"{m['n_actions']} actions, {m['folds'] or 'no'} folds, {m['cg_iterations']} CG passes"
            + (f" (+ {search['passes']} on the λ sample)" if search else "") + f", fingerprint {m['fingerprint']}")
    lines = [head, f"{'action':>6} {'rows':>12} {'intercept':>12} {'‖w‖':>10}"
                   + (f" {'sample R²':>12} {'sample MSE':>12}" if search else "")]
    for a in range(model.n_actions):
        line = (f"{a:>6} {m['rows_per_action'][a]:>12,} {model.intercept[a]:>12.6g} "
                f"{np.linalg.norm(model.coef[:, a]):>10.4g}")
        if search:
            rows = search["sample_rows_per_action"][a]
            r2, sse = search["out_of_fold_r2"][search["chosen"]][a], search["out_of_fold_sse"][search["chosen"]][a]
            line += f" {number(r2, 4):>12} {number(sse / rows if rows else None, 4):>12}"
        lines.append(line)
    if search:
        lines.append(f"out-of-fold squared error on {search['sample_rows']:,} sampled rows per λ: " + ", ".join(
            f"{g:g}: {'not fitted' if row is None else f'{sum(row):.6g}'}"
            for g, row in zip(search["grid"], search["out_of_fold_sse"])))
    return "\n".join(lines)


class Stages:
    """The stages of a run: name, passes over the parts and seconds of each (``fit`` and ``learn`` print them)."""

    def __init__(self, progress: bool):
        self.progress, self.done = progress, []

    @contextlib.contextmanager
    def stage(self, name: str, detail: str = ""):
        """``with stages.stage(name, detail) as passes: … passes.append(n)``; the passes are summed."""
        _stage(self.progress, f"{name}: {detail} …" if detail else f"{name} …")
        passes, start = [], time.perf_counter()
        yield passes
        self.done.append((name, int(sum(passes)), time.perf_counter() - start))

    def passes(self) -> dict:
        return {name: n for name, n, _ in self.done}


def _stage(progress: bool, message: str) -> None:
    if progress:
        print(message, file=sys.stderr, flush=True)
