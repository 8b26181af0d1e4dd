"""dr-scale: doubly robust off-policy evaluation and learning for contextual bandits.

Implements Dudík, Langford & Li, "Doubly Robust Policy Evaluation and Learning"
(ICML 2011) as a library over numpy arrays and Parquet logs, local or on Dask.

The names below are the public API (reference: docs/api.md); policy learners are in
:mod:`dr_scale.learning`. Other modules are the library's internals.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing itself is not imported at run time: a command's start stays short
if TYPE_CHECKING:
    from typing import Any

#: The public API, written once: each public name by the module that defines it (``__all__`` lists them in this
#: order). The package imports them on first use (PEP 562), so ``import dr_scale.<module>`` — a command's start, a
#: Dask worker unpickling a task — loads that module's own imports only, not scipy.special, pandas and the rest of
#: the API.
_API: dict[str, tuple[str, ...]] = {
    # estimators (paper Sec. 2) and their results; marginalized (MIPS) and propensity-free (RM, BIPW) ones
    "dr_scale.ope.estimators": ("DirectMethod", "IPS", "DoublyRobust", "SNIPS", "SNDR", "SwitchDR", "ClippedDR",
                                "Estimator", "Estimate", "DRos", "SubGaussianIPS", "SubGaussianDR", "IPSTuning",
                                "DRTuning", "SwitchDRTuning", "make_estimators", "MIPS", "SNMIPS", "ReplayMethod",
                                "BalancedIPW"),
    # evaluating a policy on a log
    "dr_scale.ope.evaluation": ("Evaluation", "EvaluationResult", "evaluate_log", "evaluate_dataframe",
                                "evaluate_partitions", "Comparison", "ComparisonResult", "SlotResult"),
    # target policies
    "dr_scale.policies": ("Policy", "ConstantPolicy", "TopKPolicy", "UniformPolicy", "EpsilonGreedyPolicy",
                          "LoggingPolicy", "ActionColumnPolicy", "ProbsColumnPolicy", "CallablePolicy",
                          "LinearPolicy", "SoftmaxPolicy", "parse_policy", "SparsePolicy", "ItemScorerPolicy",
                          "SparseProbs", "ActionDistribution", "LoggedPolicy"),
    # the reward model ρ̂ and the settings of every cross-fitted fit
    "dr_scale.reward.models": ("RewardModel", "LinearRewardModel", "LogisticRewardModel"),
    "dr_scale.reward.files": ("load_reward_model",),
    "dr_scale.crossfit.settings": ("FitSettings",),
    "dr_scale.reward.fitting": ("fit_reward_model",),
    "dr_scale.reward.shared": ("SharedRidgeRewardModel", "SharedLogisticRewardModel", "fit_shared_model",
                               "fit_shared_ridge"),
    # the logging policy estimated from a log
    "dr_scale.propensity.model": ("PropensityModel",),
    "dr_scale.propensity.fitting": ("fit_propensity_model",),
    # learning a policy from a log (paper Sec. 4)
    "dr_scale.learning.learn": ("LearnSettings", "learn_policy"),
    # the logged-data contract, and raw tables into it
    "dr_scale.logs.contract": ("Partition", "LogDataError"),
    "dr_scale.logs.reading": ("read_log",),
    "dr_scale.logs.writing": ("write_log",),
    "dr_scale.logs.catalogue": ("Catalogue", "read_catalogue"),
    "dr_scale.logs.filters": ("LogFilter",),
    "dr_scale.logs.opened": ("OpenedLog", "open_log"),
    "dr_scale.logs.importing": ("import_log", "ImportSummary", "from_pandas", "from_dask"),
    # the errors that are the user's to fix (any other error is a bug of dr-scale), and an iterative fit stopped
    # before its tolerance
    "dr_scale.core.errors": ("UserError", "ParameterError", "ConvergenceWarning"),
}
_MODULE_OF = {name: module for module, names in _API.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'dr_scale' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups find it directly
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_MODULE_OF))


__version__ = "0.1.0"
__all__ = [name for names in _API.values() for name in names]
