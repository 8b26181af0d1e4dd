"""Estimates per slot of a ranking, pooled, and over the impression (``evaluate --by slot``).

A ranking is logged one row per slot (the ``slot`` column, docs/data-contract.md). The value of π at slot s is
V_s = E[r | slot s] under π(· | x, s), estimated by the evaluation's estimators on the rows of slot s alone; the
pooled value V̂ over all rows is the mean over every (impression, slot) — Open Bandit Pipeline's
``estimate_policy_value(..., position=…)``, whose per-position estimate is the same estimator on that position's
rows. The value of an impression, the expected reward of its K slots together, is V_imp = Σ_s V_s, estimated by
Σ_s V̂_s with standard error √(Σ_s se_s²): the slots' estimates rest on disjoint rows, and the sum's error treats
them as independent, which holds when an impression's slots are independent draws (as in the Open Bandit
Dataset's samples, where nearly every impression keeps one slot); rewards correlated across the slots of one
impression make it optimistic.

One pass: each part's rows are split by slot and every slot's :class:`PolicyState` computed beside the pooled one
(:class:`SlotStates`, mergeable with ``+``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from dr_scale.core.errors import UserError
from dr_scale.core.numbers import estimate
from dr_scale.logs.contract import LogDataError, Partition
from dr_scale.ope.estimators import Estimate
from dr_scale.ope.evaluation.results import EvaluationResult, estimate_dict
from dr_scale.ope.evaluation.specification import Evaluation
from dr_scale.ope.evaluation.states import PartitionSource, PolicyState


def slot_rows(part: Partition, slot: int) -> Partition:
    """The rows of ``part`` at ``slot``, as a partition (its features, arrays and table filtered alike)."""
    assert part.slot is not None  # a partition of a log with slots
    keep = part.slot == slot
    import pyarrow as pa

    return Partition(part.source, part.row_id[keep], None if part.X is None else part.X[keep], part.action[keep],
                     part.reward[keep], part.propensity[keep], part.table.filter(pa.array(keep)))


@dataclass(frozen=True)
class SlotStates:
    """The pooled state of a part's rows and one state per slot (mergeable: the pooled added, the slots' by
    slot)."""

    pooled: PolicyState
    slots: dict[int, PolicyState]

    def __add__(self, other: SlotStates) -> SlotStates:
        """Both parts' rows."""
        slots = dict(self.slots)
        for s, state in other.slots.items():
            slots[s] = slots[s] + state if s in slots else state
        return SlotStates(self.pooled + other.pooled, slots)

    @property
    def rows(self) -> int:
        """The rows the state summarises."""
        return self.pooled.rows


@dataclass(frozen=True)
class BySlot(PartitionSource[SlotStates]):
    """An evaluation's states per slot and pooled, from one read of each part (module docstring)."""

    evaluation: Evaluation

    @property
    def dimensions(self) -> tuple[int | None, int | None]:
        """The evaluation's (d, k)."""
        return self.evaluation.dimensions

    @property
    def needs_features(self) -> bool:
        """Whether the evaluation reads x."""
        return self.evaluation.needs_features

    @property
    def columns(self) -> tuple[str, ...]:
        """The evaluation's extra columns."""
        return self.evaluation.columns

    def explain(self, exc: LogDataError) -> LogDataError:
        """The evaluation's explanation."""
        return self.evaluation.explain(exc)

    def state(self, part: Partition) -> SlotStates:
        """The pooled state and one per slot present in the part."""
        if part.slot is None:
            raise LogDataError(part.source, "slot", "missing column: estimates per slot need the rows' slots "
                                                    "(import with slot = \"POSITION_COLUMN\", docs/import.md)")
        per_slot = self.per_slot()
        return SlotStates(self.evaluation.state(part),
                          {int(s): per_slot.state(slot_rows(part, int(s))) for s in np.unique(part.slot)})

    def per_slot(self) -> Evaluation:
        """The evaluation of one slot's rows: a cross-fitted model's fingerprint is checked on the pooled rows,
        not on each slot's share of them."""
        return replace(self.evaluation, allow_other_log=True)

    def result(self, state: SlotStates) -> SlotResult:
        """The pooled, per-slot and per-impression estimates of a merged state."""
        pooled = self.evaluation.result(state.pooled)
        per_slot = self.per_slot()
        slots = {s: per_slot.result(state.slots[s]) for s in sorted(state.slots)}
        return SlotResult(pooled, slots, impression_estimates(slots))


def impression_estimates(slots: dict[int, EvaluationResult]) -> dict[str, Estimate]:
    """Per estimator, V̂_imp = Σ_s V̂_s with standard error √(Σ_s se_s²) (module docstring)."""
    if not slots:
        return {}
    names = next(iter(slots.values())).estimates
    return {name: Estimate(float(sum(r.estimates[name].value for r in slots.values())),
                           math.sqrt(sum(r.estimates[name].stderr ** 2 for r in slots.values())),
                           sum(r.estimates[name].n for r in slots.values()))
            for name in names}


@dataclass
class SlotResult:
    """One policy's estimates pooled over the rows, per slot, and per impression (Σ over the slots).

    Parameters
    ----------
    pooled : EvaluationResult
        Over all rows (every slot of every impression).
    slots : dict of int to EvaluationResult
        On each slot's rows (slot 0 = the top).
    impression : dict of str to Estimate
        Per estimator, the value of an impression's slots together, Σ_s V̂_s.

    See Also
    --------
    dr_scale.evaluate_log : Gives one with ``by_slot=True``.

    Examples
    --------
    Two slots of a uniform logger over 2 actions; π always takes action 1:

    >>> import numpy as np, pyarrow as pa, scipy.sparse as sp
    >>> from dr_scale import Evaluation, Partition, evaluate_partitions
    >>> part = Partition("<p>", np.arange(4), sp.csr_matrix((4, 1)), np.array([1, 0, 1, 1]),
    ...                  np.array([1.0, 1.0, 0.0, 1.0]), np.full(4, 0.5),
    ...                  pa.table({"propensity": [0.5] * 4, "slot": pa.array([0, 0, 1, 1])}))
    >>> result = evaluate_partitions([part], Evaluation("constant:1", ["IPS"], n_actions=2), by_slot=True)
    >>> result.pooled.estimates["IPS"].value, {s: r.estimates["IPS"].value for s, r in result.slots.items()}
    (1.0, {0: 1.0, 1: 1.0})
    >>> result.impression["IPS"].value
    2.0
    """

    pooled: EvaluationResult
    slots: dict[int, EvaluationResult]
    impression: dict[str, Estimate]

    @property
    def policy(self) -> str:
        """The policy, as its spec reads."""
        return self.pooled.policy

    def table(self, alpha: float = 0.05, interval: str = "normal") -> str:
        """The pooled table, then one per slot, then the impression's values."""
        blocks = [f"all slots (pooled: the mean over every slot's rows)\n{self.pooled.table(alpha, interval)}"]
        blocks += [f"slot {s}\n{r.table(alpha, interval)}" for s, r in self.slots.items()]
        lines = [f"per impression (the sum over its {len(self.slots)} slots; std. errors as if the slots were "
                 "independent)", f"{'estimator':<12}{'value':>12}{'std. error':>13}{'95% CI (normal)':>28}"
                 if alpha == 0.05 else f"{'estimator':<12}{'value':>12}{'std. error':>13}{'CI (normal)':>28}"]
        for name, e in self.impression.items():
            shown = e.projected(alpha, "normal")
            value, se, ci = estimate(shown.value, e.total_stderr, shown.ci)
            lines.append(f"{name:<12}{value:>12}{se:>13}{ci:>28}")
        return "\n\n".join([*blocks, "\n".join(lines)])

    def to_dict(self, alpha: float = 0.05, interval: str = "normal") -> dict[str, Any]:
        """The pooled result's dict, with ``slots`` (each slot's) and ``impression`` (its estimates)."""
        return {**self.pooled.to_dict(alpha, interval),
                "slots": {str(s): r.to_dict(alpha, interval) for s, r in self.slots.items()},
                "impression": {name: estimate_dict(e, alpha, "normal") for name, e in self.impression.items()}}

    def warnings(self, min_ess_ratio: float) -> list[str]:
        """The pooled result's warnings, then each slot's, prefixed."""
        return [*self.pooled.warnings(min_ess_ratio),
                *(f"slot {s}: {w}" for s, r in self.slots.items() for w in r.warnings(min_ess_ratio))]


def check_by_slot(evaluation: object) -> Evaluation:
    """``evaluation``, which must be one policy's :class:`Evaluation` (estimates per slot compare no policies)."""
    if not isinstance(evaluation, Evaluation):
        raise UserError("estimates per slot (--by slot) take one policy at a time; give one --policy")
    return evaluation
