"""Policy learning from logged bandit data (paper, Sec. 4 and Appendices A–B).

Flow: :mod:`.impute` (every action's reward from one logged reward: DM / IPS / DR) →
a cost-sensitive learner on the imputed rewards: :mod:`.dlm` (direct loss
minimization), :mod:`.filter_tree` (the Filter Tree), or — for logs out of core —
:mod:`.learn` (one ridge score per action, :func:`learn_policy`); the
:mod:`.offset_tree` learns from the logged rows directly. The learners follow
scikit-learn's conventions (:mod:`.base`) and take rewards (higher is better) and
dense or sparse X. A learned linear policy is a
:class:`dr_scale.policies.LinearPolicy`, saved as ``.npz`` that ``dr-scale evaluate``
and ``dr-scale report`` read (``--policy linear:POLICY.npz``).
"""

import importlib

#: The learners and where they live, imported on first use (the learners import scikit-learn,
#: which a command that does not use them should not pay for at start-up).
_EXPORTS = {"DirectLossMinimization": "dlm", "FilterTree": "filter_tree", "OffsetTree": "offset_tree",
            "impute_rewards": "impute", "learn_policy": "learn"}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'dr_scale.learning' has no attribute {name!r}")
    return getattr(importlib.import_module(f"dr_scale.learning.{_EXPORTS[name]}"), name)
