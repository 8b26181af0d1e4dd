"""A slate policy's value on a slate log, out of core: each part's impressions reduced to the slate estimators'
states (:mod:`dr_scale.ope.estimators.slate`), merged down Dask's tree.

A slate log (docs/data-contract.md) has one row per shown slot, with ``slot`` (0 = top) and ``impression``.
Every impression's rows must lie in one part (the state of a part is that of whole impressions), and show the
policy's K slots 0 … K−1 once each; both are checked, and a violation is a ``LogDataError`` naming the file, the
column and a row. The impression's context is its rows' first feature index (the log's features are a one-hot
context id, as ``dr-scale generate slates`` writes them), the row of the slate policy's score table it uses. The
logging policy is read as factored over slots: its slate and prefix probabilities are the products of the rows'
``propensity`` (the per-slot probabilities), exact for a logger that draws each slot independently.
"""

from __future__ import annotations

from dataclasses import dataclass

import dask
import numpy as np

from dr_scale.logs.contract import LogDataError, Partition
from dr_scale.logs.opened import OpenedLog
from dr_scale.ope.estimators.estimate import Estimate
from dr_scale.ope.estimators.slate import SlateEstimator, SlateInputs, SlateOnPolicy
from dr_scale.ope.moments import Moments
from dr_scale.outofcore.compute import compute
from dr_scale.outofcore.mergeable import merge_all
from dr_scale.policies.slates import SlatePolicy, SlateProbabilities

#: The key of the logging policy's on-policy value among a part's states.
LOGGING = "logging"


def part_slates(part: Partition, slots: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(impression ids (n,), contexts (n,), items (n, K), rewards (n, K), propensities (n, K)) of a part's impressions,
    in increasing impression id; a ``LogDataError`` for a log without slots, or an impression not showing slots
    0 … K−1 once each."""
    if part.slot is None or part.impression is None:
        missing = "slot" if part.slot is None else "impression"
        raise LogDataError(part.source, missing, "a slate estimator needs the `slot` and `impression` columns "
                           "(docs/data-contract.md; the import spec's slot and impression keys)")
    slot, impression = part.slot, part.impression
    ids, group = np.unique(impression, return_inverse=True)
    outside = slot >= slots
    counts = np.bincount(group, minlength=ids.size)
    cell = group * slots + np.minimum(slot, slots - 1)
    order = np.argsort(cell, kind="stable")
    repeated = np.zeros(cell.size, dtype=bool)
    repeated[order[1:]] = cell[order[1:]] == cell[order[:-1]]
    bad = outside | repeated | (counts[group] != slots)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise LogDataError(part.source, "slot", f"impression {int(impression[i])} does not show slots 0 … {slots - 1} "
                           f"once each (this slate policy's K = {slots}; an impression's rows must lie in one part)",
                           int(part.row_id[i]))
    X = part.X
    assert X is not None  # read with its features
    no_context = np.diff(X.indptr) == 0
    if no_context.any():
        i = int(np.flatnonzero(no_context)[0])
        raise LogDataError(part.source, "features", "a slate row without features (its first feature index is the "
                           "impression's context)", int(part.row_id[i]))
    context = np.empty(ids.size, dtype=np.int64)
    context[group] = X.indices[X.indptr[:-1]]

    def grid(values: np.ndarray) -> np.ndarray:
        """The per-row ``values`` on the (impressions, K) grid."""
        out = np.empty(ids.size * slots, dtype=values.dtype)
        out[cell] = values
        return out.reshape(ids.size, slots)

    return ids, context, grid(part.action.astype(np.int64)), grid(part.reward), grid(part.propensity)


def part_states(log: OpenedLog, path: str, policy: SlatePolicy,
                estimators: dict[str, SlateEstimator]) -> tuple[dict[str, Moments], np.ndarray]:
    """The states of one part's impressions for each estimator (and ``LOGGING``, the on-policy value), and the
    part's impression ids."""
    part = log.read(path)
    ids, context, items, reward, propensity = part_slates(part, policy.slots)
    rows = SlateInputs.from_probabilities(reward, policy.probabilities(items, context),
                                          SlateProbabilities.factored(propensity))
    states = {name: estimator.state(rows) for name, estimator in estimators.items()}
    states[LOGGING] = SlateOnPolicy().state(rows)  # type: ignore[arg-type]
    return states, ids


@dataclass(frozen=True)
class SlateEvaluation:
    """A slate policy's estimates on a slate log: ``estimates`` by estimator, the logging policy's on-policy value
    ``logging``, and the number of impressions (each estimate's ``n``)."""

    estimates: dict[str, Estimate]
    logging: Estimate

    def table(self, alpha: float = 0.05, method: str = "normal") -> str:
        """The estimates as a text table: value, standard error, (1 − α) interval, impressions."""
        lines = [f"{'estimator':<20} {'value':>10} {'stderr':>10}  {f'{1 - alpha:.0%} interval':<24} impressions"]
        for name, est in [*self.estimates.items(), ("logging (on-policy)", self.logging)]:
            lo, hi = est.ci(alpha, method)
            lines.append(f"{name:<20} {est.value:>10.6f} {est.stderr:>10.6f}  [{lo:.6f}, {hi:.6f}]{'':<4} {est.n:,}")
        return "\n".join(lines)


def evaluate_slate_log(log: OpenedLog, policy: SlatePolicy, estimators: dict[str, SlateEstimator],
                       client: object = None, progress: bool = False) -> SlateEvaluation:
    """The slate estimators' estimates of ``policy`` on ``log``: one Dask task per part, the states merged in part
    order (:func:`~dr_scale.outofcore.mergeable.merge_all`). An impression id in two parts is a ``LogDataError``.
    """
    paths = log.paths
    tasks = [dask.delayed(part_states, pure=True)(log, path, policy, estimators) for path in paths]
    parts = compute(*tasks, client=client, progress=progress)
    ids = np.concatenate([p[1] for p in parts])
    ordered = np.sort(ids, kind="stable")
    twice = ordered[1:][ordered[1:] == ordered[:-1]]
    if twice.size:
        where = [paths[j] for j, p in enumerate(parts) if np.isin(twice[:1], p[1]).any()]
        raise LogDataError(where[0], "impression", f"impression {int(twice[0])} has rows in two parts ({where[0]} "
                           f"and {where[-1]}); an impression's rows must lie in one part")
    merged = {name: merge_all(p[0][name] for p in parts) for name in [*estimators, LOGGING]}
    return SlateEvaluation({name: est.result(merged[name]) for name, est in estimators.items()},  # type: ignore[arg-type]
                           SlateOnPolicy().result(merged[LOGGING]))  # type: ignore[arg-type]
