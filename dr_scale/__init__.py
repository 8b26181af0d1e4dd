"""dr-scale: doubly robust off-policy evaluation and learning for contextual bandits.

Implements Dudík, Langford & Li, "Doubly Robust Policy Evaluation and Learning"
(ICML 2011) as a library over numpy arrays and Parquet logs, local or on Dask.
"""

from dr_scale.estimators import (
    IPS,
    SNDR,
    SNIPS,
    ClippedDR,
    DirectMethod,
    DoublyRobust,
    Estimate,
    SwitchDR,
)
from dr_scale.evaluation import Evaluation, evaluate_dataframe, evaluate_log
from dr_scale.learning.reduction import learn_policy

__version__ = "0.1.0"
__all__ = [
    "DirectMethod", "IPS", "DoublyRobust", "SNIPS", "SNDR", "SwitchDR", "ClippedDR", "Estimate",
    "Evaluation", "evaluate_log", "evaluate_dataframe", "learn_policy",
]
