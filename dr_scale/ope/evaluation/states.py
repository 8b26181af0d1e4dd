"""The mergeable per-part state of one policy's evaluation, and how a part becomes one.

A :class:`PolicyState` holds the :class:`~dr_scale.ope.moments.Moments` of every estimator's per-row terms, the
weights' diagnostics (:class:`~dr_scale.ope.diagnostics.WeightStats`), the paired differences' moments against a
baseline and the other diagnostics of the rows; two merge with ``+`` (sums, and the fingerprint Σ row_hash mod
2⁶⁴), so a log's state is the tree reduction of its parts'. :class:`PartitionSource` reads and validates one part
(a Parquet file or an Arrow table) for an :class:`~dr_scale.ope.evaluation.specification.Evaluation` or a
:class:`~dr_scale.ope.evaluation.comparison.Comparison` and gives its state.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pyarrow as pa

from dr_scale.logs.contract import LogDataError
from dr_scale.logs.filters import LogFilter
from dr_scale.logs.reading import partition_from_table, read_partition
from dr_scale.ope.diagnostics import Coverage, WeightStats
from dr_scale.ope.moments import Moments
from dr_scale.propensity.diagnostics import PropensityState


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

    def __add__(self, other: PolicyState) -> PolicyState:
        def both(a, b):
            return None if a is None or b is None else a + b

        hashed = self.rows_hash is not None and other.rows_hash is not None
        return PolicyState({k: v + other.estimators[k] for k, v in self.estimators.items()},
                           self.weights + other.weights,
                           {k: v + other.differences[k] for k, v in self.differences.items()},
                           both(self.baseline_weights, other.baseline_weights),
                           both(self.coverage, other.coverage),
                           (self.rows_hash + other.rows_hash) % 2 ** 64 if hashed else None,
                           both(self.propensity, other.propensity),
                           both(self.marginal_weights, other.marginal_weights),
                           both(self.baseline_marginal_weights, other.baseline_marginal_weights))

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
        return self.weights.n

    def to_dict(self) -> dict:
        out = {"estimators": {k: v.to_dict() for k, v in self.estimators.items()}, "weights": self.weights.to_dict(),
               "differences": {k: v.to_dict() for k, v in self.differences.items()},
               "baseline_weights": None if self.baseline_weights is None else self.baseline_weights.to_dict()}
        if self.coverage is not None:
            out["coverage"] = self.coverage.to_dict()
        if self.rows_hash is not None:
            out["rows_hash"] = str(self.rows_hash)
        if self.propensity is not None:
            out["propensity"] = self.propensity.to_dict()
        for key in ("marginal_weights", "baseline_marginal_weights"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key).to_dict()
        return out

    @classmethod
    def from_dict(cls, d: dict) -> PolicyState:
        base = d.get("baseline_weights")
        return cls({k: Moments.from_dict(v) for k, v in d["estimators"].items()}, WeightStats.from_dict(d["weights"]),
                   {k: Moments.from_dict(v) for k, v in d["differences"].items()},
                   None if base is None else WeightStats.from_dict(base),
                   Coverage.from_dict(d["coverage"]) if "coverage" in d else None,
                   int(d["rows_hash"]) if "rows_hash" in d else None,
                   PropensityState.from_dict(d["propensity"]) if "propensity" in d else None,
                   *(WeightStats.from_dict(d[key]) if d.get(key) is not None else None
                     for key in ("marginal_weights", "baseline_marginal_weights")))


class PartitionSource:
    """A partition's state from a Parquet file or a pyarrow table, for :class:`Evaluation` and
    :class:`Comparison`: the partition read and validated with the class's ``dimensions``,
    ``needs_features`` and ``columns``, a log error explained by ``explain``, then ``state(part)``."""

    def file_state(self, fs, path: str):
        n_features, n_actions = self.dimensions
        try:
            part = read_partition(fs, path, n_features=n_features, n_actions=n_actions,
                                  with_features=self.needs_features, extra_columns=self.columns)
        except LogDataError as exc:
            raise self.explain(exc) from None
        return self.state(part)

    def table_state(self, table: pa.Table, source: str, log_filter: LogFilter | None = None):
        n_features, n_actions = self.dimensions
        try:
            part = partition_from_table(table, source, n_features, n_actions, self.needs_features, log_filter)
        except LogDataError as exc:
            raise self.explain(exc) from None
        return self.state(part)
