"""A log's parts as the out-of-core fitters hold them between passes: read through the contract
(:class:`LogPart`), grouped by (cross-fitting fold, action) (:class:`GroupedPart`), the keyed folds
(:func:`fold_of`) and the keyed λ sample (:func:`sample_of`), and which fits use which block (:class:`Fits`).

Every fitter driven by :mod:`dr_scale.crossfit.engine` (the reward models, the estimated logging policy) reads
through them, so that all cross-fit with the same folds: row i is in fold

    fold(i) = ⌊K · u(row_id_i)⌋,    u = keyed_random.uniform(row_id, seed, "cross-fit fold").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from dr_scale.core import keyed_random
from dr_scale.core.errors import UserError
from dr_scale.logs.contract import LogDataError
from dr_scale.logs.reading import read_partition
from dr_scale.logs.sparse import binary_csr
from dr_scale.outofcore import ridge
from dr_scale.outofcore.passes import Held, PartSet

FOLD_PURPOSE = "cross-fit fold"
SAMPLE_PURPOSE = "lambda sample"
#: ρ̂ is fitted on rewards with |r| ≤ MAX_ABS_REWARD: its sums of squares (CG's ‖Xᵀr‖², the λ search's
#: Σ (r − ρ̂)²) then stay finite in float64 for any realistic log (n |r|² ≤ 10²¹⁰ for n ≤ 10¹⁰ rows);
#: beyond it they overflow and the fit would be silently wrong. A larger reward is the log's error.
MAX_ABS_REWARD = 1e100
#: Rows a pass's per-row temporaries cover at a time (:meth:`GroupedPart.chunks`): a logistic pass holds the
#: chunk's renumbered indices and its (rows × k) scores, ~30 MB here, whatever the part's size.
CHUNK_ROWS = 1 << 16


def fold_of(row_id: np.ndarray, folds: int, seed: int = 0) -> np.ndarray:
    """Each row's cross-fitting fold in [0, folds): ⌊folds · u(row_id)⌋, keyed by (seed, "cross-fit fold")."""
    return np.minimum((keyed_random.uniform(row_id, seed, FOLD_PURPOSE) * folds).astype(np.int64), folds - 1)


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
    """Read one part through the logged-data contract (:func:`dr_scale.logs.reading.read_partition`)."""
    part = read_partition(fs, path, n_features=n_features, n_actions=n_actions)
    too_big = np.flatnonzero(np.abs(part.reward) > MAX_ABS_REWARD)
    if too_big.size:
        raise LogDataError(path, "reward", f"|reward| above {MAX_ABS_REWARD:g}, the largest that fit and learn take "
                           "(their sums of squares would overflow float64); rescale the rewards",
                           int(part.row_id[too_big[0]]))
    X = part.X
    assert X is not None  # read with its features
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
        """The extent of one part."""
        h = keyed_random.row_hash(part.row_id, part.action, part.reward, np.diff(part.indptr))
        return cls(len(part.row_id), int(part.action.max(initial=-1)), int(part.indices.max(initial=-1)),
                   int(h.sum(dtype=np.uint64)))


@dataclass
class GroupedPart(LogPart):
    """A :class:`LogPart` whose rows are sorted by block b = fold·k + action: block b is rows [start[b], start[b+1])."""

    start: np.ndarray

    def block(self, b: int, n_features: int) -> sp.csr_matrix:
        """The rows of block b as a CSR matrix over views of the part's arrays (no copy of the indices)."""
        return self.blocks(b, b + 1, n_features)

    def blocks(self, b0: int, b1: int, n_features: int, columns: np.ndarray | None = None) -> sp.csr_matrix:
        """The rows of blocks b0 … b1 − 1 (rows [start[b0], start[b1])) as a CSR matrix over views; ``columns``:
        each feature's column (−1: none of the rows has it), ``n_features`` of them — the features renumbered
        (:func:`present_columns`), at the cost of one gather of the rows' indices."""
        return self.rows_csr(int(self.start[b0]), int(self.start[b1]), n_features, columns)

    def chunks(self, b0: int, b1: int, n_features: int, columns: np.ndarray | None = None):
        """The rows of blocks b0 … b1 − 1 as (lo, hi, X) for consecutive runs of at most :data:`CHUNK_ROWS` rows,
        X = rows [lo, hi) as :meth:`blocks` gives them: a pass's per-row temporaries then stay bounded."""
        start, stop, rows = int(self.start[b0]), int(self.start[b1]), CHUNK_ROWS
        for lo in range(start, stop, rows):
            hi = min(lo + rows, stop)
            yield lo, hi, self.rows_csr(lo, hi, n_features, columns)

    def rows_csr(self, lo: int, hi: int, n_features: int, columns: np.ndarray | None = None) -> sp.csr_matrix:
        """Rows [lo, hi) as a CSR matrix over views of the part's arrays (``columns``: as :meth:`blocks`)."""
        indptr = self.indptr[lo:hi + 1] - self.indptr[lo]
        first, last = int(self.indptr[lo]), int(self.indptr[hi])
        indices = self.indices[first:last]
        if columns is not None:  # take with native-width indices: 1.8× the speed of columns[indices] on int32
            indices = columns.take(indices.astype(np.intp))
        if self.data is None:
            return binary_csr(indptr, indices, n_features)
        return sp.csr_matrix((self.data[first:last], indices, indptr), shape=(hi - lo, n_features),
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


def read_grouped_part(fs, path: str, n_features: int, n_actions: int, folds: int | None, seed: int,
                      read_part=None) -> GroupedPart:
    """Read one part (by ``read_part``, default :func:`read_log_part`) and group its rows by (fold, action)."""
    return group((read_part or read_log_part)(fs, path, n_features, n_actions), folds, n_actions, seed)


def _group_step(_, part: LogPart, n_actions: int, folds: int | None, seed: int):
    """(nothing to sum, the part grouped by (fold, action)): a step of :meth:`PartSet.sum_and_derive`."""
    return np.zeros(1), group(part, folds, n_actions, seed)


def read_grouped_parts(fs, paths: list[str], n_features: int | None, n_actions: int | None, folds: int | None,
                       seed: int, *, client=None, progress: bool = False, folder=None, logs: str = "",
                       read_part=None) -> tuple[PartSet, Extent, int, int, int]:
    """The log's parts read (by ``read_part``, default :func:`read_log_part`) and grouped by (fold, action), held
    as a :class:`~dr_scale.outofcore.passes.PartSet` (in memory, on the workers, or spilled to ``folder``): the
    fitters' one way in. Returns (parts, their :class:`Extent`, d, k, passes): with d and k given each part is
    grouped as it is read (2 passes counted: the read and the extent); else d or k come from the data first and
    the parts are grouped after (3). A log of no rows is a :class:`~dr_scale.core.errors.UserError` naming ``logs``.
    """
    read_part = read_part or read_log_part
    if n_features and n_actions:
        parts = PartSet.build(read_grouped_part, [(fs, path, n_features, n_actions, folds, seed, read_part)
                                                  for path in paths], client, progress, folder)
        extent = parts.sum(Extent.of)
    else:  # d or k from the data first
        raw = PartSet.build(read_part, [(fs, path, n_features, n_actions) for path in paths], client, progress,
                            folder)
        extent = raw.sum(Extent.of)
    if extent.n == 0:
        raise UserError(f"{logs}: the log has no rows; nothing to fit")
    d = int(n_features or extent.max_feature + 1)
    k = int(n_actions or extent.max_action + 1)
    if not (n_features and n_actions):
        _, parts = raw.sum_and_derive(_group_step, k, folds, seed)
        del raw
    return parts, extent, d, k, 2 if n_features and n_actions else 3


@dataclass(frozen=True)
class FeatureIds:
    """The sorted distinct feature ids some row of a set of parts has; ``+`` is their union (a mergeable statistic
    whose size is the features used, whatever d is)."""

    ids: np.ndarray

    @classmethod
    def of(cls, part: LogPart) -> FeatureIds:
        """The part's distinct feature ids."""
        return cls(np.unique(part.indices).astype(np.int64))

    def __add__(self, other: FeatureIds) -> FeatureIds:
        return FeatureIds(np.union1d(self.ids, other.ids))


def renumbered(_, part: GroupedPart, ids: np.ndarray) -> tuple[np.ndarray, GroupedPart]:
    """(nothing to sum, the part with each feature id replaced by its index in the sorted ``ids``, its column among
    the used features): a step of :meth:`PartSet.sum_and_derive`. A part held in this process's memory is renumbered
    in place (no second copy of its indices); a memory-mapped one is copied."""
    columns = np.searchsorted(ids, part.indices).astype(part.indices.dtype, copy=False)
    if part.indices.flags.writeable:
        part.indices[...] = columns
        return np.zeros(1), part
    return np.zeros(1), dataclasses.replace(part, indices=columns)


def used_features(parts: PartSet, n_features: int) -> tuple[PartSet, np.ndarray]:
    """(the parts with their features renumbered 0 … m − 1 in the order of their ids, the sorted ids (m,)): the
    features some row has, in one pass, then the renumbering in another — fits on them hold m, not d, columns
    (a feature no row has gets weight 0 under an L2 penalty, and adds nothing to any sum). Nothing here is of size
    d = ``n_features``: a declared d of 2^31 costs what the features used cost. Where no row has a feature, the ids
    are [0]: one column, of weight 0."""
    ids: np.ndarray = parts.sum(FeatureIds.of).ids
    if ids.size == 0:
        ids = np.zeros(1, np.int64)
    _, parts = parts.sum_and_derive(renumbered, ids)
    return parts, ids


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



@dataclass(frozen=True)
class Fits:
    """The fits of one solve on parts grouped over ``groups`` folds: the fold models (fit j·k + a, j < ``folds``;
    ``folds`` = 0: none) and, if ``full``, the full-data models (fit K·k + a)."""

    folds: int
    n_actions: int
    full: bool

    @property
    def groups(self) -> int:
        """The row groups of the sums: the K folds, or one group without folds."""
        return max(self.folds, 1)

    @property
    def count(self) -> int:
        """The fits: (K + 1{full}) × the models per fold (k per-action models, or one)."""
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



def present_columns(present: np.ndarray) -> tuple[np.ndarray, int]:
    """(each feature's column among the present ones, −1 for the others; their number m): a fit's features
    renumbered 0 … m − 1, so that its weights (F × m, not F × d) hold only features some row has — the others'
    weights are 0 under an L2 penalty."""
    columns = np.full(present.size, -1, dtype=np.int32)
    columns[present] = np.arange(int(present.sum()), dtype=np.int32)
    return columns, max(int(present.sum()), 1)
