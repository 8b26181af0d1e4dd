"""The contract every mergeable statistic of dr-scale follows (shared/DESIGN.md: mergeable statistics).

A state summarises a batch of rows so that the state of all rows is the sum of the parts' states,
for any partitioning and any grouping of the merges (a tree reduction, local or on a cluster):

- ``State.of(...)`` builds the state of one batch of rows (``PolicyState`` is built by
  :meth:`dr_scale.evaluation.Evaluation.state`, which needs the policy's rows; ``FitSums`` by
  :func:`dr_scale.visits.experiment.subsample_part`, which adds a part's sums into a running total);
- ``a + b`` merges two states; it is associative and commutative (exactly for counts, minima,
  maxima and samples; up to float rounding for float sums); a state that needs an identity
  (a running total, a sum over no rows) has ``State.empty(...)``;
- a state kept in the report's state cache also has ``to_dict()`` (JSON-ready) and
  ``State.from_dict(d)``, with ``from_dict(s.to_dict())`` equal to ``s``.

The states: :class:`~dr_scale.moments.Moments`, :class:`~dr_scale.diagnostics.WeightStats`,
:class:`~dr_scale.evaluation.PolicyState`, :class:`~dr_scale.fitting.Extent`,
:class:`~dr_scale.visits.experiment.Projections`,
:class:`~dr_scale.visits.experiment.Population`, :class:`~dr_scale.visits.experiment.FitSums`,
:class:`~dr_scale.visits.pca.RowSample`,
:class:`~dr_scale.visits.pca.FirstPass`, :class:`~dr_scale.synthetic.bandit.Calibration`.
Their fields are named (no positional vectors).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Mergeable(Protocol):
    """A state merged with an associative, commutative ``+``."""

    def __add__(self, other: Mergeable) -> Mergeable: ...


@runtime_checkable
class Persisted(Mergeable, Protocol):
    """A mergeable state that round-trips through a JSON-ready dict."""

    def to_dict(self) -> dict: ...

    @classmethod
    def from_dict(cls, d: dict) -> Persisted: ...
