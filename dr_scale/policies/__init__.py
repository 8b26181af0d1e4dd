"""Target policies π(a|x): what the estimators evaluate, one idea per module.

A policy gives its decisions on a :class:`~dr_scale.logs.contract.Partition` (``decisions``):
the (n,) actions of a deterministic policy, or the (n, k) action probabilities of a
stochastic one; ``probs`` gives the (n, k) matrix either way (one-hot rows for a
deterministic policy). The kinds:

* ``constant:A`` — always action A (the paper's visits experiment uses π ≡ 1); on a log with
  an action vocabulary (:func:`dr_scale.logs.contract.action_vocabulary`) A is the action's own
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
* ``scorer:POLICY.npz`` — a scorer over the actions' features, s(x, a) = x·coef·f_a + bias_a, that
  takes the top K actions with softmax probabilities (:class:`ItemScorerPolicy`).

The last two give their decisions as :class:`SparseProbs` — each row's listed actions and their
probabilities, (n, K) arrays — never an (n, k) matrix, so a log with 10^4–10^6 actions is evaluated
in memory O(n·K); every estimator works on them (:meth:`dr_scale.ope.estimators.RowInputs.from_sparse`).

The file of a linear or softmax policy may be any fsspec URL (credentials from the
environment); it is read when the spec is parsed, so a missing or malformed file is
an error before any log is read.
"""

from dr_scale.policies.base import Policy, PolicyMismatch, parameters_digest
from dr_scale.policies.columns import ActionColumnPolicy, ProbsColumnPolicy, SparsePolicy
from dr_scale.policies.distributions import SparseProbs, UniformMixture
from dr_scale.policies.function import CallablePolicy
from dr_scale.policies.linear import LinearPolicy, SoftmaxPolicy
from dr_scale.policies.scorer import ItemScorerPolicy, top_k_softmax
from dr_scale.policies.simple import ConstantPolicy, EpsilonGreedyPolicy, LoggingPolicy, TopKPolicy, UniformPolicy
from dr_scale.policies.spec import parse_policy

__all__ = [
    "ActionColumnPolicy", "CallablePolicy", "ConstantPolicy", "EpsilonGreedyPolicy", "ItemScorerPolicy", "LinearPolicy",
    "LoggingPolicy", "Policy", "PolicyMismatch", "ProbsColumnPolicy", "SoftmaxPolicy", "SparsePolicy", "SparseProbs",
    "TopKPolicy", "UniformMixture", "UniformPolicy", "parameters_digest", "parse_policy", "top_k_softmax",
]
