"""A log's parts with their rows grouped by (cross-fitting fold, logged action), and ρ̂ fitted on them.

``learn`` reads every part once and sorts its rows (stably) by the block
b = f_i·k + a_i, with f_i = ⌊K·u(row_id_i)⌋ the row's cross-fitting fold
(:func:`dr_scale.reward.models.fold_of`) and a_i its logged action, so that the rows of
block b are the contiguous run [start_b, start_{b+1}) of the part. On such parts

* ρ̂'s fold model j for action a — the ridge fit of r on x over the rows that logged a
  outside fold j (paper, Sec. 5: ρ̂ by ridge regression; cross-fitted so that Γ of a
  row uses a model that did not see it) — has the Gram product
  Σ_{f≠j} X_{fa}ᵀ X_{fa} P_{ja}: one pair of sparse mat-vecs per block and other fold,
  no lifted copy of the rows. With K = 2 folds every row enters exactly one fit, and a
  pass of the K·k fits costs one mat-vec pair over all rows;
* the policy's scores, fitted on all rows, use the part as it is (the order of the
  rows does not change XᵀX).

**λ of ρ̂** (``lam="auto"``): the ridge penalty of a Gaussian prior w ~ N(0, τ²I) under
noise of variance σ² is λ = σ²/τ², which does not grow with the number of rows; so λ
is chosen on a keyed sample of at most :data:`SEARCH_ROWS` rows (row i is in it when
u(row_id_i) < SEARCH_ROWS / n, u keyed by (seed, "learn sample")) — each λ of
:data:`LAMBDA_GRID` fits the K·k fold models on the sample, scored by the sample's
out-of-fold squared error Σ_i (r_i − ρ̂^{(f_i)}_{a_i}(x_i))² (cross-fitting doubles as
cross-validation) — and the models are then fitted on all rows with it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from dr_scale.core import keyed_random
from dr_scale.reward.fitting import LogPart, read_log_part
from dr_scale.logs.contract import binary_csr
from dr_scale.outofcore import ridge
from dr_scale.outofcore.products import add_transposed_product
from dr_scale.reward.models import LinearRewardModel, fold_of

#: The penalties ρ̂'s ``lam="auto"`` chooses from (binary or standardised features, rewards in [0, 1]).
LAMBDA_GRID = (1.0, 10.0, 100.0, 1000.0)
#: Rows of the keyed sample on which ρ̂'s λ is chosen, and the CG tolerance and passes of each λ's solve there.
SEARCH_ROWS = 200_000
SEARCH_RTOL, SEARCH_PASSES = 1e-2, 10
SAMPLE_PURPOSE = "learn sample"


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

    def subset(self, keep: np.ndarray, n_features: int) -> "GroupedPart":
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


def read_grouped_part(fs, path: str, n_features: int, n_actions: int, folds: int, seed: int) -> GroupedPart:
    """Read one part (:func:`dr_scale.reward.fitting.read_log_part`) and group its rows by (fold, action)."""
    part = read_log_part(fs, path, n_features, n_actions)
    fold = fold_of(part.row_id, folds, seed) if folds > 1 else np.zeros(len(part), np.int64)
    return grouped(part, fold * n_actions + part.action, folds * n_actions)


def concatenated(parts: list[GroupedPart]) -> tuple[GroupedPart, int]:
    """The parts' rows as one grouped part (block by block, each block's rows in the parts' order), its features
    renumbered 0 … m − 1 in the order of their ids (m, the number of distinct features, returned beside it): a ridge
    fit gives the features a part never shows weight 0, so fits on it need only its m columns."""
    offsets = np.cumsum([0] + [int(p.indptr[-1]) for p in parts[:-1]])
    indptr = np.concatenate([[0]] + [p.indptr[1:] + o for p, o in zip(parts, offsets)]).astype(parts[0].indptr.dtype)
    data = None if parts[0].data is None else np.concatenate([p.data for p in parts])
    cat = {f: np.concatenate([getattr(p, f) for p in parts]) for f in ("row_id", "indices", "action", "reward",
                                                                       "propensity")}
    present, indices = np.unique(cat["indices"], return_inverse=True)
    one = LogPart(cat["row_id"], indptr, indices.astype(cat["indices"].dtype), data, cat["action"], cat["reward"],
                  cat["propensity"])
    n_blocks = parts[0].start.size - 1
    blocks = np.concatenate([np.repeat(np.arange(n_blocks), np.diff(p.start)) for p in parts])
    return grouped(one, blocks, n_blocks), max(present.size, 1)


def sample_of(part: GroupedPart, share: float, n_features: int, seed: int) -> GroupedPart:
    """The part's rows in the keyed search sample (u(row_id) < share)."""
    return part.subset(keyed_random.uniform(part.row_id, seed, SAMPLE_PURPOSE) < share, n_features)


# -- passes ---------------------------------------------------------------------------
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
        add_transposed_product(total[b], part.block(b, n_features), part.reward[lo:hi] if weighted else np.ones(hi - lo))
    return total


def block_sums(parts, n_features: int, counts=None) -> tuple:
    """Per block b over the parts: (n_b, Σ r, Σ x (B, d), Σ r x (B, d), Σ (x² − x)) — the counts (:func:`block_counts`;
    given, or one pass), then Σ x and Σ r x in a pass each, so that a pass's terms are one (B, d) array (a task's
    summation tree holds a few of them at once)."""
    n, sy, excess = parts.sum(block_counts, n_features) if counts is None else counts
    return (n, sy, parts.accumulate(add_block_products, n_features, False),
            parts.accumulate(add_block_products, n_features, True), excess)


def add_fold_gram(total, part: GroupedPart, P: np.ndarray, folds: int, n_actions: int) -> np.ndarray:
    """total += the fold models' Gram products: for fit j·k + a, Σ_{f≠j} X_{fa}ᵀ X_{fa} P_{ja}; P is (K·k, d)."""
    if total is None:
        total = np.zeros_like(P)
    d = P.shape[1]
    for f in range(folds):
        for a in range(n_actions):
            X = part.block(f * n_actions + a, d)
            if X.shape[0] == 0:
                continue
            for j in range(folds):
                if j != f:
                    add_transposed_product(total[j * n_actions + a], X, X @ P[j * n_actions + a])
    return total


def out_of_fold_errors(part: GroupedPart, coef: np.ndarray, intercept: np.ndarray, folds: int) -> np.ndarray:
    """Σ (r_i − ρ̂^{(f_i)}_{a_i}(x_i))² over the part's rows, per action; coef (K·k, d), intercept (K·k,)."""
    k = coef.shape[0] // folds
    sse = np.zeros(k)
    for b in range(folds * k):
        X = part.block(b, coef.shape[1])
        lo, hi = part.start[b], part.start[b + 1]
        sse[b % k] += float(np.sum((part.reward[lo:hi] - X @ coef[b] - intercept[b]) ** 2))
    return sse


# -- ρ̂ -----------------------------------------------------------------------------------
def fold_stats(sums, folds: int, n_actions: int) -> ridge.RidgeStats:
    """Statistics of the K·k fold models from the block sums: fit j·k + a sums the blocks (f, a), f ≠ j."""
    n, sy, sx, xy, excess = sums

    def fits(v):
        per_block = v.reshape(folds, n_actions, *v.shape[1:])
        return (per_block.sum(axis=0)[None] - per_block).reshape(v.shape)

    sx_fits = fits(sx)
    return ridge.RidgeStats(fits(n), sx_fits, sx_fits + fits(excess) if excess.size else sx_fits, fits(sy), fits(xy))


def fit_fold_models(parts, stats: ridge.RidgeStats, lam: float, folds: int, n_actions: int, *, rtol: float,
                    max_iter: int, progress: bool = False) -> tuple[ridge.RidgeFit, np.ndarray]:
    """The K·k fold models (fit j·k + a, statistics :func:`fold_stats`) at penalty λ by block CG, one pass over the
    parts per iteration; and their intercepts, where a fit had no rows the pooled mean reward of its folds (w = 0)."""
    fit = ridge.fit(lambda P: parts.accumulate(add_fold_gram, P, folds, n_actions), stats, lam, rtol=rtol,
                    max_iter=max_iter, progress=progress)
    n, sy = stats.n.reshape(folds, n_actions), stats.sy.reshape(folds, n_actions)
    pooled = sy.sum(axis=1, keepdims=True) / np.maximum(n.sum(axis=1, keepdims=True), 1.0)
    intercept = np.where(n > 0, fit.intercept.reshape(folds, n_actions), pooled).ravel()
    return fit, intercept


def cross_fitted_model(fit: ridge.RidgeFit, intercept: np.ndarray, folds: int, n_actions: int, seed: int,
                       metadata: dict) -> LinearRewardModel:
    """The fold models as a cross-fitted :class:`LinearRewardModel`; its full-data weights are the folds' mean."""
    d = fit.coef.shape[1]
    fold_coef = np.ascontiguousarray(fit.coef.reshape(folds, n_actions, d).transpose(0, 2, 1))
    fold_intercept = intercept.reshape(folds, n_actions)
    return LinearRewardModel(fold_coef.mean(axis=0), fold_intercept.mean(axis=0), fold_coef, fold_intercept, seed,
                             metadata)


def choose_lambda(sample, stats: ridge.RidgeStats, folds: int, n_actions: int, *, rtol: float, max_iter: int,
                  grid=LAMBDA_GRID, progress: bool = False) -> tuple[int, list, int]:
    """(index of the best λ of ``grid``, the out-of-fold squared error per λ, passes) on the sample's parts."""
    errors, passes = [], 0
    for lam in grid:
        fit, intercept = fit_fold_models(sample, stats, lam, folds, n_actions, rtol=rtol, max_iter=max_iter,
                                         progress=progress)
        errors.append(float(sample.sum(out_of_fold_errors, fit.coef, intercept, folds).sum()))
        passes += fit.iterations + 1
    return int(np.argmin(errors)), errors, passes
