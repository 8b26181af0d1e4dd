"""Off-policy value estimators as mergeable statistics.

Notation (Dudík, Langford & Li 2011, Sec. 2): a logged row is (x_i, a_i, r_i, p̂_i)
with p̂_i the logging policy's (estimated) probability of a_i; π(a|x) is the target
policy (deterministic policies are one-hot); ρ̂_a(x) is the reward model. Every
estimator here is built from four per-row quantities (:class:`RowInputs`):

    r_i,    w_i = π(a_i|x_i) / p̂_i,    ρ̂_π(x_i) = Σ_a π(a|x_i) ρ̂_a(x_i),    ρ̂_{a_i}(x_i).

Each estimator is a small frozen dataclass — its parameters are its fields, so its
``repr`` (and the report's cache fingerprint) carries them — with a per-row term
(``terms``) and a function of the terms' means (``value_of``). The state of a batch
of rows is a :class:`~dr_scale.ope.moments.Moments` of those terms, which merges with
``+``; the estimate, its standard error (the delta method, exact for the plain means)
and a normal or an empirical-likelihood interval (:mod:`dr_scale.ope.intervals`) come from
the merged state alone. The same classes serve numpy arrays (``estimate``), Parquet
partitions and Dask (``state`` + ``result``).

One module per idea, as Open Bandit Pipeline splits its estimators by family:

* :mod:`.inputs` — :class:`RowInputs`; :mod:`.estimate` — :class:`Estimate` and its intervals;
  :mod:`.base` — the abstract :class:`Estimator`;
* :mod:`.direct` — DM; :mod:`.ips` — IPS, SNIPS; :mod:`.dr` — DR, SNDR;
* :mod:`.shrinkage` — the base of IPS and DR with a modified weight ŵ_λ and obp's rules for choosing λ;
* :mod:`.tuning` — IPSTuning, DRTuning, SwitchDRTuning, DRos, SwitchDR and ClippedDR;
* :mod:`.subgaussian` — SubGaussianIPS, SubGaussianDR; :mod:`.embed` — MIPS, SNMIPS and the marginal weights;
* :mod:`.replay` — RM; :mod:`.balanced` — BIPW; :mod:`.difference` — the logging policy's value and paired
  differences;
* :mod:`.slate` — the slate (ranking) estimators over impressions: standard, independent and reward-interaction
  IPS, cascade DR, their self-normalized forms, the pseudoinverse (:class:`SlateInputs`);
* :mod:`.spec` — the estimators by name and the spec grammar (:func:`make_estimators`).
"""

from dr_scale.ope.estimators.balanced import BalancedIPW
from dr_scale.ope.estimators.base import Estimator
from dr_scale.ope.estimators.difference import Difference, OnPolicy
from dr_scale.ope.estimators.direct import DirectMethod
from dr_scale.ope.estimators.dr import SNDR, DoublyRobust
from dr_scale.ope.estimators.embed import MIPS, SNMIPS, marginal_weights, sparse_marginal_weights
from dr_scale.ope.estimators.estimate import INTERVAL_METHODS, Estimate, Projected, fold_jackknife
from dr_scale.ope.estimators.inputs import RowInputs
from dr_scale.ope.estimators.ips import IPS, SNIPS
from dr_scale.ope.estimators.replay import ReplayMethod
from dr_scale.ope.estimators.shrinkage import (
    CLIPPING_LAMBDAS,
    OBP_TUNING_DELTA,
    SUBGAUSSIAN_LAMBDAS,
    TUNING_METHODS,
    Shrinkage,
    grid_moments,
)
from dr_scale.ope.estimators.slate import (
    SLATE_ESTIMATORS,
    SelfNormalizedSlateIndependentIPS,
    SelfNormalizedSlateRewardInteractionIPS,
    SelfNormalizedSlateStandardIPS,
    SlateCascadeDR,
    SlateEstimator,
    SlateIndependentIPS,
    SlateInputs,
    SlateOnPolicy,
    SlatePseudoInverse,
    SlateRewardInteractionIPS,
    SlateStandardIPS,
)
from dr_scale.ope.estimators.spec import (
    ESTIMATORS,
    STANDARD_ESTIMATORS,
    make_estimators,
    parse_estimator,
    parse_estimator_list,
)
from dr_scale.ope.estimators.subgaussian import SubGaussianDR, SubGaussianIPS
from dr_scale.ope.estimators.tuning import (
    TUNING_GRID,
    ClippedDR,
    DRos,
    DRTuning,
    IPSTuning,
    SwitchDR,
    SwitchDRTuning,
)

__all__ = [
    "CLIPPING_LAMBDAS", "ESTIMATORS", "INTERVAL_METHODS", "IPS", "MIPS", "OBP_TUNING_DELTA", "SNDR", "SNIPS",
    "SNMIPS", "STANDARD_ESTIMATORS", "SUBGAUSSIAN_LAMBDAS", "TUNING_GRID", "TUNING_METHODS",
    "BalancedIPW", "ClippedDR", "DRTuning", "DRos", "Difference", "DirectMethod", "DoublyRobust", "Estimate",
    "Estimator", "IPSTuning", "OnPolicy", "Projected", "ReplayMethod", "RowInputs", "Shrinkage", "SubGaussianDR",
    "SubGaussianIPS", "SwitchDR", "SwitchDRTuning", "fold_jackknife", "grid_moments", "make_estimators",
    "marginal_weights", "parse_estimator", "parse_estimator_list", "sparse_marginal_weights",
    "SLATE_ESTIMATORS", "SelfNormalizedSlateIndependentIPS", "SelfNormalizedSlateRewardInteractionIPS",
    "SelfNormalizedSlateStandardIPS", "SlateCascadeDR", "SlateEstimator", "SlateIndependentIPS", "SlateInputs",
    "SlateOnPolicy", "SlatePseudoInverse", "SlateRewardInteractionIPS", "SlateStandardIPS",
]
