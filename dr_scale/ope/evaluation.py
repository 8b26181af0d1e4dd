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
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace

import dask.bag as db
import numpy as np
import pyarrow as pa

from dr_scale.core.errors import ParameterError, UserError
from dr_scale.core.keyed_random import row_hash
from dr_scale.core.numbers import estimate, number
from dr_scale.logs.catalogue import Catalogue
from dr_scale.logs.contract import LogDataError, Partition, numeric_values, propensity_fault
from dr_scale.logs.filters import LogFilter
from dr_scale.logs.listing import SPEC_FILE
from dr_scale.logs.opened import OpenedLog, open_log
from dr_scale.logs.reading import partition_from_table, read_partition
from dr_scale.logs.writing import table_from_pandas
from dr_scale.ope.diagnostics import DEFAULT_MIN_ESS_RATIO, DEFAULT_MIN_SUPPORT, Coverage, WeightStats
from dr_scale.ope.estimators import (
    Difference,
    Estimate,
    Estimator,
    OnPolicy,
    RowInputs,
    make_estimators,
)
from dr_scale.ope.moments import Moments
from dr_scale.outofcore.compute import compute
from dr_scale.outofcore.mergeable import merge_all, tree_reduce
from dr_scale.policies import ActionDistribution, ChosenActions, Policy, parse_policy
from dr_scale.propensity.diagnostics import DEFAULT_PROPENSITY_FLOOR, PropensityState
from dr_scale.reward.models import (
    check_fitted_log,
    check_model_actions,
    checks_fitted_log,
    mean_over_actions,
    on_other_half,
    predict_columns,
    predict_pairs,
)

#: The log column of the logging policy's probability of the logged action's embedding, p_π₀(e(a_i)|x_i) (MIPS).
EMBEDDING_PROPENSITY = "embedding_propensity"

#: The log column of the estimated importance weights ŵ(x_i, a_i) of balanced IPW (BIPW), for the evaluated policy.
IMPORTANCE_WEIGHT = "importance_weight"

#: The baseline that stands for the logging policy: its value is the logged rewards' mean.
LOGGING = "logging"



@dataclass(frozen=True)
class _ModelValues:
    """The reward model's ρ̂_a(x_i) of a partition's rows as :class:`~dr_scale.policies.distributions.ActionValues`,
    by blocks of actions (:func:`~dr_scale.reward.models.predict_columns`, ``predict_pairs``, ``mean_over_actions``),
    each row by the fold model that did not see it (``row_id``)."""

    model: object
    X: object
    row_id: np.ndarray
    k: int

    def columns(self, actions: np.ndarray) -> np.ndarray:
        return predict_columns(self.model, self.X, actions, self.row_id)

    def pairs(self, actions: np.ndarray) -> np.ndarray:
        return predict_pairs(self.model, self.X, actions, self.row_id)

    def mean(self) -> np.ndarray:
        return mean_over_actions(self.model, self.X, self.k, self.row_id)

@dataclass(frozen=True)
class PolicyState:
    """Merged states of every estimator plus the weight diagnostics (and the paired differences)."""

    estimators: dict[str, Moments]
    weights: WeightStats
    differences: dict[str, Moments] = field(default_factory=dict)
    baseline_weights: WeightStats | None = None  # the baseline policy's (not for "logging")
    coverage: Coverage | None = None  # logged rows and π's mass per action
    rows_hash: int | None = None  # Σ row_hash mod 2⁶⁴ (the fit's fingerprint), for a cross-fitted model's check
    propensity: PropensityState | None = None  # the estimated propensities' diagnostics (with a propensity model)
    # MIPS's own weights w(x_i, e_i) = p_π(e_i|x_i) / p_π₀(e_i|x_i), the policy's and the baseline's (None without
    # a marginalized estimator)
    marginal_weights: WeightStats | None = None
    baseline_marginal_weights: WeightStats | None = None

    def __add__(self, other: PolicyState) -> PolicyState:
        def both(a, b):
            return None if a is None or b is None else a + b

        hashed = self.rows_hash is not None and other.rows_hash is not None
        return PolicyState({k: v + other.estimators[k] for k, v in self.estimators.items()},
                           self.weights + other.weights,
                           {k: v + other.differences[k] for k, v in self.differences.items()},
                           both(self.baseline_weights, other.baseline_weights),
                           both(self.coverage, other.coverage),
                           (self.rows_hash + other.rows_hash) % 2 ** 64 if hashed else None,
                           both(self.propensity, other.propensity),
                           both(self.marginal_weights, other.marginal_weights),
                           both(self.baseline_marginal_weights, other.baseline_marginal_weights))

    def marginal_view(self) -> PolicyState:
        """This state with MIPS's marginal weights in place of w_i = π(a_i|x_i) / p̂_i (itself without them): the
        diagnostics of a report whose primary estimator is marginalized."""
        if self.marginal_weights is None:
            return self
        return replace(self, weights=self.marginal_weights,
                       baseline_weights=(self.baseline_marginal_weights if self.baseline_marginal_weights is not None
                                         else self.baseline_weights))

    @property
    def rows(self) -> int:
        return self.weights.n

    def to_dict(self) -> dict:
        out = {"estimators": {k: v.to_dict() for k, v in self.estimators.items()}, "weights": self.weights.to_dict(),
               "differences": {k: v.to_dict() for k, v in self.differences.items()},
               "baseline_weights": None if self.baseline_weights is None else self.baseline_weights.to_dict()}
        if self.coverage is not None:
            out["coverage"] = self.coverage.to_dict()
        if self.rows_hash is not None:
            out["rows_hash"] = str(self.rows_hash)
        if self.propensity is not None:
            out["propensity"] = self.propensity.to_dict()
        for key in ("marginal_weights", "baseline_marginal_weights"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key).to_dict()
        return out

    @classmethod
    def from_dict(cls, d: dict) -> PolicyState:
        base = d.get("baseline_weights")
        return cls({k: Moments.from_dict(v) for k, v in d["estimators"].items()}, WeightStats.from_dict(d["weights"]),
                   {k: Moments.from_dict(v) for k, v in d["differences"].items()},
                   None if base is None else WeightStats.from_dict(base),
                   Coverage.from_dict(d["coverage"]) if "coverage" in d else None,
                   int(d["rows_hash"]) if "rows_hash" in d else None,
                   PropensityState.from_dict(d["propensity"]) if "propensity" in d else None,
                   *(WeightStats.from_dict(d[key]) if d.get(key) is not None else None
                     for key in ("marginal_weights", "baseline_marginal_weights")))


def estimate_dict(e: Estimate, alpha: float, interval: str, insufficient: bool = False) -> dict:
    """value, stderr, interval (``ci``), confidence sequence (``cs``), n, the "insufficient data" flag and, for a
    tuned estimator, the chosen parameters (∞ as "inf")."""
    out = {"value": e.value, "stderr": e.stderr, "ci": list(map(float, e.ci(alpha, interval))),
           "cs": list(map(float, e.cs(alpha, method=interval))), "n": e.n, "insufficient_data": bool(insufficient)}
    chosen = {k: v if math.isfinite(v) else "inf" for k, v in e.chosen.items()}
    return {**out, "chosen": chosen} if chosen else out


@dataclass
class EvaluationResult:
    """One policy's estimates (value, stderr, intervals) per estimator, its weight diagnostics and V(A) − V(baseline).

    Returned by :func:`evaluate_log`, :func:`evaluate_dataframe` and :func:`evaluate_partitions` for an
    :class:`Evaluation`; ``to_dict`` and ``table`` give the intervals at a level α (:meth:`Estimate.ci`,
    :meth:`Estimate.cs`).

    Parameters
    ----------
    estimates : dict of str to Estimate
        V̂(policy) by estimator name.
    weights : WeightStats
        The weights' diagnostics w_i = π(a_i|x_i) / p̂_i: effective sample size, largest weight, support.
    policy : str
        The policy, as its spec reads.
    differences : dict of str to Estimate
        V̂(policy) − V̂(baseline) by estimator name, from paired per-row terms (empty without a baseline).
    baseline : str or None
        The baseline policy, as its spec reads, or None.
    baseline_weights : WeightStats or None
        The baseline's weight diagnostics (None for ``"logging"`` or no baseline).
    min_support : int
        Fewer rows with w > 0 and a non-zero reward than this mark the values "insufficient data".
    coverage : Coverage or None
        The rows per logged action and π's probability mass per action: :meth:`warnings` gives the share of π's
        mass on actions the log never took.
    propensity : PropensityState or None
        With estimated propensities, their diagnostics (:mod:`dr_scale.propensity.diagnostics`): rows floored,
        calibration, log loss against the baselines, support, logged vs estimated.
    marginal_weights : WeightStats or None
        The diagnostics of MIPS's weights w(x_i, e_i) = p_π(e_i|x_i) / p_π₀(e_i|x_i), by which the estimators in
        ``marginalized`` are flagged "insufficient data" (None without a marginalized estimator).
    baseline_marginal_weights : WeightStats or None
        The baseline policy's marginal weights' diagnostics.
    marginalized : tuple of str
        The estimators whose support is counted by the marginal weights (MIPS, SNMIPS).

    See Also
    --------
    Evaluation : What is evaluated.
    ComparisonResult : Several policies' results.

    Examples
    --------
    >>> from dr_scale import LinearRewardModel, read_log
    >>> from dr_scale.synthetic.example import example_paths
    >>> logs, model_path = example_paths()  # the bundled example: 7 days of 2,000 rows, k = 3 actions
    >>> evaluation = Evaluation("uniform", ["IPS", "DR"], reward_model=LinearRewardModel.load(model_path),
    ...                         baseline="logging")
    >>> result = evaluate_partitions(read_log(logs), evaluation)
    >>> {name: round(e.value, 4) for name, e in result.estimates.items()}
    {'IPS': 0.3959, 'DR': 0.4072}
    >>> {name: round(e.value, 4) for name, e in result.differences.items()}  # V(uniform) − V(logging)
    {'IPS': 0.0299, 'DR': 0.0412}
    >>> round(result.weights.ess, 1), result.insufficient
    (5970.1, False)
    >>> print(result.table())  # doctest: +ELLIPSIS
    estimator         value   std. error             95% CI (normal)          n          ESS  max weight
    ----------------------------------------------------------------------------------------------------
    IPS              0.3959       0.0070            [0.3822, 0.4096]      14000         5970        65.2
    DR               0.4072       0.0049            [0.3975, 0.4168]      14000         5970        65.2
    ...
    """

    estimates: dict[str, Estimate]
    weights: WeightStats
    policy: str = ""
    differences: dict[str, Estimate] = field(default_factory=dict)
    baseline: str | None = None
    baseline_weights: WeightStats | None = None  # the baseline policy's; None for "logging" or no baseline
    min_support: int = DEFAULT_MIN_SUPPORT
    coverage: Coverage | None = None  # the logged actions and π's mass on each
    propensity: PropensityState | None = None  # the estimated propensities' diagnostics
    marginal_weights: WeightStats | None = None  # MIPS's weights w(x, e)
    baseline_marginal_weights: WeightStats | None = None
    marginalized: tuple[str, ...] = ()  # the estimators counted by the marginal weights

    @property
    def insufficient(self) -> bool:
        """The policy's value rests on fewer than ``min_support`` rows with w > 0 and a non-zero reward."""
        return self.weights.insufficient(self.min_support)

    def _marginal(self, name: str) -> bool:
        return name in self.marginalized and self.marginal_weights is not None

    def weights_of(self, name: str) -> WeightStats:
        """The weights estimator ``name`` rests on: MIPS's marginal ones for a marginalized estimator, else w."""
        return self.marginal_weights if self._marginal(name) else self.weights

    def insufficient_of(self, name: str) -> bool:
        """Estimator ``name``'s value rests on fewer than ``min_support`` rows with a positive weight *of its
        own* (for MIPS: π lists the logged item's category) and a non-zero reward."""
        return self.weights_of(name).insufficient(self.min_support)

    def baseline_insufficient_of(self, name: str) -> bool:
        """:attr:`baseline_insufficient`, by the baseline's marginal weights for a marginalized estimator."""
        if self._marginal(name) and self.baseline_marginal_weights is not None:
            return self.baseline_marginal_weights.insufficient(self.min_support)
        return self.baseline_insufficient

    @property
    def baseline_insufficient(self) -> bool:
        """The baseline's value rests on too few rows (for "logging": rows with a non-zero reward)."""
        if self.baseline is None:
            return False
        if self.baseline_weights is None:  # the logging policy: every row is its own
            return self.weights.n_rewarded < self.min_support
        return self.baseline_weights.insufficient(self.min_support)

    def support_note(self) -> str | None:
        """Why values or differences carry "insufficient data", in words (None when they do not)."""
        notes = []
        plain = [n for n in self.estimates if not self._marginal(n)] or not self.estimates
        if self.insufficient and plain:
            notes.append(f"{self.policy}: {self.weights.n_informative} rows where it takes the logged action and "
                         f"the reward is non-zero ({self.weights.n_matched} where it takes the logged action)")
        marginal = [n for n in self.estimates if self._marginal(n)]
        if marginal and self.marginal_weights.insufficient(self.min_support):
            m = self.marginal_weights
            notes.append(f"{self.policy} by {', '.join(marginal)}: {m.n_informative} rows where it takes the logged "
                         f"action's category and the reward is non-zero ({m.n_matched} where it takes the category)")
        if self.baseline_insufficient and plain:
            count = (self.weights.n_rewarded if self.baseline_weights is None
                     else self.baseline_weights.n_informative)
            notes.append(f"{self.baseline}: {count} such rows")
        if not notes:
            return None
        return (f"insufficient data: {'; '.join(notes)} — fewer than {self.min_support}; the values and differences "
                "that rest on them support no conclusion")

    def warnings(self, min_ess_ratio: float = DEFAULT_MIN_ESS_RATIO) -> list[str]:
        """Poor overlap, tiny propensities, mass on actions the log never took, no matched rows: in words."""
        coverage = self.coverage.warnings(self.weights.n_matched) if self.coverage else []
        propensity = self.propensity.warnings() if self.propensity is not None else []
        return self.weights.warnings(min_ess_ratio) + coverage + propensity

    def to_dict(self, alpha: float = 0.05, interval: str = "normal") -> dict:
        out = {
            "policy": self.policy,
            "interval": interval,
            "estimates": {name: estimate_dict(e, alpha, interval, self.insufficient_of(name))
                          for name, e in self.estimates.items()},
            "diagnostics": {**self.weights.summary(), **(self.coverage.summary() if self.coverage else {})},
            "min_support": self.min_support,
            "insufficient_data": any(self.insufficient_of(n) for n in self.estimates) if self.estimates
            else self.insufficient,
        }
        if self.marginal_weights is not None:
            out["diagnostics"]["marginal"] = self.marginal_weights.summary()
        if self.baseline is not None:
            out["baseline"] = self.baseline
            out["difference"] = {"interval": interval,
                                 **{name: estimate_dict(e, alpha, interval, self.insufficient_of(name)
                                                        or self.baseline_insufficient_of(name))
                                    for name, e in self.differences.items()}}
        note = self.support_note()
        if note:
            out["support_note"] = note
        if self.propensity is not None:
            out["propensity_diagnostics"] = self.propensity.summary()
        return out

    def table(self, alpha: float = 0.05, interval: str = "normal") -> str:
        """The results as a fixed-width text table; the interval's kind is in the header. An undefined
        number (SNIPS when π never takes a logged action, a standard error from one row) reads "—", never NaN.
        A value or difference resting on too few rows is marked "insufficient data" (:meth:`support_note`)."""
        level = f"{100 * (1 - alpha):g}% CI ({interval})"
        width = max(10, *map(len, self.estimates))
        head = (f"{'estimator':<{width}} {'value':>12} {'std. error':>12} {level:>27} {'n':>10} {'ESS':>12} "
                f"{'max weight':>11}")
        lines = [head, "-" * len(head)]
        for name, e in self.estimates.items():
            lo, hi = e.ci(alpha, interval)
            chosen = ", ".join(f"{k}={v:g}" if math.isfinite(v) else f"{k}=∞" + (" (DR)" if k in ("tau", "max_weight")
                                                                             else "") for k, v in e.chosen.items())
            value, stderr, bounds = estimate(e.value, e.stderr, (lo, hi))
            w = self.weights_of(name)  # MIPS: its marginal weights' ESS and largest weight
            lines.append(
                f"{name:<{width}} {value:>12} {stderr:>12} {bounds:>27} {e.n:>10d} "
                f"{number(w.ess):>12} {number(w.max_w):>11}"
                + (f"   ({chosen})" if chosen else "") + ("   insufficient data" if self.insufficient_of(name) else "")
            )
        if self.baseline is not None:
            head = f"{'estimator':<{width}} {'V(A) − V(B)':>12} {'std. error':>12} {level:>27}"
            lines += ["", f"difference: {self.policy} − {self.baseline} (paired, on the same rows)", head,
                      "-" * len(head)]
            for name, e in self.differences.items():
                lo, hi = e.ci(alpha, interval)
                value, stderr, bounds = estimate(e.value, e.stderr, (lo, hi), sign=True)
                flagged = self.insufficient_of(name) or self.baseline_insufficient_of(name)
                lines.append(f"{name:<{width}} {value:>12} {stderr:>12} {bounds:>27}"
                             + ("   insufficient data" if flagged else ""))
        note = self.support_note()
        if note:
            lines += ["", note]
        return "\n".join(lines)


class PartitionSource:
    """A partition's state from a Parquet file or a pyarrow table, for :class:`Evaluation` and
    :class:`Comparison`: the partition read and validated with the class's ``dimensions``,
    ``needs_features`` and ``columns``, a log error explained by ``explain``, then ``state(part)``."""

    def file_state(self, fs, path: str):
        n_features, n_actions = self.dimensions
        try:
            part = read_partition(fs, path, n_features=n_features, n_actions=n_actions,
                                  with_features=self.needs_features, extra_columns=self.columns)
        except LogDataError as exc:
            raise self.explain(exc) from None
        return self.state(part)

    def table_state(self, table: pa.Table, source: str, log_filter: LogFilter | None = None):
        n_features, n_actions = self.dimensions
        try:
            part = partition_from_table(table, source, n_features, n_actions, self.needs_features, log_filter)
        except LogDataError as exc:
            raise self.explain(exc) from None
        return self.state(part)


@dataclass
class Evaluation(PartitionSource):
    """What to evaluate: a target policy, the estimators, (for DM/DR) a reward model, and a baseline.

    ``baseline`` — another policy (any :func:`~dr_scale.policies.parse_policy` spelling) or
    ``"logging"`` (the logged rewards' mean) — adds V(policy) − V(baseline) per estimator,
    from paired per-row terms.

    Each estimator sees, per row, w_i = π(a_i|x_i) / p̂_i and (for DM, DR) ρ̂_π(x_i) = Σ_a π(a|x_i) ρ̂_a(x_i)
    (Dudík, Langford & Li 2011, Sec. 2); each part gives a state of the terms' moments, and the states
    merge, so a log is evaluated one part per task.

    Parameters
    ----------
    policy : Policy or str
        The target policy π, or its spec (:func:`~dr_scale.policies.parse_policy`).
    estimators : dict of str to Estimator, or list of str
        The estimators by name, or their names (:func:`~dr_scale.ope.estimators.make_estimators`);
        default IPS and SNIPS.
    reward_model : RewardModel or None
        ρ̂, needed by DM, DR and their variants (e.g. :class:`~dr_scale.reward.models.LinearRewardModel`).
    n_actions : int or None
        The number of actions k (default: the reward model's, the policy's, or the log's metadata).
    n_features : int or None
        The number of features d (default: the log's metadata).
    model_source : str or None
        Where the reward model came from, for messages.
    k_source : str or None
        Where ``n_actions`` came from, for messages (default: worked out here).
    baseline : Policy, str or None
        A policy (or spec) or ``"logging"`` to compare with, or None.
    min_support : int
        Fewer rows with w > 0 and a non-zero reward than this mark the values "insufficient data".
    allow_other_log : bool
        Use a cross-fitted reward model on a log whose fingerprint is not the one it was fitted on (refused
        otherwise: its fold models would predict rows they may have seen).
    catalogue : Catalogue or None
        The action catalogue whose embedding e(a) the marginalized estimators (MIPS, SNMIPS) use (default:
        the log's, :func:`~dr_scale.logs.contract.read_catalogue`).
    embedding_propensity : str
        The column of p_π₀(e(a_i)|x_i), the logging policy's probability of the logged action's category
        (MIPS's denominator; default ``embedding_propensity``).
    importance_weight : str
        The column of BIPW's estimated importance weights ŵ(x_i, a_i) of the evaluated policy (default
        ``importance_weight``).
    balancing_model : BalancingModel or None
        BIPW's weights from this cross-fitted classifier (:func:`dr_scale.ope.balancing.fit_balancing_model_on_log`)
        instead of the column.
    propensity_model : object or None
        An estimated logging policy π̂₀ with ``predict_proba(X, actions=None, row_id=None)`` (e.g.
        :class:`~dr_scale.propensity.model.PropensityModel`): each row's p̂_i = max(π̂₀(a_i | x_i),
        ``propensity_floor``), from the fold model that did not see the row, replaces the log's propensity (the
        only way to weight a log without one); the diagnostics come in the same pass (``result.propensity``).
    propensity_floor : float
        The floor of estimated propensities, in (0, 1) (default
        :data:`~dr_scale.propensity.diagnostics.DEFAULT_PROPENSITY_FLOOR`).
    propensity_source : str or None
        Where the propensity model came from, for messages.

    See Also
    --------
    evaluate_log : Runs it on a log, out of core.
    Comparison : Several policies on the same rows.

    Examples
    --------
    >>> from dr_scale import LinearRewardModel, read_log
    >>> from dr_scale.synthetic.example import example_paths
    >>> logs, model_path = example_paths()  # the bundled example: 7 days of 2,000 rows, k = 3 actions
    >>> evaluation = Evaluation("constant:1", ["IPS", "DR"], reward_model=LinearRewardModel.load(model_path),
    ...                         baseline="uniform")
    >>> str(evaluation.policy), evaluation.n_actions, evaluation.k_source
    ('constant:1', 3, 'the reward model')
    >>> result = evaluate_partitions(read_log(logs)[:2], evaluation)
    >>> round(result.differences["DR"].value, 4), round(result.differences["DR"].stderr, 4)
    (-0.045, 0.0132)
    """

    policy: Policy | str
    estimators: dict[str, Estimator] = field(default_factory=lambda: make_estimators(["IPS", "SNIPS"]))
    reward_model: object | None = None
    n_actions: int | None = None
    n_features: int | None = None
    model_source: str | None = None  # where the reward model came from, for messages
    k_source: str | None = None  # where n_actions came from, for messages (default: worked out here)
    baseline: Policy | str | None = None
    min_support: int = DEFAULT_MIN_SUPPORT  # fewer rows with w > 0 and r ≠ 0: "insufficient data"
    allow_other_log: bool = False  # use a cross-fitted reward model on a log other than the one it was fitted on
    catalogue: Catalogue | None = None  # the action catalogue (its embedding e(a), for MIPS)
    embedding_propensity: str = EMBEDDING_PROPENSITY  # p_π₀(e(a_i)|x_i), for MIPS
    importance_weight: str = IMPORTANCE_WEIGHT  # ŵ(x_i, a_i) of the evaluated policy, for BIPW
    balancing_model: object | None = None  # BIPW's weights from this classifier instead (ope.balancing)
    propensity_model: object | None = None  # π̂₀: estimated propensities replace the logged ones
    propensity_floor: float = DEFAULT_PROPENSITY_FLOOR
    propensity_source: str | None = None  # where the propensity model came from, for messages

    def __post_init__(self):
        self.policy = parse_policy(self.policy)
        if self.baseline is not None and self.baseline != LOGGING:
            self.baseline = parse_policy(self.baseline)
        if not isinstance(self.estimators, dict):
            self.estimators = make_estimators(self.estimators)  # a list of specs; a str or other is refused there
        odd = [name for name, e in self.estimators.items() if not isinstance(e, Estimator)]
        if odd:
            raise ParameterError(f"`estimators` {odd[0]!r} is a {type(self.estimators[odd[0]]).__name__}, not an "
                                 "Estimator; give a list of names such as [\"DR\", \"IPS\"] or a dict of Estimators")
        if self.reward_model is not None and not callable(getattr(self.reward_model, "predict", None)):
            raise ParameterError(f"`reward_model` must be a reward model with predict(X), got "
                                 f"{type(self.reward_model).__name__} {self.reward_model!r:.60}; load a file with "
                                 "LinearRewardModel.load(path)")
        for name in ("n_actions", "n_features"):
            if getattr(self, name) is not None:
                setattr(self, name, _checked_count(name, getattr(self, name)))
        from dr_scale.io.config import NonNegativeInt, check  # pydantic: imported on first use

        self.min_support = check(NonNegativeInt, "min_support", self.min_support)
        balanced = [name for name, e in self.estimators.items() if e.needs_importance_weight]
        if balanced and isinstance(self.baseline, Policy):
            raise UserError(f"{', '.join(balanced)} read(s) the estimated weights of the evaluated policy "
                            f"(column {self.importance_weight}); they have none for the baseline policy "
                            f"{self.baseline}: compare with the baseline 'logging', or leave them out")
        needs = [e.name for e in self.estimators.values() if e.needs_model]
        if needs and self.reward_model is None:
            raise ParameterError(f"{', '.join(needs)} need(s) a reward model ρ̂; give one as `reward_model`")
        model_k = getattr(self.reward_model, "n_actions", None)
        if self.n_actions is not None and self.k_source is None:
            self.k_source = "n_actions as given"
        if self.n_actions is not None and model_k is not None and model_k != self.n_actions:
            raise UserError(f"{self._model_name()} has k = {model_k} actions, but k = {self.n_actions} was given; "
                            "use a model fitted for this log's actions")
        if self.n_actions is None:
            self.n_actions = model_k or self.policy.n_actions
            self.k_source = self._model_name() if model_k else ("the policy" if self.n_actions else None)
        self._check_propensity_model()

    def _check_propensity_model(self) -> None:
        model = self.propensity_model
        if model is not None and not callable(getattr(model, "predict_proba", None)):
            raise ParameterError(f"`propensity_model` must be an estimated logging policy with predict_proba(X), "
                                 f"got {type(model).__name__} {model!r:.60}; load a file with "
                                 "PropensityModel.load(path)")
        from dr_scale.io.config import PropensityFloor, check

        self.propensity_floor = check(PropensityFloor, "propensity_floor", self.propensity_floor)
        model_k = getattr(model, "n_actions", None)
        if model_k is not None and self.n_actions is not None and model_k != self.n_actions:
            raise UserError(f"{self._propensity_name()} is fitted for k = {model_k} actions, but k = {self.n_actions} "
                            f"comes from {self.k_source or 'elsewhere'}: use a propensity model fitted on this log "
                            "(dr-scale fit-propensity, or --estimate-propensity)")

    def _propensity_name(self) -> str:
        return f"the propensity model {self.propensity_source}" if self.propensity_source else "the propensity model"

    @property
    def needs_propensity(self) -> bool:
        """Whether an estimator (or the baseline's) weights rows by 1/p̂: every one but DM, RM and BIPW."""
        return any(e.needs_propensity for e in self.estimators.values())

    def missing_propensity(self, source: str) -> LogDataError:
        """The error for a log without propensities that an estimator needs."""
        names = ", ".join(name for name, e in self.estimators.items() if e.needs_propensity)
        return LogDataError(source, "propensity", f"missing column: the log records no logging probabilities, "
                                                  f"and {names} weight(s) each row by 1/p; estimate them "
                                                  "(--estimate-propensity [--folds K], or --propensity-model FILE "
                                                  "from dr-scale fit-propensity; in Python the propensity_model of "
                                                  "dr_scale.fit_propensity_model), or evaluate with DM, RM or "
                                                  "BIPW alone "
                                                  "(docs/propensities.md)")

    def with_propensities(self, part: Partition) -> tuple[Partition, np.ndarray | None]:
        """The partition with the propensities the estimators use, and π̂₀'s (n, k) probabilities (or None).

        With a propensity model: p̂_i = max(π̂₀(a_i | x_i), floor), each row predicted by the fold model that did not
        see it (``row_id``). Without one, a log with propensities is used as it is; a log without them is refused
        when an estimator needs them, and gets p = 1 placeholders (which DM never reads) otherwise.
        """
        if self.propensity_model is None:
            if part.has_propensity or len(part) == 0:
                return part, None
            if self.needs_propensity:
                raise self.missing_propensity(part.source)
            return replace(part, propensity=np.ones(len(part))), None
        probs = self._estimated(part)
        p_hat = np.maximum(probs[np.arange(len(part)), part.action], self.propensity_floor)
        return replace(part, propensity=p_hat), probs

    def _estimated(self, part: Partition) -> np.ndarray:
        """π̂₀(· | x_i), (n, k), checked: finite, ≥ 0, rows summing to 1."""
        import inspect

        model = self.propensity_model
        kwargs = {"row_id": part.row_id} if "row_id" in inspect.signature(model.predict_proba).parameters else {}
        probs = np.asarray(model.predict_proba(part.X, **kwargs), dtype=np.float64)
        k = self.n_actions or probs.shape[1]
        if probs.shape != (len(part), k):
            raise UserError(f"{self._propensity_name()} gives {probs.shape[1]} probabilities per row, but the log "
                            f"{part.source} has k = {k} actions: use a propensity model fitted on this log")
        bad = ~np.isfinite(probs).all(axis=1) | (probs < 0).any(axis=1) | (np.abs(probs.sum(axis=1) - 1) > 1e-6)
        if bad.any():
            raise UserError(f"{self._propensity_name()} gives no distribution on {part.source} (e.g. row_id="
                            f"{int(part.row_id[np.flatnonzero(bad)[0]])}): check its coefficients and the features")
        return probs

    def _model_name(self) -> str:
        return f"the reward model {self.model_source}" if self.model_source else "the reward model"

    def explain(self, exc: LogDataError) -> LogDataError:
        """A data error with where k or d came from, when the data is out of their range."""
        if exc.column == "action" and "out of range" in exc.reason and self.k_source:
            return LogDataError(exc.source, exc.column, f"{exc.reason}; k = {self.n_actions} comes from "
                                f"{self.k_source} — is it the right one for this log?", exc.row_id)
        if exc.column == "features" and "out of range" in exc.reason and self.reward_model is not None:
            return LogDataError(exc.source, exc.column, f"{exc.reason}; d = {self.n_features} comes from the log's "
                                f"metadata or {self._model_name()} — is it the right one for this log?", exc.row_id)
        return exc

    @property
    def needs_features(self) -> bool:
        return (self.reward_model is not None or self.propensity_model is not None
                or (self.balancing_model is not None and self.needs_importance_weight)
                or any(p.needs_features for p in self._policies))

    @property
    def _policies(self) -> list[Policy]:
        return [self.policy] + ([self.baseline] if isinstance(self.baseline, Policy) else [])

    @property
    def columns(self) -> tuple[str, ...]:
        """The extra log columns the policy (and the baseline) read, and the embedding propensity for MIPS."""
        marginal = (self.embedding_propensity,) if self.needs_embedding else ()
        balanced = (self.importance_weight,) if self.needs_importance_weight and self.balancing_model is None else ()
        return tuple(dict.fromkeys([*(c for p in self._policies for c in p.columns), *marginal, *balanced]))

    @property
    def needs_importance_weight(self) -> bool:
        """Whether an estimator reads the estimated importance weights ŵ(x_i, a_i) (BIPW)."""
        return any(e.needs_importance_weight for e in self.estimators.values())

    @property
    def needs_embedding(self) -> bool:
        """Whether an estimator is marginalized over the actions' embedding (MIPS, SNMIPS)."""
        return any(e.needs_embedding for e in self.estimators.values())

    def differences(self) -> dict[str, Difference]:
        """Per estimator, the paired difference against the baseline (none without one)."""
        if self.baseline is None:
            return {}
        return {name: Difference(est, OnPolicy() if self.baseline == LOGGING else est)
                for name, est in self.estimators.items()}

    def rows(self, part: Partition, policy: Policy | None = None) -> RowInputs:
        """The per-row quantities (r, w, ρ̂_π, ρ̂_a) of a partition.

        The reward model gets the rows' ids, so a cross-fitted model predicts each row
        with a fold model that did not see it.

        ρ̂ is computed only for the actions π takes in the partition (every estimator
        uses ρ̂_a(x_i) times π(a|x_i) or w_i, both zero for the others): for a constant
        policy one column, whatever the number of actions.
        """
        return self._inputs(part, policy)[0]

    def _inputs(self, part: Partition, policy: Policy | None = None) -> tuple[RowInputs, ActionDistribution, int]:
        """:meth:`rows`, with π(· | x_i) (:class:`~dr_scale.policies.distributions.ActionDistribution`) and k."""
        rows, target, k = self._policy_inputs(part, policy)
        if not self.needs_importance_weight or (policy is not None and policy is not self.policy):
            return rows, target, k
        if self.balancing_model is not None:  # the cross-fitted classifier's odds (dr_scale.ope.balancing)
            return (replace(rows, importance_weight=self.balancing_model.weights(part.X, part.action, part.row_id)),
                    target, k)
        column = self.importance_weight
        if column not in part.table.column_names:
            raise LogDataError(part.source, column, "missing column: BIPW reads the estimated importance weights "
                               "ŵ(x_i, a_i) of the evaluated policy from it (docs/estimators.md)")
        weight = numeric_values(part.table.column(column), part.source, column, part.row_id).astype(np.float64)
        bad = ~(np.isfinite(weight) & (weight >= 0))
        if bad.any():
            raise LogDataError(part.source, column, "an estimated importance weight is negative, NaN or infinite",
                               int(part.row_id[np.flatnonzero(bad)[0]]))
        return replace(rows, importance_weight=weight), target, k

    def _policy_inputs(self, part: Partition, policy: Policy | None = None
                       ) -> tuple[RowInputs, ActionDistribution, int]:
        """The rows of π from its :class:`~dr_scale.policies.distributions.ActionDistribution` on the partition:
        w_i = π(a_i|x_i) / p̂_i and, with a reward model, ρ̂_π(x_i) = Σ_a π(a|x_i) ρ̂_a(x_i) and ρ̂_{a_i}(x_i), the
        model asked for the actions π takes only (:class:`_ModelValues`)."""
        policy = policy or self.policy
        if policy.needs_k and self.n_actions is None:
            raise UserError(f"policy {policy} needs the number of actions k: give n_actions (--n-actions), a reward "
                            "model, or a log with dr_scale.n_actions metadata or an action vocabulary")
        k = self.n_actions or int(max(part.action.max(initial=0), getattr(policy, "action", None) or 0) + 1)
        if policy.on_policy:  # π = π₀: w_i = 1, ρ̂_π(x_i) = ρ̂_{a_i}(x_i) (policies.simple.LoggingPolicy)
            logged = ChosenActions(part.action, k)  # the one-sample stand-in for π₀ in the diagnostics
            reward_hat = None if self.reward_model is None else self._finite(logged.value(self._values(part, k)), part)
            ones = np.ones(len(part))
            return (RowInputs(part.reward, ones, reward_hat, reward_hat, ones, target_prob=part.propensity),
                    logged, k)
        target = policy.distribution(part, k)
        reward_hat_pi = reward_hat_logged = None
        if self.reward_model is not None:
            reward_hat_pi, reward_hat_logged = target.value_and_logged(part.action, self._values(part, k))
            reward_hat_pi, reward_hat_logged = self._finite(reward_hat_pi, part), self._finite(reward_hat_logged, part)
        rows = RowInputs.from_logged_probability(part.reward, part.action, part.propensity, target.at(part.action),
                                                 reward_hat_pi, reward_hat_logged)
        return self._marginal(part, rows, target, k), target, k

    def _values(self, part: Partition, k: int) -> _ModelValues:
        """ρ̂_a(x_i) of the partition's rows, by blocks of actions, each row by the fold model that did not see it."""
        return _ModelValues(self.reward_model, part.X, part.row_id, k)

    def _marginal(self, part: Partition, rows: RowInputs, target: ActionDistribution, k: int) -> RowInputs:
        """``rows`` with MIPS's marginal weights w(x_i, e_i) = p_π(e_i|x_i) / p_π₀(e_i|x_i), when an estimator
        needs them: p_π(e_i|x_i) from π and the catalogue's e(a), p_π₀ from the log's column."""
        if not self.needs_embedding:
            return rows
        catalogue = self.catalogue
        if catalogue is None or catalogue.embedding is None:
            raise UserError("MIPS and SNMIPS need the actions' embedding e(a): the log has no action catalogue "
                            "with an embedding column (_actions.parquet); give one as `catalogue`")
        embedding = catalogue.embedding
        if embedding.size < k:
            raise UserError(f"the action catalogue ({catalogue.source}) lists {embedding.size} actions, the log "
                            f"has k = {k}")
        column = self.embedding_propensity
        p0 = numeric_values(part.table.column(column), part.source, column, part.row_id).astype(np.float64)
        fault = propensity_fault(p0)
        if fault is not None:
            raise LogDataError(part.source, column, fault[1], int(part.row_id[np.flatnonzero(fault[0])[0]]))
        return replace(rows, embedding_weight=target.category_probability(embedding, embedding[part.action]) / p0)

    @property
    def checks_log(self) -> bool:
        """Whether the log must be the one the cross-fitted reward model was fitted on (its fingerprint)."""
        return not self.allow_other_log and checks_fitted_log(self.reward_model)

    @property
    def checks_propensity_log(self) -> bool:
        """Whether the log must be the one the cross-fitted propensity model was fitted on (its fingerprint)."""
        return not self.allow_other_log and checks_fitted_log(self.propensity_model)

    def _finite(self, reward_hat, part: Partition):
        if reward_hat is not None and not np.isfinite(reward_hat).all():
            row = int(part.row_id[np.flatnonzero(~np.isfinite(reward_hat).reshape(len(part), -1).all(axis=1))[0]])
            raise UserError(f"{self._model_name()} predicts a NaN or infinite reward on {part.source} "
                            f"(e.g. row_id={row}): check its coefficients and the features' values")
        return reward_hat

    def state(self, part: Partition) -> PolicyState:
        """The partition's mergeable state. Float overflow here (rewards near 10³⁰⁸) is not warned about
        row by row: the sums come out non-finite and :meth:`result` refuses them with one clear error."""
        with np.errstate(over="ignore", invalid="ignore"):
            return self._state(part)

    def _state(self, part: Partition) -> PolicyState:
        logged = part.propensity if part.has_propensity else None
        part, probs = self.with_propensities(part)
        rows, target, k = self._inputs(part)
        base = None
        if self.baseline is not None:
            base = rows if self.baseline == LOGGING else self.rows(part, self.baseline)
        state = self.state_of_rows(part, rows, base, Coverage.of(part.action, target.mass()))
        return self.with_diagnostics(state, part, probs, target, logged)

    def with_diagnostics(self, state: PolicyState, part: Partition, probs: np.ndarray | None,
                         target: ActionDistribution, logged: np.ndarray | None) -> PolicyState:
        """``state`` with the estimated propensities' diagnostics (:class:`PropensityState`) where there are some
        (π̂₀'s probabilities ``probs`` are (n, k), so π's support on them is read from π's (n, k) matrix)."""
        if probs is None:
            return state
        return replace(state, propensity=PropensityState.of(probs, part.action, floor=self.propensity_floor,
                                                            target=target.dense(), logged=logged))

    def state_of_rows(self, part: Partition, rows: RowInputs, base: RowInputs | None,
                      coverage: Coverage | None = None) -> PolicyState:
        """The state of a partition's rows of the policy (``rows``) and of the baseline (``base``); ``coverage``
        the policy's :class:`~dr_scale.ope.diagnostics.Coverage` of the logged actions."""
        differences = {name: d.state(rows, base) for name, d in self.differences().items()}
        base_weights = (WeightStats.of(base.weight, part.propensity, part.reward)
                        if base is not None and self.baseline != LOGGING else None)
        rows_hash = None
        if self.checks_log or self.checks_propensity_log:  # the fits' fingerprint (reward.fitting.Extent)
            rows_hash = int(row_hash(part.row_id, part.action, part.reward, np.diff(part.X.indptr))
                            .sum(dtype=np.uint64))
        marginal = base_marginal = None
        if self.needs_embedding and rows.embedding_weight is not None:  # MIPS's own weights w(x_i, e_i)
            column = self.embedding_propensity
            p0 = numeric_values(part.table.column(column), part.source, column, part.row_id).astype(np.float64)
            marginal = WeightStats.of(rows.embedding_weight, p0, part.reward)
            if base is not None and self.baseline != LOGGING and base.embedding_weight is not None:
                base_marginal = WeightStats.of(base.embedding_weight, p0, part.reward)
        return PolicyState(
            {name: est.state(rows) for name, est in self.estimators.items()},
            WeightStats.of(rows.weight, part.propensity, part.reward),
            differences,
            base_weights,
            coverage,
            rows_hash,
            marginal_weights=marginal,
            baseline_marginal_weights=base_marginal,
        )

    def result(self, state: PolicyState) -> EvaluationResult:
        """The estimates of a merged state; sums that overflowed float64 are an error, not an inf printed."""
        if self.checks_propensity_log and state.rows_hash is not None:
            check_fitted_log(self.propensity_model, f"{state.weights.n}:{state.rows_hash:016x}",
                             self._propensity_name(), refit="dr-scale fit-propensity, or --estimate-propensity")
        if self.checks_log and state.rows_hash is not None:  # the other half of its split: see _on_other_half
            check_fitted_log(self.reward_model, f"{state.weights.n}:{state.rows_hash:016x}", self._model_name())
        for name, moments in state.estimators.items():
            if not (np.isfinite(moments.mean).all() and np.isfinite(moments.comoment).all()):
                raise UserError(f"the {name} sums overflow float64: rewards, feature values or reward-model "
                                "predictions are too large; rescale them")
        with np.errstate(over="ignore", invalid="ignore"):  # an interval end that overflows prints as "—"
            return EvaluationResult(
                {name: est.result(state.estimators[name]) for name, est in self.estimators.items()},
                state.weights,
                str(self.policy),
                {name: d.result(state.differences[name]) for name, d in self.differences().items()},
                None if self.baseline is None else str(self.baseline),
                state.baseline_weights,
                self.min_support,
                state.coverage,
                state.propensity,
                state.marginal_weights,
                state.baseline_marginal_weights,
                tuple(name for name, est in self.estimators.items() if est.needs_embedding),
            )

    @property
    def dimensions(self) -> tuple[int | None, int | None]:
        """(d, k) a partition is read with."""
        return self.n_features, self.n_actions


def _checked_count(name: str, value) -> int:
    """A positive integer by the shared rule (:data:`dr_scale.io.config.PositiveInt`, as ``--n-actions``)."""
    from dr_scale.io.config import PositiveInt, check  # pydantic: imported when a count is given

    return check(PositiveInt, name, value)


def _check_evaluation(evaluation) -> None:
    if not isinstance(evaluation, Evaluation):
        raise ParameterError(f"`evaluation` must be an Evaluation, e.g. Evaluation(\"column:target_action\"), got "
                             f"{type(evaluation).__name__} {evaluation!r:.60}")


def with_log_defaults(evaluation: Evaluation, logs: OpenedLog) -> Evaluation:
    """A copy of ``evaluation`` with its d and k by the log's rule (:meth:`~dr_scale.logs.opened.OpenedLog.dimensions`:
    as given, else the log's metadata or vocabulary, else its reward or propensity model's), and its policies'
    actions named by value resolved by the log's vocabulary; a model or policy of another log's d or k is refused."""
    actions, meta, first_path = logs.vocabulary, logs.metadata, logs.paths[0]
    if actions is not None and meta.get("n_actions", len(actions)) != len(actions):
        raise LogDataError(first_path, "action", f"the log's metadata says {meta['n_actions']} actions, its "
                                                 f"vocabulary ({SPEC_FILE}) lists {len(actions)}")
    if actions is not None:
        meta["n_actions"] = len(actions)
    evaluation = replace(evaluation, policy=evaluation.policy.resolve(actions),
                         baseline=evaluation.baseline.resolve(actions) if isinstance(evaluation.baseline, Policy)
                         else evaluation.baseline)
    model = evaluation.reward_model
    check_model_actions(model, actions, evaluation._model_name())
    for what, letter in (("n_actions", "k"), ("n_features", "d")):
        given = getattr(model, what, None)
        if what in meta and given is not None and given != meta[what]:
            raise UserError(f"{evaluation._model_name()} has {letter} = {given} {what[2:]}, but the log's metadata "
                            f"({first_path}) says {letter} = {meta[what]}; use a model fitted for this log")
    propensity = evaluation.propensity_model
    for what, letter in (("n_actions", "k"), ("n_features", "d")):
        given = getattr(propensity, what, None)
        if what in meta and given is not None and given != meta[what]:
            raise UserError(f"{evaluation._propensity_name()} has {letter} = {given} {what[2:]}, but the log's "
                            f"metadata ({first_path}) says {letter} = {meta[what]}: it estimates another log's "
                            "logging policy; fit one on this log (dr-scale fit-propensity, or --estimate-propensity)")
    policy_k = evaluation.policy.n_actions
    if policy_k is not None and meta.get("n_actions", policy_k) != policy_k:
        raise LogDataError(first_path, "action", f"the log has {meta['n_actions']} actions, the policy "
                                                 f"{evaluation.policy} has {policy_k}")
    n_features, n_actions = logs.dimensions(evaluation.n_features, evaluation.n_actions, (model, propensity))
    filled = replace(evaluation, n_features=n_features, n_actions=n_actions)
    filled.k_source = (evaluation.k_source if evaluation.n_actions is not None
                       else f"the log's metadata ({first_path})" if n_actions else None)
    return filled


def log_states(logs, evaluation: Evaluation | Comparison, storage_options: dict | None = None,
               log_filter: LogFilter | None = None) -> db.Bag:
    """A bag with one state per Parquet part of the log ``logs`` (a URL or an opened log, :func:`open_log`)
    (:class:`PolicyState`, or a :class:`ComparisonState` for a :class:`Comparison`): each part read once."""
    return _log_states(open_log(logs, storage_options, log_filter), evaluation)[1]


def _log_states(logs: OpenedLog, evaluation):
    """(the evaluation with the log's dimensions and vocabulary, the bag of its states per part)."""
    evaluation = evaluation.with_log_defaults(logs) if isinstance(evaluation, Comparison) \
        else with_log_defaults(evaluation, logs)
    evaluation = _on_other_half(evaluation, logs.log_filter)
    if not logs.has_propensity:
        for e in (evaluation.evaluations.values() if isinstance(evaluation, Comparison) else [evaluation]):
            if e.propensity_model is None and e.needs_propensity:
                raise e.missing_propensity(str(logs))
    evaluation = _with_catalogue(evaluation, logs)
    from dr_scale.reward.shared import check_log_catalogue

    check_log_catalogue([(e.reward_model, e._model_name()) for e in (
        evaluation.evaluations.values() if isinstance(evaluation, Comparison) else [evaluation])], logs)
    fs, parts = logs.listing()
    return evaluation, db.from_sequence(parts, npartitions=len(parts)).map(lambda p: evaluation.file_state(fs, p))


def _with_catalogue(evaluation, logs: OpenedLog):
    """``evaluation`` with the log's action catalogue where a marginalized estimator needs it and none was given."""
    if isinstance(evaluation, Comparison):
        if not any(e.needs_embedding and e.catalogue is None for e in evaluation.evaluations.values()):
            return evaluation
        return Comparison({n: e if e.catalogue is not None else replace(e, catalogue=logs.catalogue)
                           for n, e in evaluation.evaluations.items()}, evaluation.baseline)
    if not evaluation.needs_embedding or evaluation.catalogue is not None:
        return evaluation
    return replace(evaluation, catalogue=logs.catalogue)


def _on_other_half(evaluation, read: LogFilter | None):
    """``evaluation`` with its cross-fitted reward model allowed on these rows when they are the other half of
    the keyed split it was fitted on (its ``log_filter`` metadata): no model saw them, so no fold model can
    predict a row it was fitted on, and the fingerprint of the rows read is rightly not the fit's. The rule is
    :func:`~dr_scale.reward.models.check_fitted_log`'s (:func:`~dr_scale.reward.models.on_other_half`, known
    before the rows are read; their fingerprint, compared in :meth:`Evaluation.result`, after)."""
    if read is None:
        return evaluation
    if isinstance(evaluation, Comparison):
        return Comparison({n: _on_other_half(e, read) for n, e in evaluation.evaluations.items()},
                          evaluation.baseline)
    return replace(evaluation, allow_other_log=True) if on_other_half(evaluation.reward_model, read) else evaluation


def evaluate_log(logs, evaluation: Evaluation | Comparison | dict, *, client=None,
                 storage_options: dict | None = None, progress: bool = False,
                 log_filter: LogFilter | None = None) -> EvaluationResult | ComparisonResult:
    """Evaluate on a Parquet file, folder or URL of partitions, one task per part, out of core.

    Each part's state (the moments of the estimators' per-row terms, the weights' diagnostics) is
    computed where the part is read and tree-reduced; only the states travel.

    Parameters
    ----------
    logs : str or OpenedLog
        The log (any fsspec URL), or the log opened with its storage options and filter
        (:func:`~dr_scale.logs.opened.open_log`).
    evaluation : Evaluation, Comparison or dict of Evaluation
        One policy's evaluation, or several by name (a dict is ``Comparison(evaluations)``: each part is
        read once for all of them, and each policy is compared with the first).
    client : distributed.Client or None
        Run on this Dask cluster (default: Dask's local threaded scheduler).
    storage_options : dict or None
        fsspec's options for ``logs``.
    progress : bool
        Show the progress on stderr.
    log_filter : LogFilter, optional
        The days and the split's rows to read (:mod:`dr_scale.logs.filters`).

    Returns
    -------
    EvaluationResult or ComparisonResult
        ``evaluation`` is not changed: the dimensions it lacks are read from the log into a copy.

    See Also
    --------
    evaluate_dataframe : The same on a Dask DataFrame.
    evaluate_partitions : The same in memory.

    Examples
    --------
    >>> from dr_scale.synthetic.example import example_paths
    >>> logs, _ = example_paths()
    >>> result = evaluate_log(logs, {"uniform": Evaluation("uniform"), "always 1": Evaluation("constant:1")},
    ...                       log_filter=LogFilter(split="test"))
    >>> list(result.results), result.baseline, sorted(result.results["always 1"].differences)
    (['uniform', 'always 1'], 'uniform', ['IPS', 'SNIPS'])
    """
    logs = open_log(logs, storage_options, log_filter)
    evaluation, states = _log_states(logs, _checked(evaluation))
    (state,) = compute(tree_reduce(states), client=client, progress=progress)
    if state.rows == 0:
        raise LogDataError(str(logs), None, "the log has no rows; nothing to evaluate" if not logs.log_filter
                           else f"no rows of the log are selected ({logs.log_filter}); nothing to evaluate")
    return evaluation.result(state)


def evaluate_dataframe(ddf, evaluation: Evaluation | Comparison | dict, *, client=None, progress: bool = False,
                       log_filter: LogFilter | None = None) -> EvaluationResult | ComparisonResult:
    """Evaluate on a Dask DataFrame with the logged-data columns, one task per partition.

    The frame's columns are the contract's (docs/data-contract.md; :func:`~dr_scale.logs.importing.frames.from_dask`
    makes them from raw columns). It carries no log metadata: give k as ``n_actions`` or with a reward model.

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
        The logged rows.
    evaluation : Evaluation, Comparison or dict of Evaluation
        One policy's evaluation, or several by name (a dict is ``Comparison(evaluations)``).
    client : distributed.Client or None
        Run on this Dask cluster (default: Dask's local threaded scheduler).
    progress : bool
        Show the progress on stderr.
    log_filter : LogFilter or None
        Its split's rows, and its days by a ``date`` column.

    Returns
    -------
    EvaluationResult or ComparisonResult
        As :func:`evaluate_log`'s.

    See Also
    --------
    evaluate_log : The same on a log's files.

    Examples
    --------
    >>> import dask.dataframe as dd
    >>> from dr_scale import LogFilter
    >>> from dr_scale.synthetic.example import example_paths
    >>> logs, _ = example_paths()
    >>> ddf = dd.read_parquet(logs)  # 7 partitions, one per day, with a date column
    >>> two_days = LogFilter(days="2026-11-01:2026-11-02")
    >>> result = evaluate_dataframe(ddf, Evaluation("uniform", ["IPS", "SNIPS"], n_actions=3), log_filter=two_days)
    >>> round(result.estimates["IPS"].value, 4), result.estimates["IPS"].n
    (0.4145, 4000)
    """
    evaluation = _checked(evaluation)
    if not callable(getattr(ddf, "to_delayed", None)):
        raise ParameterError(f"`ddf` must be a dask DataFrame with the logged-data columns (a pandas one: "
                             f"dask.dataframe.from_pandas(df, npartitions=…)), got {type(ddf).__name__}")

    def state_of(pdf, i):
        source = f"<dataframe partition {i}>"
        return [evaluation.table_state(table_from_pandas(pdf, source), source, log_filter)]

    import dask

    parts = [dask.delayed(state_of)(d, i) for i, d in enumerate(ddf.to_delayed())]
    (state,) = compute(tree_reduce(db.from_delayed(parts)), client=client, progress=progress)
    return evaluation.result(state)


def evaluate_partitions(parts: list[Partition], evaluation: Evaluation | Comparison | dict) -> \
        EvaluationResult | ComparisonResult:
    """Evaluate in memory on already-read partitions (small logs, tests).

    The same per-part states as :func:`evaluate_log`'s, merged in the partitions' order.

    Parameters
    ----------
    parts : list of Partition
        The partitions, e.g. :func:`~dr_scale.logs.contract.read_log`'s or
        :func:`~dr_scale.logs.importing.frames.from_pandas`'s.
    evaluation : Evaluation, Comparison or dict of Evaluation
        One policy's evaluation, or several by name (a dict is ``Comparison(evaluations)``).

    Returns
    -------
    EvaluationResult or ComparisonResult
        As :func:`evaluate_log`'s.

    See Also
    --------
    evaluate_log : The same out of core on a log's files.

    Examples
    --------
    >>> from dr_scale import read_log
    >>> from dr_scale.synthetic.example import example_paths
    >>> parts = read_log(example_paths()[0])
    >>> result = evaluate_partitions(parts, Evaluation("uniform", ["IPS", "SNIPS"], n_actions=3))
    >>> {name: round(e.value, 4) for name, e in result.estimates.items()}
    {'IPS': 0.3959, 'SNIPS': 0.3999}
    """
    evaluation = _checked(evaluation)
    if not isinstance(parts, (list, tuple)) or not all(isinstance(p, Partition) for p in parts):
        got = (type(parts).__name__ if not isinstance(parts, (list, tuple)) else
               "a list holding " + next(type(p).__name__ for p in parts if not isinstance(p, Partition)))
        raise ParameterError(f"`parts` must be a list of Partition (e.g. read_log's), got {got}")
    return evaluation.result(merge_all([evaluation.state(p) for p in parts]))


def _checked(evaluation):
    """An Evaluation, or a Comparison (from a dict of Evaluations); anything else is refused."""
    if isinstance(evaluation, dict):
        return Comparison(evaluation)
    if isinstance(evaluation, Comparison):
        return evaluation
    _check_evaluation(evaluation)
    return evaluation


# -- several policies ------------------------------------------------------------
@dataclass(frozen=True)
class ComparisonState:
    """The merged :class:`PolicyState` of every policy of a :class:`Comparison`, by name. Merge with ``+``."""

    states: dict[str, PolicyState]

    def __add__(self, other: ComparisonState) -> ComparisonState:
        return ComparisonState({k: v + other.states[k] for k, v in self.states.items()})

    @property
    def rows(self) -> int:
        return next(iter(self.states.values())).weights.n

    def to_dict(self) -> dict:
        return {k: v.to_dict() for k, v in self.states.items()}

    @classmethod
    def from_dict(cls, d: dict) -> ComparisonState:
        return cls({k: PolicyState.from_dict(v) for k, v in d.items()})


@dataclass
class ComparisonResult:
    """Every policy's :class:`EvaluationResult`, by name; each but the baseline with V(policy) − V(baseline).

    Returned for a :class:`Comparison` (or a dict of Evaluations); ``to_dict`` and ``table`` give every
    policy's estimates, then the paired differences.

    Parameters
    ----------
    results : dict of str to EvaluationResult
        The policies' results by name, in the comparison's order.
    baseline : str
        The name of the policy the others are compared with, or ``"logging"``.

    See Also
    --------
    Comparison : What is compared.

    Examples
    --------
    >>> from dr_scale import LinearRewardModel, read_log
    >>> from dr_scale.synthetic.example import example_paths
    >>> logs, model_path = example_paths()  # the bundled example: 7 days of 2,000 rows, k = 3 actions
    >>> model = LinearRewardModel.load(model_path)
    >>> result = evaluate_partitions(read_log(logs)[:2],
    ...                              {"uniform": Evaluation("uniform", ["DR"], reward_model=model),
    ...                               "always 1": Evaluation("constant:1", ["DR"], reward_model=model)})
    >>> list(result.results), result.baseline
    (['uniform', 'always 1'], 'uniform')
    >>> print(result.table())
    policy   estimator         value   std. error             95% CI (normal)          n          ESS  max weight
    -------------------------------------------------------------------------------------------------------------
    uniform  DR                0.404        0.011              [0.383, 0.424]       4000         1786        37.6
    always 1 DR                0.359        0.014              [0.332, 0.385]       4000          837        34.3
    <BLANKLINE>
    difference: each policy A − uniform (paired, on the same rows)
    policy   estimator   V(A) − V(B)   std. error             95% CI (normal)
    -------------------------------------------------------------------------
    always 1 DR               -0.045        0.013            [-0.071, -0.019]
    """

    results: dict[str, EvaluationResult]
    baseline: str

    def to_dict(self, alpha: float = 0.05, interval: str = "normal") -> dict:
        return {"baseline": self.baseline,
                "policies": {name: r.to_dict(alpha, interval) for name, r in self.results.items()}}

    def table(self, alpha: float = 0.05, interval: str = "normal") -> str:
        """One fixed-width table of every policy's estimates, then one of the paired differences."""
        level = f"{100 * (1 - alpha):g}% CI ({interval})"
        pw = max(8, *map(len, self.results))
        ew = max(10, *(len(e) for r in self.results.values() for e in r.estimates))
        head = (f"{'policy':<{pw}} {'estimator':<{ew}} {'value':>12} {'std. error':>12} {level:>27} {'n':>10} "
                f"{'ESS':>12} {'max weight':>11}")
        lines = [head, "-" * len(head)]
        for policy, r in self.results.items():
            for name, e in r.estimates.items():
                lo, hi = e.ci(alpha, interval)
                value, stderr, bounds = estimate(e.value, e.stderr, (lo, hi))
                lines.append(f"{policy:<{pw}} {name:<{ew}} {value:>12} {stderr:>12} {bounds:>27} {e.n:>10d} "
                             f"{number(r.weights.ess):>12} {number(r.weights.max_w):>11}")
        level = f"{100 * (1 - alpha):g}% CI (normal)"
        head = f"{'policy':<{pw}} {'estimator':<{ew}} {'V(A) − V(B)':>12} {'std. error':>12} {level:>27}"
        lines += ["", f"difference: each policy A − {self.baseline} (paired, on the same rows)", head, "-" * len(head)]
        for policy, r in self.results.items():
            for name, e in r.differences.items():
                lo, hi = e.ci(alpha)
                value, stderr, bounds = estimate(e.value, e.stderr, (lo, hi), sign=True)
                lines.append(f"{policy:<{pw}} {name:<{ew}} {value:>12} {stderr:>12} {bounds:>27}")
        return "\n".join(lines)


@dataclass
class Comparison(PartitionSource):
    """Several policies evaluated on the same rows of one log: each part read once, paired differences.

    Each policy's result equals a separate ``Evaluation(policy, baseline=<the baseline's policy>)`` with its
    estimators and reward model: V̂(A) − V̂(B) uses A's estimators and reward model for both terms, the
    difference of the per-row terms, so its standard error reflects the pairing.

    Parameters
    ----------
    evaluations : dict of str to Evaluation
        The policies by name (at least two), each an :class:`Evaluation` without a baseline of its own.
    baseline : str, optional
        The name of the policy the others are compared with (default: the first), or ``"logging"``
        (the logged rewards' mean, as ``Evaluation(baseline="logging")``).

    See Also
    --------
    evaluate_log : Runs it on a log, out of core.
    ComparisonResult : Its result.

    Examples
    --------
    >>> from dr_scale import LinearRewardModel, read_log
    >>> from dr_scale.synthetic.example import example_paths
    >>> logs, model_path = example_paths()  # the bundled example: 7 days of 2,000 rows, k = 3 actions
    >>> model = LinearRewardModel.load(model_path)
    >>> comparison = Comparison({"always 0": Evaluation("constant:0", ["DR"], reward_model=model),
    ...                          "always 1": Evaluation("constant:1", ["DR"], reward_model=model)}, baseline="logging")
    >>> result = evaluate_partitions(read_log(logs)[:2], comparison)
    >>> {name: round(r.differences["DR"].value, 4) for name, r in result.results.items()}  # V(A) − V(logging)
    {'always 0': -0.0926, 'always 1': -0.0159}
    """

    evaluations: dict[str, Evaluation]
    baseline: str | None = None

    def __post_init__(self):
        if not isinstance(self.evaluations, dict) or len(self.evaluations) < 2:
            raise ParameterError("`evaluations` must be a dict of at least two Evaluations by name")
        for name, e in self.evaluations.items():
            if not isinstance(name, str):
                raise ParameterError(f"`evaluations`: the names must be strings, got {name!r}")
            _check_evaluation(e)
            if e.baseline is not None:
                raise ParameterError(f"`evaluations` {name!r} has a baseline of its own; give the comparison's "
                                     "`baseline` instead")
        self.baseline = self.baseline if self.baseline is not None else next(iter(self.evaluations))
        if self.baseline != LOGGING and self.baseline not in self.evaluations:
            raise ParameterError(f"`baseline` {self.baseline!r} is not one of the policies "
                                 f"({', '.join(self.evaluations)}) nor {LOGGING!r}")
        names = {tuple(e.estimators) for e in self.evaluations.values()}
        if len(names) > 1:
            raise ParameterError("`evaluations` must all have the same estimators, to compare them")

    @functools.cached_property
    def paired(self) -> dict[str, Evaluation]:
        """Each evaluation with the comparison's baseline as its own (none for the baseline itself)."""
        if self.baseline == LOGGING:
            return {n: replace(e, baseline=LOGGING) for n, e in self.evaluations.items()}
        base = self.evaluations[self.baseline].policy
        return {n: e if n == self.baseline else replace(e, baseline=base) for n, e in self.evaluations.items()}

    def with_log_defaults(self, logs: OpenedLog) -> Comparison:
        filled = {n: with_log_defaults(e, logs) for n, e in self.evaluations.items()}
        ks = {e.n_actions for e in filled.values()}
        if len(ks) > 1:
            raise UserError(f"the policies' evaluations disagree on the number of actions k ({sorted(ks, key=str)}); "
                            "give the same n_actions and reward model to all")
        return Comparison(filled, self.baseline)

    @property
    def needs_features(self) -> bool:
        return any(e.needs_features for e in self.paired.values())

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c for e in self.paired.values() for c in e.columns))

    def state(self, part: Partition) -> ComparisonState:
        """Every policy's state on the partition's rows; a policy's rows are built once and shared where the
        evaluations agree on the reward model and k."""
        paired = self.paired
        logged = part.propensity if part.has_propensity else None
        estimated: dict = {}  # by propensity model: each predicts once
        for e in paired.values():
            key = (id(e.propensity_model), e.propensity_floor)
            if key not in estimated:
                estimated[key] = e.with_propensities(part)
        parts = {n: estimated[id(e.propensity_model), e.propensity_floor] for n, e in paired.items()}
        with np.errstate(over="ignore", invalid="ignore"):
            inputs = {n: e._inputs(parts[n][0]) for n, e in paired.items()}
            rows = {n: rows for n, (rows, _, _) in inputs.items()}
            states = {}
            for n, e in paired.items():
                base = None
                if e.baseline is not None:
                    b = self.evaluations.get(self.baseline)
                    if e.baseline == LOGGING:
                        base = rows[n]
                    elif (b is not None and b.reward_model is e.reward_model and b.n_actions == e.n_actions
                          and b.propensity_model is e.propensity_model):
                        base = rows[self.baseline]
                    else:
                        base = e.rows(parts[n][0], e.baseline)
                _, target, _ = inputs[n]
                own, probs = parts[n]
                state = e.state_of_rows(own, rows[n], base, Coverage.of(part.action, target.mass()))
                states[n] = e.with_diagnostics(state, own, probs, target, logged)
        return ComparisonState(states)

    def result(self, state: ComparisonState) -> ComparisonResult:
        paired = self.paired
        return ComparisonResult({n: e.result(state.states[n]) for n, e in paired.items()}, self.baseline)

    def explain(self, exc: LogDataError) -> LogDataError:
        return next(iter(self.evaluations.values())).explain(exc)

    @property
    def dimensions(self) -> tuple[int | None, int | None]:
        """(d, k) a partition is read with: the first evaluation's (they agree, :meth:`with_log_defaults`)."""
        first = next(iter(self.evaluations.values()))
        return first.n_features, first.n_actions


__all__ = [
    "LOGGING", "Comparison", "ComparisonResult", "ComparisonState", "Evaluation", "EvaluationResult", "PolicyState",
    "evaluate_log", "evaluate_dataframe", "evaluate_partitions", "log_states",
]
