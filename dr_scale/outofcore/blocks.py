"""Many independent ridge fits solved where their rows are: blocks of fits, one task each.

F fits' conjugate-gradient iterations (:func:`dr_scale.outofcore.ridge.fit`) each need
G(P) = X_SᵀX_S P for every fit. Computed as a pass over the parts, every iteration would
send P (F × d) to every part and bring F × d partial sums back — 24 MB each way per task
and iteration in the visits experiment. The fits are independent, so here they are split
into contiguous blocks [k₀, k₁) of about equal rows, as many as the cluster has worker
threads (:func:`dr_scale.outofcore.passes.task_count`): each part gives every block the
piece of its rows that belongs to the block's fits (``cut``, once; one task per block and run
of parts kept on one worker, :func:`~dr_scale.outofcore.passes.tree_nodes`), and one task per block
runs the whole CG over its fits on its pieces, adding each piece's product into one running
sum in the parts' order (``add_gram``). The fits' statistics are cut into the blocks' rows where
they were summed. What crosses the network is each row once, each block's statistics, and the
solutions.

Every fit's G(P) adds up its own rows in the parts' order, whatever block it is in, and the
CG updates act fit by fit, so the fitted coefficients do not depend on the number of blocks:
they have the same bits on a laptop and on any cluster.
"""

from __future__ import annotations

import dataclasses

import dask
import numpy as np

from dr_scale.outofcore import ridge
from dr_scale.outofcore.compute import compute
from dr_scale.outofcore.passes import PartSet, load_part, placed, spill, task_count, tree_nodes, worker_slots


def fit_blocks(weights: np.ndarray, n_blocks: int) -> list[tuple[int, int]]:
    """Contiguous ranges [k₀, k₁) of the fits, at most ``n_blocks``, none empty, of about equal total weight."""
    n, blocks = weights.shape[0], min(n_blocks, weights.shape[0])
    cumulative = np.cumsum(weights)
    cuts = np.searchsorted(cumulative, np.linspace(0, cumulative[-1], blocks + 1)[1:-1], side="right")
    bounds = [0]
    for i, cut in enumerate(cuts.tolist()):  # at least one fit per block
        bounds.append(min(max(cut, bounds[-1] + 1), n - (blocks - 1 - i)))
    return list(zip(bounds, bounds[1:] + [n]))


def solve_in_blocks(parts: PartSet, cut, add_gram, stats, lam, weights: np.ndarray, *, n_features: int,
                    rtol: float, max_iter: int, progress: bool = False) -> ridge.RidgeFit:
    """The F ridge fits of ``stats`` on the rows held by ``parts``, block by block (see the module docstring).

    ``stats`` is a Dask object (e.g. ``dask.delayed``) whose value is the fits'
    :class:`~dr_scale.outofcore.ridge.RidgeStats`: on a cluster it stays on the worker that holds it, which
    cuts each block's rows out of it. ``n_features`` (d) weighs a fit's dense CG updates against its rows.
    ``cut(part, k0, k1)`` is a part's piece for fits [k0, k1) (fit indices from 0 within the block);
    ``add_gram(total, piece, P, first, stop)`` adds the piece's X_SᵀX_S P for fits [first, stop) of the
    block into ``total`` (None: a new array) and returns it; ``weights`` (F,) are the fits' row counts, by
    which the blocks are balanced.
    """
    slots = worker_slots(parts.client)
    # a fit's CG step costs ~4 flops per active feature of its rows, ~10·d in dense updates
    blocks = fit_blocks(np.asarray(weights, dtype=np.float64) + n_features / 16, task_count(parts.client))
    nodes = tree_nodes(len(parts.parts), task_count(parts.client))  # runs of parts that share a worker
    lam = np.asarray(lam, dtype=np.float64)
    tasks = []
    for j, (k0, k1) in enumerate(blocks):
        pieces = [dask.delayed(_pieces)(cut, parts.spill, k0, k1, *parts.parts[lo:hi]) for lo, hi in nodes]
        block_stats = dask.delayed(_block_stats)(stats, k0, k1)  # not placed: cut where ``stats`` is
        with placed(slots, j):  # one block per worker thread
            tasks.append(dask.delayed(_solve_block)(add_gram, block_stats, lam[k0:k1] if lam.ndim else lam, rtol,
                                                    max_iter, *pieces))
    fits = compute(*tasks, client=parts.client, progress=progress)
    return ridge.RidgeFit(np.concatenate([f.coef for f in fits]), np.concatenate([f.intercept for f in fits]),
                          max(f.iterations for f in fits), np.concatenate([f.converged for f in fits]))


def _block_stats(stats: ridge.RidgeStats, k0: int, k1: int) -> ridge.RidgeStats:
    """Rows k0 … k1 − 1 of each field; a field that is another's array (Σx² = Σx for binary x) is the same
    view, so the block's statistics travel once (pickle keeps one copy of an object met twice)."""
    views: dict[int, np.ndarray] = {}
    return ridge.RidgeStats(*[views.setdefault(id(a), a[k0:k1])
                              for a in (getattr(stats, f.name) for f in dataclasses.fields(stats))])


def _pieces(cut, spill_root, k0, k1, *parts) -> list:
    """The pieces of a run of parts for fits [k0, k1), spilled if ``spill_root`` is given."""
    pieces = [cut(load_part(part), k0, k1) for part in parts]
    return pieces if spill_root is None else [spill(piece, spill_root) for piece in pieces]


def _solve_block(add_gram, stats, lam, rtol, max_iter, *runs) -> ridge.RidgeFit:
    pieces = [load_part(p) for run in runs for p in run]  # in the parts' order

    def gram(P):
        """XᵀX P for the active fits' directions P, piece by piece (zero rows for converged fits)."""
        active = np.flatnonzero(P.any(axis=1))  # CG zeroes the directions of converged fits
        if active.size == 0:
            return np.zeros_like(P)
        total = None
        for piece in pieces:
            total = add_gram(total, piece, P, int(active[0]), int(active[-1]) + 1)
        return total.reshape(P.shape)

    return ridge.fit(gram, stats, lam, rtol=rtol, max_iter=max_iter)
