"""dr-scale: doubly robust off-policy evaluation and learning for contextual bandits.

Implements Dudík, Langford & Li, "Doubly Robust Policy Evaluation and Learning"
(ICML 2011) as a library over numpy arrays and Parquet logs, local or on Dask.

The names below are the public API (reference: docs/api.md); policy learners are in
:mod:`dr_scale.learning`. Other modules are the library's internals.
"""

from dr_scale.estimators import (
    IPS,
    SNDR,
    SNIPS,
    ClippedDR,
    DirectMethod,
    DoublyRobust,
    Estimate,
    Estimator,
    SwitchDR,
    make_estimators,
)
from dr_scale.evaluation import Evaluation, EvaluationResult, evaluate_dataframe, evaluate_log, evaluate_partitions
from dr_scale.fitting import fit_reward_model
from dr_scale.learning.reduction import learn_policy
from dr_scale.logdata import LogDataError, Partition, read_log, write_log
from dr_scale.policies import (
    ActionColumnPolicy,
    CallablePolicy,
    ConstantPolicy,
    LinearPolicy,
    Policy,
    ProbsColumnPolicy,
    SoftmaxPolicy,
    parse_policy,
)
from dr_scale.reward_models import LinearRewardModel, RewardModel

__version__ = "0.1.0"
__all__ = [
    # estimators (paper Sec. 2) and their results
    "DirectMethod", "IPS", "DoublyRobust", "SNIPS", "SNDR", "SwitchDR", "ClippedDR", "Estimator", "Estimate",
    "make_estimators",
    # evaluating a policy on a log
    "Evaluation", "EvaluationResult", "evaluate_log", "evaluate_dataframe", "evaluate_partitions",
    # target policies
    "Policy", "ConstantPolicy", "ActionColumnPolicy", "ProbsColumnPolicy", "CallablePolicy", "LinearPolicy",
    "SoftmaxPolicy", "parse_policy",
    # the reward model ρ̂
    "RewardModel", "LinearRewardModel", "fit_reward_model",
    # learning a policy from a log (paper Sec. 4)
    "learn_policy",
    # the logged-data contract
    "read_log", "write_log", "Partition", "LogDataError",
]
