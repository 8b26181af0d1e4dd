"""Target policies π(a|x): what the estimators evaluate, one idea per module.

A policy (:class:`~dr_scale.policies.base.Policy`) answers π(· | x_i) for the rows of a
:class:`~dr_scale.logs.contract.Partition` through one method, ``distribution(part, k)``, whose
result is one type, an :class:`~dr_scale.policies.distributions.ActionDistribution` (the (n, k)
probabilities, one action per row, each row's listed actions, or a uniform mixture in closed form
behind it). The kinds (``spec`` holds the grammar):

* ``constant:A`` — always action A (the paper's visits experiment uses π ≡ 1); on a log with
  an action vocabulary (:func:`dr_scale.logs.listing.action_vocabulary`) A is the action's own
  value (``constant:item_42``), and ``constant:#N`` is the action with id N on any log;
* ``topk:A,B,…`` — uniform over the listed actions (values or ``#N`` ids, as ``constant``):
  π(a|x) = 1/m for each of the m listed actions;
* ``uniform`` — π(a|x) = 1/k over the log's k actions;
* ``epsilon-greedy:EPS:POLICY`` — π_ε(a|x) = ε/k + (1 − ε) π(a|x), for any other spec POLICY
  and ε ∈ [0, 1];
* ``logging`` — the logging policy itself, π = π₀: every row's weight π₀(a_i|x_i)/p̂_i is 1 and
  ρ̂_π(x_i) is ρ̂_{a_i}(x_i), the model at the logged action (π₀'s other probabilities are not
  in the log), so IPS, SNIPS and DR all give the mean logged reward;
* ``column:NAME`` — the target action stored per row in an integer column;
* ``probs:NAME`` — the target probabilities stored per row in a list<float> column;
* ``callable:module:function`` — ``function(X, row_id)`` with X the partition's CSR
  features, returning (n,) actions or (n, k) probabilities;
* ``linear:POLICY.npz`` — a learned linear policy π(x) = argmax_a x·coef[:, a] + intercept[a]
  (ties to the lowest action), from the ``.npz`` file ``dr-scale learn`` writes (keys
  ``coef`` (d, k), ``intercept`` (k,) and ``metadata``, a JSON string);
* ``softmax:POLICY.npz:T`` — the same scores as a stochastic policy with temperature
  T > 0: π(a|x) = exp(s_a(x)/T) / Σ_b exp(s_b(x)/T);
* ``sparse:NAME`` — per row, the actions the policy may take and their probabilities, stored in a
  list<struct<action, prob>> column (:class:`SparsePolicy`);
* ``logged:OTHER_LOGS[:frequencies|:model]`` — the policy that wrote another log: its per-slot action
  frequencies or a propensity model fitted on it, by a documented rule (:class:`LoggedPolicy`);
* ``scorer:POLICY.npz`` — a scorer over the actions' features, s(x, a) = x·coef·f_a + bias_a, that
  takes the top K actions with softmax probabilities (:class:`ItemScorerPolicy`).

The last two answer with :class:`SparseProbs` — each row's listed actions and their
probabilities, (n, K) arrays — and ``uniform``, ``topk`` and ``epsilon-greedy`` over them in closed
form, never an (n, k) matrix, so a log with 10^4–10^6 actions is evaluated in memory O(n·K).

The file of a linear, softmax or scorer policy may be any fsspec URL (``parse_policy``'s
``storage_options``, else credentials from the environment); it is read once, when the spec is
parsed, so a missing or malformed file is an error before any log is read.
"""

from dr_scale.policies.base import Policy, PolicyMismatch, parameters_digest
from dr_scale.policies.columns import ActionColumnPolicy, ProbsColumnPolicy, SparsePolicy
from dr_scale.policies.distributions import (
    ActionDistribution,
    ActionValues,
    ArrayValues,
    ChosenActions,
    DenseProbs,
    SparseProbs,
    UniformMixture,
)
from dr_scale.policies.function import CallablePolicy
from dr_scale.policies.linear import LinearPolicy, SoftmaxPolicy
from dr_scale.policies.logged import LoggedPolicy, LoggedStats
from dr_scale.policies.scorer import ItemScorerPolicy, top_k_softmax
from dr_scale.policies.simple import ConstantPolicy, EpsilonGreedyPolicy, LoggingPolicy, TopKPolicy, UniformPolicy
from dr_scale.policies.spec import parse_policy

__all__ = [
    "ActionDistribution", "ActionValues", "ArrayValues", "ChosenActions", "DenseProbs",
    "ActionColumnPolicy", "CallablePolicy", "ConstantPolicy", "EpsilonGreedyPolicy", "ItemScorerPolicy", "LinearPolicy",
    "LoggedPolicy", "LoggedStats",
    "LoggingPolicy", "Policy", "PolicyMismatch", "ProbsColumnPolicy", "SoftmaxPolicy", "SparsePolicy", "SparseProbs",
    "TopKPolicy", "UniformMixture", "UniformPolicy", "parameters_digest", "parse_policy", "top_k_softmax",
]
