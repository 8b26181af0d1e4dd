"""Per-partition states for every candidate policy: cached where trusted, computed where not.

The Dask graph has one task per partition that is new, changed, or lacks a trusted
cached state for some policy. A task reads its partition once, validates it, computes
each missing policy's :class:`~dr_scale.ope.evaluation.PolicyState` and writes it to the
cache. A partition with bad data (a :class:`~dr_scale.logs.contract.LogDataError`: schema
drift, a propensity outside (0, 1], …) yields its error instead of states, so every
bad partition of the window is reported by name, not just the first.

States then merge on the client in **sorted partition-path order** (a left fold), per
day and over the window. The order never depends on which tasks ran or finished
first, so an incremental run equals a full recomputation exactly, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, cast

from dr_scale.core.errors import UserError
from dr_scale.logs.contract import META_ACTIONS, META_FEATURES, LogDataError
from dr_scale.logs.listing import log_metadata
from dr_scale.logs.reading import read_partition
from dr_scale.ope.evaluation import Evaluation, PolicyState
from dr_scale.outofcore.compute import compute, one_key
from dr_scale.outofcore.mergeable import Mergeable, merge_all, parts_bag
from dr_scale.policies import PolicyMismatch
from dr_scale.report.partitions import PartitionInfo
from dr_scale.report.state_cache import StateCache, fingerprint


@dataclass
class PartitionOutcome:
    """What one task returns: the partition's states by policy name, or its error."""

    path: str
    states: dict[str, PolicyState] = field(default_factory=dict)
    error: str | None = None
    policy_error: tuple[str, str] | None = None  # (policy name, why): the policy does not fit the log


@dataclass
class ReportStates:
    """Merged states of a window: per policy over the window and per day."""

    parts: list[PartitionInfo]
    rows: dict[str, int]  # good partition path -> rows
    bad: dict[str, str]  # bad partition path -> error message
    computed: list[str]  # partitions read in this run
    cache_rejected: dict[str, str]  # partition path -> why its cached state was not trusted
    totals: dict[str, PolicyState | None]
    by_day: dict[str, dict[str, PolicyState]]
    policy_errors: dict[str, str] = field(default_factory=dict)  # policy name -> why it does not fit the log


def check_dimensions(part, n_features: int | None, n_actions: int | None) -> None:
    """Schema drift in the log's metadata: a partition declaring other k or d than the report uses."""
    meta = part.table.schema.metadata or {}
    for key, expected, what in ((META_ACTIONS, n_actions, "n_actions"), (META_FEATURES, n_features, "n_features")):
        if key in meta and expected is not None and int(meta[key]) != expected:
            raise LogDataError(part.source, None, f"schema drift: metadata {what}={int(meta[key])}, "
                                                  f"the report uses {what}={expected}")


def _read_states(read: tuple[PartitionInfo, list[str]], fs, evaluations: dict[str, Evaluation],
                 fingerprints: dict[str, str], cache: StateCache | None) -> PartitionOutcome:
    """:func:`partition_states` of ``read``, a partition and the policies whose states it lacks."""
    info, names = read
    return partition_states(fs, info, evaluations, names, fingerprints, cache)


def partition_states(fs, info: PartitionInfo, evaluations: dict[str, Evaluation], names: list[str],
                     fingerprints: dict[str, str], cache: StateCache | None) -> PartitionOutcome:
    """Read one partition once and compute the states of the policies ``names`` (one Dask task).

    A policy that does not fit the log (:class:`~dr_scale.policies.PolicyMismatch`, or an
    action beyond a k that came from the policy itself) is the policy's error, returned as such:
    the partition is not blamed for it.
    """
    chosen = [evaluations[n] for n in names]
    first = chosen[0]
    columns = tuple(dict.fromkeys(c for e in chosen for c in e.columns))
    try:
        part = read_partition(fs, info.path, n_features=first.n_features, n_actions=first.n_actions,
                              with_features=any(e.needs_features for e in chosen), extra_columns=columns,
                              log_filter=info.log_filter)
        check_dimensions(part, first.n_features, first.n_actions)
    except LogDataError as exc:
        if exc.column == "action" and "out of range" in exc.reason and first.k_source == "the policy":
            return PartitionOutcome(info.path, policy_error=(_candidate(names[0]), str(first.explain(exc))))
        return PartitionOutcome(info.path, error=str(first.explain(exc)))
    states = {}
    for name, e in zip(names, chosen, strict=True):
        try:
            states[name] = e.state(part)
        except PolicyMismatch as exc:
            return PartitionOutcome(info.path, policy_error=(_candidate(name), str(exc)))
        except LogDataError as exc:
            return PartitionOutcome(info.path, error=str(e.explain(exc)))
    if cache is not None:
        for name, state in states.items():
            cache.store(fingerprints[name], info.identity, state)
    return PartitionOutcome(info.path, states)


def _candidate(name) -> str:
    """The candidate a state belongs to: its name, or for a pair key ``("pair", a, b)`` the first, a."""
    return name[1] if isinstance(name, tuple) else name


def fill_dimensions(evaluations: dict[str, Evaluation], fs, parts: list[PartitionInfo]) -> dict[str, Evaluation]:
    """Copies of the evaluations with k and d: as given, else from the first partition whose metadata reads.

    Given k or d (from the reward model or the policies file) that disagree with both the oldest
    and the newest partition's metadata are a configuration error, not every partition's drift.
    """
    meta, newest = _first_metadata(fs, parts), _first_metadata(fs, parts[::-1])
    for name, e in evaluations.items():
        for what in ("n_actions", "n_features"):
            given = getattr(e, what)
            if given is not None and what in meta and what in newest and given != meta[what] and given != newest[what]:
                source = (e.k_source if what == "n_actions" else None) or "the reward model or the policies file"
                if source == "the policy":
                    source = f"policy {_candidate(name)!r}, {e.policy}"
                raise UserError(f"{what} = {given} (from {source}) but the log's metadata says {meta[what]} "
                                f"(oldest partition) and {newest[what]} (newest); use a model and settings for "
                                "this log")
    filled = {name: replace(e, n_actions=e.n_actions if e.n_actions is not None else meta.get("n_actions"),
                            n_features=e.n_features if e.n_features is not None else meta.get("n_features"))
              for name, e in evaluations.items()}
    if any(e.n_actions is None for e in filled.values()):
        raise UserError("the number of actions k is unknown: set n_actions in the policies file, give a reward model, "
                        "or write the log with dr_scale.n_actions metadata")
    return filled


def _first_metadata(fs, parts: list[PartitionInfo]) -> dict:
    """The schema metadata of the first partition in ``parts`` whose footer reads ({} if none)."""
    for p in parts:
        try:
            return log_metadata(fs, p.path)
        except LogDataError:
            continue  # that partition is reported as bad by its own task
    return {}


def build_states(fs, parts: list[PartitionInfo], evaluations: dict[Any, Evaluation],
                 cache: StateCache | None, *, client=None, progress: bool = False) -> ReportStates:
    """Trusted cached states plus one Dask task per partition that needs reading (per run of 8 such partitions from
    1,024 on: :func:`~dr_scale.outofcore.mergeable.parts_bag`); merged per day and overall."""
    parts = sorted(parts, key=lambda p: p.path)
    evaluations = fill_dimensions(evaluations, fs, parts)
    fps = {name: fingerprint(e) for name, e in evaluations.items()}
    cached, rejected = cache.load([(fp, p.identity) for p in parts for fp in fps.values()]) if cache else ({}, {})
    reads, states = [], {}
    for p in parts:
        missing = [n for n, fp in fps.items() if (fp, p.path) not in cached]
        states.update({(n, p.path): cached[(fp, p.path)] for n, fp in fps.items() if (fp, p.path) in cached})
        if missing:
            reads.append((p, missing))
    outcomes: list[PartitionOutcome] = []
    if reads:  # a task per partition to read, or per run of 8 in a report of many (parts_bag)
        (outcomes,) = compute(parts_bag(reads).map(_read_states, fs, one_key(evaluations), fps, cache),
                              client=client, progress=progress)
    bad: dict[str, str] = {}
    policy_errors: dict[str, str] = {}
    for outcome in outcomes:
        if outcome.policy_error is not None:
            policy_errors.setdefault(*outcome.policy_error)
            continue
        if outcome.error is not None:
            bad[outcome.path] = outcome.error
        states.update({(n, outcome.path): s for n, s in outcome.states.items()})

    if policy_errors:
        return ReportStates(parts, {}, bad, [o.path for o in outcomes], {}, {}, {}, policy_errors)
    good = [p for p in parts if p.path not in bad]
    first_policy = next(iter(evaluations))
    rows = {p.path: states[(first_policy, p.path)].weights.n for p in good}
    def merged(n: Any, paths: list[str]) -> PolicyState | None:
        # merge_all's protocol types a state's + by Mergeable, PolicyState's by PolicyState: the same operation
        """The merge of evaluation ``n``'s states of the partitions ``paths`` (None for none)."""
        return cast("PolicyState | None", merge_all(cast("list[Mergeable]", [states[(n, path)] for path in paths])))

    totals = {n: merged(n, [p.path for p in good]) for n in evaluations}
    days = sorted({p.day for p in good if p.day})
    by_day = {n: {d: cast(PolicyState, merged(n, [p.path for p in good if p.day == d])) for d in days}
              for n in evaluations}
    rejected_by_path = {path: why for (_, path), why in rejected.items()}
    return ReportStates(parts, rows, bad, [o.path for o in outcomes], rejected_by_path,
                        totals, by_day)
