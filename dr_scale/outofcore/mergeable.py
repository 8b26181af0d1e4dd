"""The contract every mergeable statistic of dr-scale follows (shared/DESIGN.md: mergeable statistics), and the
one reduction of such states.

A state summarises a batch of rows so that the state of all rows is the sum of the parts' states,
for any partitioning and any grouping of the merges (a tree reduction, local or on a cluster):

- ``State.of(...)`` builds the state of one batch of rows (``PolicyState`` is built by
  :meth:`dr_scale.ope.evaluation.Evaluation.state`, which needs the policy's rows; ``FitSums`` by
  :func:`dr_scale.experiments.visits.experiment.subsample_part`, which adds a part's sums into a running total);
- ``a + b`` merges two states; it is associative and commutative (exactly for counts, minima,
  maxima and samples; up to float rounding for float sums); a state that needs an identity
  (a running total, a sum over no rows) has ``State.empty(...)``;
- a state kept in the report's state cache also has ``to_dict()`` (JSON-ready) and
  ``State.from_dict(d)``, with ``from_dict(s.to_dict())`` equal to ``s``.

The states: :class:`~dr_scale.ope.moments.Moments`, :class:`~dr_scale.ope.diagnostics.WeightStats`,
:class:`~dr_scale.ope.evaluation.PolicyState`, :class:`~dr_scale.crossfit.parts.Extent`,
:class:`~dr_scale.experiments.visits.experiment.Projections`,
:class:`~dr_scale.experiments.visits.experiment.Population`, :class:`~dr_scale.experiments.visits.experiment.FitSums`,
:class:`~dr_scale.experiments.visits.pca.RowSample`,
:class:`~dr_scale.experiments.visits.pca.FirstPass`, :class:`~dr_scale.synthetic.bandit.Calibration`,
:class:`~dr_scale.propensity.diagnostics.PropensityState`, :class:`~dr_scale.logs.importing.passes.BlockStats`.
Their fields are named (no positional vectors).

The one reduction of states is here: :func:`merge_all` folds a list of states in order, and
:func:`tree_reduce` merges the states of a Dask collection down Dask's tree (evaluation over a log's parts, an
import's blocks; the report merges its cached and new per-partition states with :func:`merge_all` in sorted
partition order). The pass engine (:mod:`dr_scale.outofcore.passes`) sums the per-part arrays of the iterative
solvers down its own fixed binary tree, adding in place into preallocated arrays, which a merge of immutable
states cannot do.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar, runtime_checkable

#: How many states one node of :func:`tree_reduce`'s tree merges (Dask's default for ``Bag.reduction``).
SPLIT_EVERY = 8
#: From this many parts on, :func:`parts_bag` reads :data:`SPLIT_EVERY` consecutive parts in each task.
GROUP_FROM = 1024

#: A mergeable state's type: a state merges with one of its kind.
State = TypeVar("State", bound="Mergeable")


@runtime_checkable
class Mergeable(Protocol):
    """A state merged with an associative, commutative ``+``."""

    def __add__(self: State, other: State) -> State: ...


@runtime_checkable
class Persisted(Mergeable, Protocol):
    """A mergeable state that round-trips through a JSON-ready dict."""

    def to_dict(self) -> dict:
        """The state as a JSON-ready dict."""

    @classmethod
    def from_dict(cls, d: dict) -> Persisted:
        """The state of ``d`` (``from_dict(s.to_dict())`` equals ``s``)."""


def merge_all(states: Iterable[State]) -> State | None:
    """s₁ + s₂ + … + sₙ, folded left in the given order; None for no states.

    Examples
    --------
    >>> import numpy as np
    >>> from dr_scale.ope.moments import Moments
    >>> merge_all([Moments.of(np.array([1.0])), Moments.of(np.array([3.0]))]).mean.tolist()
    [2.0]
    >>> merge_all([]) is None
    True
    """
    states = list(states)
    return functools.reduce(operator.add, states) if states else None


def tree_reduce(states: Any, merge: Callable[[list[Any]], Any] = merge_all, split_every: int = SPLIT_EVERY) -> Any:
    """The merge of a Dask collection of states, as a Dask object, down Dask's tree (``Bag.reduction``).

    ``states`` is a Dask bag of states, or a list of Dask delayed states (a bag of one state per partition).
    ``merge`` turns a list of states into their merge (default :func:`merge_all`); it runs at every node:
    once on each partition's states, then on consecutive runs of ``split_every`` results, level by level,
    until at most ``split_every`` are left for the root. The tree depends on the number of partitions only,
    so the result has the same bits on any scheduler and any number of workers.

    Examples
    --------
    >>> import dask
    >>> import numpy as np
    >>> from dr_scale.ope.moments import Moments
    >>> states = [dask.delayed(Moments.of)(np.array([float(x)])) for x in range(20)]
    >>> total = dask.compute(tree_reduce(states), scheduler="sync")[0]
    >>> total.n, total.mean.tolist()
    (20, [9.5])
    """
    if isinstance(states, list):
        import dask
        import dask.bag as db

        states = db.from_delayed([dask.delayed(_partition)(s) for s in states])
    return states.reduction(merge, merge, split_every=split_every)


def parts_bag(parts: list) -> Any:
    """A Dask bag of ``parts`` (a log's part files, or what reads each) to map each part's state over and
    :func:`tree_reduce` (or gather, as the report does): one part per partition (a task), or, from
    :data:`GROUP_FROM` parts on, runs of :data:`SPLIT_EVERY` consecutive parts.

    A run's task merges its parts' states in order (the reduction's ``merge`` of its partition), which is the node
    of the tree's first level over those parts in a bag of one part per partition: the same merges in the same
    order, so the result has the same bits either way, and a cluster's scheduler handles an eighth of the tasks of
    a log of many parts (at 10^10 rows, 190,000 parts: docs/deploy.md, "per-task cost o"). Below GROUP_FROM a task
    per part keeps every worker busy on a log of a few parts. The bag's elements are the parts either way.

    Examples
    --------
    >>> parts_bag(list(range(20))).npartitions, parts_bag(list(range(2000))).npartitions
    (20, 250)
    """
    import dask.bag as db

    return db.from_sequence(parts, partition_size=SPLIT_EVERY if len(parts) >= GROUP_FROM else 1)


def _partition(state: Any) -> list[Any]:
    """A partition of one state."""
    return [state]
