"""dr-scale: doubly robust off-policy evaluation and learning for contextual bandits.

Implements Dudík, Langford & Li, "Doubly Robust Policy Evaluation and Learning"
(ICML 2011) as a library over numpy arrays and Parquet logs, local or on Dask.

The names below are the public API (reference: docs/api.md); policy learners are in
:mod:`dr_scale.learning`. Other modules are the library's internals.
"""

import importlib

#: Each public name and the module that defines it. The package imports them on first use (PEP 562), so
#: ``import dr_scale.<module>`` — a command's start, a Dask worker unpickling a task — loads that module's
#: own imports only, not scipy.special, pandas and the rest of the API.
_API = {
    "dr_scale.ope.estimators": ("IPS", "SNDR", "SNIPS", "ClippedDR", "DirectMethod", "DoublyRobust", "Estimate",
                            "Estimator", "SwitchDR", "DRos", "SubGaussianIPS", "SubGaussianDR", "IPSTuning",
                            "DRTuning", "SwitchDRTuning", "make_estimators",
                            "MIPS", "SNMIPS", "ReplayMethod", "BalancedIPW"),
    "dr_scale.ope.evaluation": ("Comparison", "ComparisonResult", "Evaluation", "EvaluationResult",
                            "evaluate_dataframe", "evaluate_log", "evaluate_partitions"),
    "dr_scale.reward.fitting": ("FitSettings", "fit_reward_model"),
    "dr_scale.learning.learn": ("LearnSettings", "learn_policy"),
    "dr_scale.logs.contract": ("LogDataError", "Partition"),
    "dr_scale.logs.reading": ("read_log",),
    "dr_scale.logs.writing": ("write_log",),
    "dr_scale.logs.catalogue": ("Catalogue", "read_catalogue"),
    "dr_scale.logs.filters": ("LogFilter",),
    "dr_scale.logs.opened": ("OpenedLog", "open_log"),
    "dr_scale.logs.importer": ("from_dask", "from_pandas", "import_log"),
    "dr_scale.policies": ("ActionColumnPolicy", "CallablePolicy", "ConstantPolicy", "EpsilonGreedyPolicy",
                          "LinearPolicy", "LoggingPolicy", "Policy", "ProbsColumnPolicy", "SoftmaxPolicy",
                          "TopKPolicy", "UniformPolicy", "parse_policy",
                          "SparsePolicy", "ItemScorerPolicy", "SparseProbs", "ActionDistribution"),
    "dr_scale.reward.models": ("LinearRewardModel", "RewardModel"),
    "dr_scale.reward.shared": ("SharedRidgeRewardModel", "SharedLogisticRewardModel", "fit_shared_model",
                               "fit_shared_ridge"),
    "dr_scale.propensity.model": ("PropensityModel",),
    "dr_scale.propensity.fitting": ("fit_propensity_model",),
}
_MODULE_OF = {name: module for module, names in _API.items() for name in names}


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'dr_scale' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups find it directly
    return value


def __dir__():
    return sorted(set(globals()) | set(_MODULE_OF))


__version__ = "0.1.0"
__all__ = [
    # estimators (paper Sec. 2) and their results
    "DirectMethod", "IPS", "DoublyRobust", "SNIPS", "SNDR", "SwitchDR", "ClippedDR", "Estimator", "Estimate",
    "DRos", "SubGaussianIPS", "SubGaussianDR", "IPSTuning", "DRTuning", "SwitchDRTuning", "make_estimators",
    # marginalized estimators over the actions' embedding (large action spaces)
    "MIPS", "SNMIPS",
    # estimators without the logging propensity
    "ReplayMethod", "BalancedIPW",
    # evaluating a policy on a log
    "Evaluation", "EvaluationResult", "evaluate_log", "evaluate_dataframe", "evaluate_partitions",
    "Comparison", "ComparisonResult",
    # target policies
    "Policy", "ConstantPolicy", "TopKPolicy", "UniformPolicy", "EpsilonGreedyPolicy", "LoggingPolicy",
    "ActionColumnPolicy", "ProbsColumnPolicy", "CallablePolicy", "LinearPolicy", "SoftmaxPolicy", "parse_policy",
    "SparsePolicy", "ItemScorerPolicy", "SparseProbs", "ActionDistribution",
    # the reward model ρ̂
    "RewardModel", "LinearRewardModel", "FitSettings", "fit_reward_model",
    "SharedRidgeRewardModel", "SharedLogisticRewardModel", "fit_shared_model", "fit_shared_ridge",
    # the logging policy estimated from a log
    "PropensityModel", "fit_propensity_model",
    # learning a policy from a log (paper Sec. 4)
    "LearnSettings", "learn_policy",
    # the logged-data contract, and raw tables into it
    "read_log", "write_log", "Partition", "LogDataError", "LogFilter", "OpenedLog", "open_log", "import_log",
    "from_pandas", "from_dask",
    "Catalogue", "read_catalogue",
]
