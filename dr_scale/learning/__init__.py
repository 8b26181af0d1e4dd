"""Policy learning from logged bandit data (paper, Sec. 4 and Appendices A–B).

Flow: :mod:`.impute` (every action's reward from one logged reward: DM / IPS / DR) →
a cost-sensitive learner on the imputed rewards: :mod:`.dlm` (direct loss
minimization), :mod:`.filter_tree` (the Filter Tree), or — for logs out of core —
:mod:`.reduction` (one ridge score per action, :func:`learn_policy`); the
:mod:`.offset_tree` learns from the logged rows directly. The learners follow
scikit-learn's conventions (:mod:`.base`) and take rewards (higher is better) and
dense or sparse X. A learned linear policy is a
:class:`dr_scale.policies.LinearPolicy`, saved as ``.npz`` that ``dr-scale evaluate``
and ``dr-scale report`` read (``--policy linear:POLICY.npz``).
"""

from dr_scale.learning.dlm import DirectLossMinimization
from dr_scale.learning.filter_tree import FilterTree
from dr_scale.learning.impute import impute_rewards
from dr_scale.learning.offset_tree import OffsetTree

__all__ = ["DirectLossMinimization", "FilterTree", "OffsetTree", "impute_rewards"]
