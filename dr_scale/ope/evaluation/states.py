"""The mergeable per-part state of one policy's evaluation, and how a part becomes one.

A :class:`PolicyState` holds the :class:`~dr_scale.ope.moments.Moments` of every estimator's per-row terms, the
weights' diagnostics (:class:`~dr_scale.ope.diagnostics.WeightStats`), the paired differences' moments against a
baseline and the other diagnostics of the rows; two merge with ``+`` (sums, and the fingerprint Σ row_hash mod
2⁶⁴), so a log's state is the tree reduction of its parts'. :class:`PartitionSource` reads and validates one part
(a Parquet file or an Arrow table) for an :class:`~dr_scale.ope.evaluation.specification.Evaluation` or a
:class:`~dr_scale.ope.evaluation.comparison.Comparison` and gives its state.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import pyarrow as pa

from dr_scale.logs.contract import LogDataError, Partition
from dr_scale.logs.filters import LogFilter
from dr_scale.logs.reading import partition_from_table, read_partition
from dr_scale.ope.diagnostics import Coverage, WeightStats
from dr_scale.ope.moments import Moments
from dr_scale.propensity.diagnostics import PropensityState

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

#: A diagnostics state a :class:`PolicyState` holds where it has one: merged with ``+`` when both sides do.
_Optional = TypeVar("_Optional", WeightStats, Coverage, PropensityState)
#: The mergeable state of a part that a :class:`PartitionSource` gives.
State = TypeVar("State")


def _both(a: _Optional | None, b: _Optional | None) -> _Optional | None:
    """a + b, or None when either is None (a state of rows some of which lack the diagnostic)."""
    return None if a is None or b is None else a + b


@dataclass(frozen=True)
class PolicyState:
    """Merged states of every estimator plus the weight diagnostics (and the paired differences)."""

    estimators: dict[str, Moments]
    weights: WeightStats
    differences: dict[str, Moments] = field(default_factory=dict)
    baseline_weights: WeightStats | None = None  # the baseline policy's (not for "logging")
    coverage: Coverage | None = None  # logged rows and π's mass per action
    rows_hash: int | None = None  # Σ row_hash mod 2⁶⁴ (the fit's fingerprint), for a cross-fitted model's check
    propensity: PropensityState | None = None  # the estimated propensities' diagnostics (with a propensity model)
    # MIPS's own weights w(x_i, e_i) = p_π(e_i|x_i) / p_π₀(e_i|x_i), the policy's and the baseline's (None without
    # a marginalized estimator)
    marginal_weights: WeightStats | None = None
    baseline_marginal_weights: WeightStats | None = None
    # per model-based estimator, its state under each cross-fitting fold model j (every row predicted by model j):
    # the fold models' spread, the reward model's standard error (Evaluation.result)
    folds: dict[str, list[Moments]] = field(default_factory=dict)

    def __add__(self, other: PolicyState) -> PolicyState:
        """The state of both states' rows: the moments and diagnostics summed, the fingerprints
        (Σ row_hash) added mod 2⁶⁴; a diagnostic only one side has is dropped."""
        rows_hash = (None if self.rows_hash is None or other.rows_hash is None
                     else (self.rows_hash + other.rows_hash) % 2 ** 64)
        return PolicyState({k: v + other.estimators[k] for k, v in self.estimators.items()},
                           self.weights + other.weights,
                           {k: v + other.differences[k] for k, v in self.differences.items()},
                           _both(self.baseline_weights, other.baseline_weights),
                           _both(self.coverage, other.coverage),
                           rows_hash,
                           _both(self.propensity, other.propensity),
                           _both(self.marginal_weights, other.marginal_weights),
                           _both(self.baseline_marginal_weights, other.baseline_marginal_weights),
                           {k: [a + b for a, b in zip(v, other.folds[k], strict=True)] for k, v in self.folds.items()
                            if k in other.folds})

    def marginal_view(self) -> PolicyState:
        """This state with MIPS's marginal weights in place of w_i = π(a_i|x_i) / p̂_i (itself without them): the
        diagnostics of a report whose primary estimator is marginalized."""
        if self.marginal_weights is None:
            return self
        return replace(self, weights=self.marginal_weights,
                       baseline_weights=(self.baseline_marginal_weights if self.baseline_marginal_weights is not None
                                         else self.baseline_weights))

    @property
    def rows(self) -> int:
        """The number of rows the state summarises."""
        return self.weights.n

    def to_dict(self) -> dict[str, Any]:
        """The state as a JSON-ready dict (the report's state cache); :meth:`from_dict` reads it back."""
        out: dict[str, Any] = {
            "estimators": {k: v.to_dict() for k, v in self.estimators.items()}, "weights": self.weights.to_dict(),
            "differences": {k: v.to_dict() for k, v in self.differences.items()},
            "baseline_weights": None if self.baseline_weights is None else self.baseline_weights.to_dict()}
        if self.coverage is not None:
            out["coverage"] = self.coverage.to_dict()
        if self.rows_hash is not None:
            out["rows_hash"] = str(self.rows_hash)
        if self.propensity is not None:
            out["propensity"] = self.propensity.to_dict()
        if self.marginal_weights is not None:
            out["marginal_weights"] = self.marginal_weights.to_dict()
        if self.baseline_marginal_weights is not None:
            out["baseline_marginal_weights"] = self.baseline_marginal_weights.to_dict()
        if self.folds:
            out["folds"] = {k: [m.to_dict() for m in v] for k, v in self.folds.items()}
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PolicyState:
        """The state of a :meth:`to_dict` dict (``from_dict(s.to_dict())`` equals ``s``)."""
        base = d.get("baseline_weights")
        return cls({k: Moments.from_dict(v) for k, v in d["estimators"].items()}, WeightStats.from_dict(d["weights"]),
                   {k: Moments.from_dict(v) for k, v in d["differences"].items()},
                   None if base is None else WeightStats.from_dict(base),
                   Coverage.from_dict(d["coverage"]) if "coverage" in d else None,
                   int(d["rows_hash"]) if "rows_hash" in d else None,
                   PropensityState.from_dict(d["propensity"]) if "propensity" in d else None,
                   marginal_weights=_weights(d.get("marginal_weights")),
                   baseline_marginal_weights=_weights(d.get("baseline_marginal_weights")),
                   folds={k: [Moments.from_dict(m) for m in v] for k, v in d.get("folds", {}).items()})


def _weights(d: dict[str, Any] | None) -> WeightStats | None:
    """The :class:`WeightStats` of a ``to_dict`` dict, or None."""
    return None if d is None else WeightStats.from_dict(d)


class PartitionSource(abc.ABC, Generic[State]):
    """A partition's state from a Parquet file or a pyarrow table, for :class:`Evaluation` and
    :class:`Comparison`: the partition read and validated with the class's ``dimensions``,
    ``needs_features`` and ``columns``, a log error explained by ``explain``, then ``state(part)``."""

    @property
    @abc.abstractmethod
    def dimensions(self) -> tuple[int | None, int | None]:
        """(d, k) a partition is read with (None: the part's own)."""

    @property
    @abc.abstractmethod
    def needs_features(self) -> bool:
        """Whether the rows' features x_i are read."""

    @property
    @abc.abstractmethod
    def columns(self) -> tuple[str, ...]:
        """The extra log columns read beside the contract's."""

    @abc.abstractmethod
    def explain(self, exc: LogDataError) -> LogDataError:
        """``exc`` with what the reader knows of its cause (where d or k came from)."""

    @abc.abstractmethod
    def state(self, part: Partition) -> State:
        """The partition's mergeable state."""

    def file_state(self, fs: AbstractFileSystem, path: str) -> State:
        """The state of the Parquet part ``path`` on the filesystem ``fs``, read with :meth:`dimensions`,
        :attr:`needs_features` and :attr:`columns` (:func:`~dr_scale.logs.reading.read_partition`)."""
        n_features, n_actions = self.dimensions
        try:
            part = read_partition(fs, path, n_features=n_features, n_actions=n_actions,
                                  with_features=self.needs_features, extra_columns=self.columns)
        except LogDataError as exc:
            raise self.explain(exc) from None
        return self.state(part)

    def table_state(self, table: pa.Table, source: str, log_filter: LogFilter | None = None) -> State:
        """The state of a pyarrow table of the contract's columns (a DataFrame's partition) named ``source``,
        its rows those ``log_filter`` selects (:func:`~dr_scale.logs.reading.partition_from_table`)."""
        n_features, n_actions = self.dimensions
        try:
            part = partition_from_table(table, source, n_features, n_actions, self.needs_features, log_filter)
        except LogDataError as exc:
            raise self.explain(exc) from None
        return self.state(part)
