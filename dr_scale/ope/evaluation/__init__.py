"""Evaluate a target policy on a logged data set: map partitions to states, tree-reduce.

For each partition the per-row quantities of :mod:`dr_scale.ope.estimators` are formed
from the policy's probabilities and the reward model's predictions; every estimator
turns them into a :class:`~dr_scale.ope.moments.Moments` state and the weights into
:class:`~dr_scale.ope.diagnostics.WeightStats`. With a ``baseline`` (another policy, or
``"logging"``: the logged rewards' mean), every estimator also gets the joint state of
its terms for both policies on the same rows (:class:`~dr_scale.ope.estimators.Difference`),
which gives V(A) − V(B) with a paired standard error. States merge with ``+`` in a Dask
tree reduction (``dask.bag.reduction``), so the same code runs on numpy arrays, one
file, a folder or URL of partitions, a Dask DataFrame, locally or on a cluster.

One module per idea:

* :mod:`.states` — :class:`PolicyState`, one policy's mergeable state, and :class:`PartitionSource`, a part read
  into a state;
* :mod:`.results` — :class:`EvaluationResult` and its rendering (:func:`estimate_dict`, ``to_dict``, ``table``);
* :mod:`.specification` — :class:`Evaluation`, what is evaluated (frozen), a partition's state and the result;
* :mod:`.rows` — the per-row quantities an evaluation forms on a partition from π(· | x) as one
  :class:`~dr_scale.policies.distributions.ActionDistribution`: p̂_i, w_i, ρ̂_π(x_i), ρ̂_{a_i}(x_i), the marginal
  and importance weights;
* :mod:`.comparison` — several policies on the same rows: :class:`Comparison`, :class:`ComparisonState`,
  :class:`ComparisonResult`;
* :mod:`.slots` — estimates per slot of a ranking, pooled and per impression (:class:`SlotResult`);
* :mod:`.reading` — an evaluation completed by the log's facts (:func:`with_log_defaults`) and run on a log
  (:func:`evaluate_log`, :func:`log_states`), a Dask DataFrame (:func:`evaluate_dataframe`) or partitions in
  memory (:func:`evaluate_partitions`).
"""

from dr_scale.ope.evaluation.comparison import Comparison, ComparisonResult, ComparisonState
from dr_scale.ope.evaluation.reading import (
    evaluate_dataframe,
    evaluate_log,
    evaluate_partitions,
    log_states,
    with_log_defaults,
)
from dr_scale.ope.evaluation.results import EvaluationResult, estimate_dict
from dr_scale.ope.evaluation.slots import SlotResult
from dr_scale.ope.evaluation.specification import EMBEDDING_PROPENSITY, IMPORTANCE_WEIGHT, LOGGING, Evaluation
from dr_scale.ope.evaluation.states import PartitionSource, PolicyState

__all__ = [
    "EMBEDDING_PROPENSITY", "IMPORTANCE_WEIGHT", "LOGGING", "Comparison", "ComparisonResult", "ComparisonState",
    "Evaluation", "EvaluationResult", "PartitionSource", "PolicyState", "SlotResult", "estimate_dict",
    "evaluate_dataframe",
    "evaluate_log", "evaluate_partitions", "log_states", "with_log_defaults",
]
