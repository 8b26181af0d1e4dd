"""Per-action ridge reward models fitted out of core: ``dr-scale fit`` and :func:`fit_reward_model`.

For each action a, on the rows that logged a (the paper's ρ̂, Sec. 5: ridge regression),

    (w_a, b_a) = argmin_{w, b}  Σ_{i: a_i = a} (r_i − b − x_i·w)² + λ ‖w‖²        (b not penalised),

solved by :func:`dr_scale.outofcore.ridge.fit` (Jacobi-preconditioned block conjugate
gradients) for all k actions — and with ``folds=K`` the K fold models too — at once:
every CG iteration is one pass over the log's parts, read once and then kept in memory
(a cluster's workers, or this process) or spilled to local files
(:mod:`dr_scale.outofcore.passes`).

**Lifting.** A part keeps its CSR rows with row i's column indices shifted by a_i·d,
so that row i holds x_i in column block a_i of k·d columns (the lifted matrix L). For
directions P (k, d), q = L vec(P) gives q_i = x_i·P_{a_i} for every row and Lᵀq adds
x_i q_i into block a_i: one pair of sparse mat-vecs gives X_aᵀX_a P_a for every action,
without copying a row. A group of fits over a subset of the rows (the rows outside
fold j; the rows not held out) zeroes q outside the subset.

**Cross-fitting** (``folds=K``): row i's fold is ⌊K·u(row_id_i)⌋, u keyed by
(seed, "cross-fit fold") (:func:`dr_scale.reward.models.fold_of`); fold model j is
fitted on the rows of the other folds and predicts the rows of fold j only. The
full-data model is fitted in the same passes.

**λ = "auto"**: the rows with u(row_id_i) < ``HOLDOUT``, u keyed by (seed, "lambda
holdout"), are held out; one fit per (λ of the grid, action) on the other rows, all in
the same passes (one λ per fit); the λ with the smallest held-out squared error summed
over the actions is chosen, and the models are fitted on all rows with it. The
held-out R² and MSE per action are kept in the model's metadata.

**An action never logged** (no rows among a fit's rows) has no data: its model is
w_a = 0 and b_a = the mean reward of the fit's rows over all actions (the pooled mean),
with an :class:`UnloggedActionWarning`. DR then corrects that constant guess with the
importance-weighted residuals wherever the target policy takes the action.
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from dr_scale.core import keyed_random
from dr_scale.io.cache import spill_root
from dr_scale.core.errors import UserError
from dr_scale.logs.contract import binary_csr, compact_index, list_parts, log_metadata, read_partition
from dr_scale.outofcore import ridge
from dr_scale.outofcore.passes import Held, PartSet, spill_folder
from dr_scale.outofcore.products import add_transposed_product
from dr_scale.reward.models import LinearRewardModel, fold_of

DEFAULT_LAMBDA = 1.0
#: The penalties ``lam="auto"`` chooses from.
LAMBDA_GRID = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
#: The share of rows ``lam="auto"`` holds out (keyed by row id).
HOLDOUT = 0.2
HOLDOUT_PURPOSE = "lambda holdout"
#: Fit groups: every row; the rows not held out; an integer j: the rows whose fold is not j.
ALL, TRAIN = "all", "train"


class UnloggedActionWarning(UserWarning):
    """An action has no rows to fit on; its model falls back to the pooled mean reward."""


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

    def rows(self, keep: np.ndarray, n_features: int) -> "LogPart":
        """The part restricted to the rows where ``keep`` is true."""
        X = self.matrix(n_features)[keep]
        return LogPart(self.row_id[keep], X.indptr, X.indices, None if self.data is None else X.data,
                       self.action[keep], self.reward[keep], self.propensity[keep])


def read_log_part(fs, path: str, n_features: int | None, n_actions: int | None) -> LogPart:
    """Read one part through the logged-data contract (:func:`dr_scale.logs.contract.read_partition`)."""
    part = read_partition(fs, path, n_features=n_features, n_actions=n_actions)
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

    def __add__(self, other: "Extent") -> "Extent":
        return Extent(self.n + other.n, max(self.max_action, other.max_action),
                      max(self.max_feature, other.max_feature), (self.fingerprint + other.fingerprint) % 2 ** 64)

    @classmethod
    def of(cls, part: LogPart) -> "Extent":
        h = keyed_random.row_hash(part.row_id, part.action, part.reward, np.diff(part.indptr))
        return cls(len(part.row_id), int(part.action.max(initial=-1)), int(part.indices.max(initial=-1)),
                   int(h.sum(dtype=np.uint64)))


@dataclass
class LiftedPart(Held):
    """A part's rows lifted to k·d columns (row i in column block a_i), with each row's fold and hold-out flag."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray | None
    n_cols: int
    action: np.ndarray
    reward: np.ndarray
    fold: np.ndarray
    held_out: np.ndarray

    @property
    def matrix(self) -> sp.csr_matrix:
        if self.data is None:
            return binary_csr(self.indptr, self.indices, self.n_cols)
        return sp.csr_matrix((self.data, self.indices, self.indptr), shape=(self.indptr.shape[0] - 1, self.n_cols),
                             copy=False)

    def mask(self, group) -> np.ndarray | None:
        """The rows of a fit group (None: all rows)."""
        if group == ALL:
            return None
        return ~self.held_out if group == TRAIN else self.fold != group


@dataclass
class GroupSums:
    """Per group g and action a: n, Σr, Σx, Σ(x² − x) (None while every feature is binary: x² = x), Σ r x.

    The d-vectors are stored per group as one k·d row (action a's block at a·d). Merge with ``+``.
    """

    n: np.ndarray  # (G, k)
    sy: np.ndarray  # (G, k)
    sx: np.ndarray  # (G, k·d)
    sxx_excess: np.ndarray | None  # (G, k·d)
    xy: np.ndarray  # (G, k·d)

    @classmethod
    def empty(cls, groups: int, k: int, d: int) -> "GroupSums":
        return cls(np.zeros((groups, k)), np.zeros((groups, k)), np.zeros((groups, k * d)), None,
                   np.zeros((groups, k * d)))

    def __add__(self, other: "GroupSums") -> "GroupSums":
        if self.sxx_excess is None or other.sxx_excess is None:
            excess = other.sxx_excess if self.sxx_excess is None else self.sxx_excess
        else:
            excess = self.sxx_excess + other.sxx_excess
        return GroupSums(self.n + other.n, self.sy + other.sy, self.sx + other.sx, excess, self.xy + other.xy)

    def ridge_stats(self, slot_groups: list[int], k: int) -> ridge.RidgeStats:
        """The statistics of the fits (slot s, action a), fit index s·k + a, slot s fitted on group ``slot_groups[s]``."""
        def rows(a):
            return a[slot_groups].reshape(len(slot_groups) * k, -1)

        sx = rows(self.sx)
        sxx = sx if self.sxx_excess is None else sx + rows(self.sxx_excess)
        return ridge.RidgeStats(self.n[slot_groups].ravel(), sx, sxx, self.sy[slot_groups].ravel(), rows(self.xy))


def lift_and_sum(total: GroupSums | None, part: LogPart, d: int, k: int, groups: list, folds: int,
                 seed: int) -> tuple[GroupSums, LiftedPart]:
    """The part lifted (see the module docstring), and its sums per group added into ``total``."""
    counts = np.diff(part.indptr)
    shifted = part.indices.astype(np.int64) + np.repeat(part.action * d, counts)
    indptr, indices = compact_index(part.indptr, shifted, k * d)
    fold = fold_of(part.row_id, folds, seed).astype(np.int8) if folds else np.zeros(len(part.row_id), np.int8)
    held_out = keyed_random.uniform(part.row_id, seed, HOLDOUT_PURPOSE) < HOLDOUT
    lifted = LiftedPart(indptr, indices, part.data, k * d, part.action, part.reward, fold, held_out)
    if total is None:
        total = GroupSums.empty(len(groups), k, d)
    L = lifted.matrix
    squares = None if part.data is None else sp.csr_matrix((part.data * part.data - part.data, indices, indptr),
                                                           shape=L.shape)
    if squares is not None and total.sxx_excess is None:
        total.sxx_excess = np.zeros_like(total.sx)
    for g, group in enumerate(groups):
        m = lifted.mask(group)
        weight = np.ones(len(part.row_id)) if m is None else m.astype(np.float64)
        total.n[g] += np.bincount(part.action, weights=weight, minlength=k)
        total.sy[g] += np.bincount(part.action, weights=weight * part.reward, minlength=k)
        add_transposed_product(total.sx[g], L, weight)
        add_transposed_product(total.xy[g], L, weight * part.reward)
        if squares is not None:
            add_transposed_product(total.sxx_excess[g], squares, weight)
    return total, lifted


def add_gram(total: np.ndarray | None, part: LiftedPart, P: np.ndarray, slots: list[tuple[int, object]]) -> np.ndarray:
    """total += the Gram products of the active slots: for slot s (fitted on ``group``), Lᵀ(m ⊙ L P_s) with
    m the group's rows; P is (S, k·d), total (S·k·d,), added in place."""
    L = part.matrix
    if total is None:
        total = np.zeros(P.size)
    width = P.shape[1]
    for s, group in slots:
        q = L @ P[s]
        m = part.mask(group)
        if m is not None:
            q *= m
        add_transposed_product(total[s * width:(s + 1) * width], L, q)
    return total


def _holdout_sums(part: LiftedPart, coef: np.ndarray, intercept: np.ndarray) -> np.ndarray:
    """(S + 3, k): per slot the held-out squared errors per action, then the held-out n, Σr, Σr² per action."""
    rows = np.flatnonzero(part.held_out)
    k = intercept.shape[1]
    L, a, y = part.matrix[rows], part.action[rows], part.reward[rows]
    sse = [np.bincount(a, weights=(y - L @ c - b[a]) ** 2, minlength=k) for c, b in zip(coef, intercept)]
    return np.vstack([*sse, np.bincount(a, minlength=k), np.bincount(a, weights=y, minlength=k),
                      np.bincount(a, weights=y * y, minlength=k)])


# -- fitting ----------------------------------------------------------------------------
def _solve(parts: PartSet, sums: GroupSums, slot_groups: list[int], groups: list, lam, k: int, d: int,
           rtol: float, max_iter: int, progress: bool) -> ridge.RidgeFit:
    """All fits (slot s, action a) by block CG, one pass over the lifted parts per iteration."""
    def gram(P):
        slots_P = P.reshape(len(slot_groups), k * d)
        active = [(s, groups[g]) for s, g in enumerate(slot_groups) if slots_P[s].any()]
        if not active:
            return np.zeros_like(P)
        return parts.accumulate(add_gram, slots_P, active).reshape(P.shape)

    return ridge.fit(gram, sums.ridge_stats(slot_groups, k), lam, rtol=rtol, max_iter=max_iter, progress=progress)


def _pooled_fallback(fitted: ridge.RidgeFit, sums: GroupSums, slot_groups: list[int], k: int) -> np.ndarray:
    """The intercepts, with fits that had no rows set to the pooled mean reward of their group's rows."""
    intercept = fitted.intercept.reshape(len(slot_groups), k).copy()
    for s, g in enumerate(slot_groups):
        empty = sums.n[g] == 0
        if empty.any() and sums.n[g].sum() > 0:
            intercept[s, empty] = sums.sy[g].sum() / sums.n[g].sum()
    return intercept


def _choose_lambda(parts: PartSet, sums: GroupSums, groups: list, grid, k, d, rtol, max_iter, progress):
    """λ from the grid by held-out squared error; the held-out table per λ and action."""
    fitted = _solve(parts, sums, [groups.index(TRAIN)] * len(grid), groups, np.repeat(grid, k), k, d, rtol,
                    max_iter, progress)
    intercept = _pooled_fallback(fitted, sums, [groups.index(TRAIN)] * len(grid), k)
    held = parts.sum(_holdout_sums, fitted.coef.reshape(len(grid), k * d), intercept)
    sse, n, sy, syy = held[:len(grid)], held[-3], held[-2], held[-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        mse = np.where(n > 0, sse / n, np.nan)
        r2 = np.where(n > 1, 1.0 - sse / (syy - sy * sy / np.where(n > 0, n, 1)), np.nan)
    best = int(np.argmin(sse.sum(axis=1)))
    return float(grid[best]), {
        "grid": [float(v) for v in grid], "holdout_share": HOLDOUT, "holdout_rows_per_action": n.astype(int).tolist(),
        "holdout_mse": [[_finite(v) for v in row] for row in mse], "holdout_r2": [[_finite(v) for v in row] for row in r2],
        "chosen": best, "cg_iterations": fitted.iterations,
    }


def _finite(v: float):
    return float(v) if np.isfinite(v) else None


def _stage(progress: bool, message: str) -> None:
    if progress:
        print(message, file=sys.stderr, flush=True)


def fit_reward_model(logs: str, *, lam: float | str = DEFAULT_LAMBDA, folds: int | None = None, client=None,
                     storage_options: dict | None = None, progress: bool = False, n_features: int | None = None,
                     n_actions: int | None = None, seed: int = 0, rtol: float = 1e-10, max_iter: int = 1000,
                     lam_grid=LAMBDA_GRID, spill: str = "disk") -> LinearRewardModel:
    """Per-action ridge models ρ̂_a(x) = b_a + x·w_a on the log at ``logs`` (any fsspec URL), out of core.

    ``lam``: λ > 0, or ``"auto"`` (chosen from ``lam_grid`` on keyed held-out rows);
    ``folds``: K ≥ 2 for a cross-fitted model (K fold models beside the full-data one);
    ``client``: a ``distributed.Client`` (else Dask's local threaded scheduler);
    ``spill``: where local runs keep the parts between passes — ``"disk"`` (files under
    the cache folder, :func:`dr_scale.io.cache.spill_root`), ``"memory"``, or a folder;
    ``rtol``: CG stops when ‖residual‖ ≤ rtol ‖rhs‖ for every fit.
    d and k come from the log's schema metadata unless given, else from the data.
    The model's ``metadata`` records λ, rows per action, folds, the data's fingerprint
    and, for ``lam="auto"``, the held-out MSE and R² per λ and action.
    """
    auto = isinstance(lam, str)
    if auto and lam != "auto":
        raise UserError(f"λ must be a positive number or 'auto', got {lam!r}")
    if not auto and not float(lam) > 0:
        raise UserError(f"λ must be positive, got {lam}")
    folds = int(folds or 0)
    if folds == 1 or folds < 0:
        raise UserError(f"--folds: the number of folds must be at least 2 (or none), got {folds}")
    fs, paths = list_parts(logs, storage_options)
    meta = log_metadata(fs, paths[0])
    n_features = n_features or meta.get("n_features")
    n_actions = n_actions or meta.get("n_actions")
    groups = [ALL, *range(folds)] + ([TRAIN] if auto else [])
    with spill_folder(spill, client, disk=spill_root()) as folder:
        _stage(progress, f"reading {len(paths)} part(s) of {logs} …")
        raw = PartSet.build(read_log_part, [(fs, p, n_features, n_actions) for p in paths], client, progress, folder)
        extent = raw.sum(Extent.of)
        if extent.n == 0:
            raise UserError(f"{logs}: the log has no rows; nothing to fit")
        d = int(n_features or extent.max_feature + 1)
        k = int(n_actions or extent.max_action + 1)
        sums, parts = raw.sum_and_derive(lift_and_sum, d, k, groups, folds, seed)
        del raw
        search = None
        if auto:
            _stage(progress, f"choosing λ from {len(lam_grid)} values on {HOLDOUT:.0%} held-out rows …")
            lam, search = _choose_lambda(parts, sums, groups, np.asarray(lam_grid, dtype=np.float64), k, d, rtol,
                                         max_iter, progress)
        lam = float(lam)
        _stage(progress, f"fitting {k * (1 + folds)} ridge models (λ = {lam:g}) …")
        slot_groups = list(range(1 + folds))
        fitted = _solve(parts, sums, slot_groups, groups, lam, k, d, rtol, max_iter, progress)
    if not fitted.converged.all():
        warnings.warn(f"ridge: {int((~fitted.converged).sum())} fit(s) did not reach rtol {rtol:g} in {max_iter} "
                      f"CG iterations", RuntimeWarning, stacklevel=2)
    coef = fitted.coef.reshape(1 + folds, k, d).transpose(0, 2, 1)
    intercept = _pooled_fallback(fitted, sums, slot_groups, k)
    rows = sums.n[0].astype(int)
    unlogged = np.flatnonzero(rows == 0)
    if unlogged.size:
        warnings.warn(f"{logs}: action(s) {', '.join(map(str, unlogged))} never logged: ρ̂ for them is the pooled "
                      f"mean reward {intercept[0, unlogged[0]]:.6g} (w = 0)", UnloggedActionWarning, stacklevel=2)
    metadata = {"lam": lam, "rows": extent.n, "rows_per_action": rows.tolist(), "folds": folds,
                "fingerprint": f"{extent.n}:{extent.fingerprint:016x}", "n_features": d, "n_actions": k,
                "seed": seed, "rtol": rtol, "cg_iterations": fitted.iterations,
                "unlogged_actions": unlogged.tolist()}
    if search is not None:
        metadata["lambda_search"] = search
    model = LinearRewardModel(np.ascontiguousarray(coef[0]), intercept[0], metadata=metadata)
    if folds:
        model.fold_coef, model.fold_intercept, model.fold_seed = np.ascontiguousarray(coef[1:]), intercept[1:], seed
    return model


def summary(model: LinearRewardModel) -> str:
    """A fitted model's figures as text: λ, rows, and per action its rows, intercept, ‖w‖ and held-out R²/MSE."""
    m = model.metadata
    search = m.get("lambda_search")
    head = (f"λ = {m['lam']:g}{' (auto)' if search else ''}, {m['rows']:,} rows, {m['n_features']} features, "
            f"{m['n_actions']} actions, {m['folds'] or 'no'} folds, {m['cg_iterations']} CG passes, "
            f"fingerprint {m['fingerprint']}")
    lines = [head, f"{'action':>6} {'rows':>12} {'intercept':>12} {'‖w‖':>10}"
                   + (f" {'held-out R²':>12} {'held-out MSE':>12}" if search else "")]
    for a in range(model.n_actions):
        line = (f"{a:>6} {m['rows_per_action'][a]:>12,} {model.intercept[a]:>12.6g} "
                f"{np.linalg.norm(model.coef[:, a]):>10.4g}")
        if search:
            r2, mse = search["holdout_r2"][search["chosen"]][a], search["holdout_mse"][search["chosen"]][a]
            line += f" {_fmt(r2):>12} {_fmt(mse):>12}"
        lines.append(line)
    if search:
        totals = [sum(v * n for v, n in zip(row, search["holdout_rows_per_action"]) if v is not None)
                  for row in search["holdout_mse"]]
        lines.append("held-out squared error per λ: " + ", ".join(
            f"{g:g}: {t:.6g}" for g, t in zip(search["grid"], totals)))
    return "\n".join(lines)


def _fmt(v) -> str:
    return "—" if v is None else f"{v:.4g}"
