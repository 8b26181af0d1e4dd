"""What to evaluate (:class:`Evaluation`) and how it turns a partition's rows into a state.

An evaluation names the target policy π, the estimators, the reward model ρ̂ (for DM, DR), a baseline and the
log's columns it reads. On a partition it forms, per row, w_i = π(a_i|x_i) / p̂_i and ρ̂_π(x_i) = Σ_a π(a|x_i)
ρ̂_a(x_i) (Dudík, Langford & Li 2011, Sec. 2; :mod:`~dr_scale.ope.evaluation.rows`); every estimator turns the
rows into a :class:`~dr_scale.ope.moments.Moments` state (:class:`~dr_scale.ope.evaluation.states.PolicyState`), and
:meth:`Evaluation.result` the merged state into an :class:`~dr_scale.ope.evaluation.results.EvaluationResult`.
An evaluation is frozen: a copy with other fields is ``dataclasses.replace(evaluation, …)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from dr_scale.core.errors import ParameterError, UserError
from dr_scale.core.keyed_random import row_hash
from dr_scale.logs.catalogue import Catalogue
from dr_scale.logs.contract import LogDataError, Partition, numeric_values
from dr_scale.ope.diagnostics import DEFAULT_MIN_SUPPORT, Coverage, WeightStats
from dr_scale.ope.estimators import (
    Difference,
    Estimate,
    Estimator,
    OnPolicy,
    RowInputs,
    fold_jackknife,
    make_estimators,
)
from dr_scale.ope.evaluation.results import EvaluationResult
from dr_scale.ope.evaluation.rows import PropensityEstimate, policy_rows, with_propensities
from dr_scale.ope.evaluation.states import PartitionSource, PolicyState
from dr_scale.ope.logged import fitted
from dr_scale.ope.moments import Moments
from dr_scale.policies import ActionDistribution, Policy, parse_policy
from dr_scale.propensity.diagnostics import DEFAULT_PROPENSITY_FLOOR, PropensityState
from dr_scale.reward.models import RewardModel, check_fitted_log, checks_fitted_log

if TYPE_CHECKING:
    from dr_scale.ope.balancing import BalancingModel

#: The log column of the logging policy's probability of the logged action's embedding, p_π₀(e(a_i)|x_i) (MIPS).
EMBEDDING_PROPENSITY = "embedding_propensity"

#: The log column of the estimated importance weights ŵ(x_i, a_i) of balanced IPW (BIPW), for the evaluated policy.
IMPORTANCE_WEIGHT = "importance_weight"

#: The baseline that stands for the logging policy: its value is the logged rewards' mean.
LOGGING = "logging"



@dataclass(frozen=True)
class Evaluation(PartitionSource[PolicyState]):
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
        the log's, :func:`~dr_scale.logs.catalogue.read_catalogue`).
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
    >>> from dr_scale import LinearRewardModel, evaluate_partitions, read_log
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
    reward_model: RewardModel | None = None
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
    balancing_model: BalancingModel | None = None  # BIPW's weights from this classifier instead (ope.balancing)
    propensity_model: PropensityEstimate | None = None  # π̂₀: estimated propensities replace the logged ones
    propensity_floor: float = DEFAULT_PROPENSITY_FLOOR
    propensity_source: str | None = None  # where the propensity model came from, for messages

    def __post_init__(self) -> None:
        put = object.__setattr__  # frozen: the fields are set once, here
        put(self, "policy", fitted(parse_policy(self.policy)))
        if self.baseline is not None and self.baseline != LOGGING:
            put(self, "baseline", fitted(parse_policy(self.baseline)))
        if not isinstance(self.estimators, dict):
            put(self, "estimators", make_estimators(self.estimators))  # a list of specs; others refused there
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
                put(self, name, _checked_count(name, getattr(self, name)))
        from dr_scale.io.config import NonNegativeInt, check  # pydantic: imported on first use

        put(self, "min_support", check(NonNegativeInt, "min_support", self.min_support))
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
            put(self, "k_source", "n_actions as given")
        if self.n_actions is not None and model_k is not None and model_k != self.n_actions:
            raise UserError(f"{self._model_name()} has k = {model_k} actions, but k = {self.n_actions} was given; "
                            "use a model fitted for this log's actions")
        if self.n_actions is None:
            put(self, "n_actions", model_k or self.target_policy.n_actions)
            put(self, "k_source", self._model_name() if model_k else ("the policy" if self.n_actions else None))
        self._check_propensity_model()

    def _check_propensity_model(self) -> None:
        model = self.propensity_model
        if model is not None and not callable(getattr(model, "predict_proba", None)):
            raise ParameterError(f"`propensity_model` must be an estimated logging policy with predict_proba(X), "
                                 f"got {type(model).__name__} {model!r:.60}; load a file with "
                                 "PropensityModel.load(path)")
        from dr_scale.io.config import PropensityFloor, check

        floor = check(PropensityFloor, "propensity_floor", self.propensity_floor)
        object.__setattr__(self, "propensity_floor", floor)  # frozen: set once, in __post_init__
        model_k = getattr(model, "n_actions", None)
        if model_k is not None and self.n_actions is not None and model_k != self.n_actions:
            raise UserError(f"{self._propensity_name()} is fitted for k = {model_k} actions, but k = {self.n_actions} "
                            f"comes from {self.k_source or 'elsewhere'}: use a propensity model fitted on this log "
                            "(dr-scale fit-propensity, or --estimate-propensity)")

    @property
    def target_policy(self) -> Policy:
        """π as a :class:`~dr_scale.policies.Policy` (``policy`` is parsed from a spec when the evaluation is made)."""
        policy = self.policy
        if not isinstance(policy, Policy):
            raise TypeError(f"the evaluation's policy {policy!r} was not parsed")
        return policy

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
        """Whether the rows' features x_i are read: for a reward, propensity or balancing model, or a policy of
        x."""
        return (self.reward_model is not None or self.propensity_model is not None
                or (self.balancing_model is not None and self.needs_importance_weight)
                or any(p.needs_features for p in self._policies))

    @property
    def _policies(self) -> list[Policy]:
        return [self.target_policy] + ([self.baseline] if isinstance(self.baseline, Policy) else [])

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

    def rows(self, part: Partition, policy: Policy | None = None, target: ActionDistribution | None = None
             ) -> RowInputs:
        """The per-row quantities (r, w, ρ̂_π, ρ̂_a) of a partition.

        The reward model gets the rows' ids, so a cross-fitted model predicts each row
        with a fold model that did not see it.

        ρ̂ is computed only for the actions π takes in the partition (every estimator
        uses ρ̂_a(x_i) times π(a|x_i) or w_i, both zero for the others): for a constant
        policy one column, whatever the number of actions.
        """
        return policy_rows(self, part, policy, target)[0]

    @property
    def checks_log(self) -> bool:
        """Whether the log must be the one the cross-fitted reward model was fitted on (its fingerprint)."""
        return not self.allow_other_log and checks_fitted_log(self.reward_model)

    @property
    def checks_propensity_log(self) -> bool:
        """Whether the log must be the one the cross-fitted propensity model was fitted on (its fingerprint)."""
        return not self.allow_other_log and checks_fitted_log(self.propensity_model)

    def state(self, part: Partition) -> PolicyState:
        """The partition's mergeable state. Float overflow here (rewards near 10³⁰⁸) is not warned about
        row by row: the sums come out non-finite and :meth:`result` refuses them with one clear error."""
        with np.errstate(over="ignore", invalid="ignore"):
            return self._state(part)

    def _state(self, part: Partition) -> PolicyState:
        logged = part.propensity if part.has_propensity else None
        part, probs = with_propensities(self, part)
        rows, target, k = policy_rows(self, part)
        base = None
        if isinstance(self.baseline, Policy):
            base = self.rows(part, self.baseline)
        elif self.baseline is not None:  # LOGGING: the logged rows themselves
            base = rows
        state = self.state_of_rows(part, rows, base, Coverage.of(part.action, target.mass()), target)
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
                      coverage: Coverage | None = None, target: ActionDistribution | None = None) -> PolicyState:
        """The state of a partition's rows of the policy (``rows``) and of the baseline (``base``); ``coverage``
        the policy's :class:`~dr_scale.ope.diagnostics.Coverage` of the logged actions; ``target`` its π(· | x_i)
        on the partition, where already computed (the fold states reuse it)."""
        differences = {} if base is None else {name: d.state(rows, base) for name, d in self.differences().items()}
        base_weights = (WeightStats.of(base.weight, part.propensity, part.reward)
                        if base is not None and self.baseline != LOGGING else None)
        rows_hash = None
        # the fits' fingerprint (crossfit.parts.Extent); a cross-fitted model reads the features, so X is read
        if (self.checks_log or self.checks_propensity_log) and part.X is not None:
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
            folds=self.fold_states(part, rows, base, target),
        )

    def fold_states(self, part: Partition, rows: RowInputs, base: RowInputs | None = None,
                    target: ActionDistribution | None = None) -> dict[str, list[Moments]]:
        """Per model-based estimator (:attr:`~dr_scale.ope.estimators.Estimator.model_dependent`: DM, DRos, the shrunk
        and tuned DR estimators), its state with every row predicted by fold model j, for each of the cross-fitted
        reward model's K fold models (none for a model without folds): the mergeable state of the reward model's
        standard error, :func:`~dr_scale.ope.estimators.fold_jackknife`. With a baseline (``base``, its rows), the
        paired difference's too, under the key ``"difference:NAME"``. ``rows`` are the policy's rows (their
        weights are reused) and ``target`` its π(· | x_i) (None: computed again); the model is asked K times more."""
        names = [name for name, est in self.estimators.items() if est.model_dependent]
        folds = getattr(self.reward_model, "folds", 0)
        fold_model = getattr(self.reward_model, "fold_model", None)
        if not names or folds < 2 or not callable(fold_model) or len(part) == 0:
            return {}
        out: dict[str, list[Moments]] = {name: [] for name in names}
        differences = self.differences() if base is not None else {}
        for j in range(folds):
            evaluation = replace(self, reward_model=fold_model(j), k_source=self.k_source)
            rows_j = _with_model_of(rows, evaluation.rows(part, target=target))
            for name in names:
                out[name].append(self.estimators[name].state(rows_j))
            if base is None:
                continue
            baseline = self.baseline
            base_j = (_with_model_of(base, evaluation.rows(part, baseline)) if isinstance(baseline, Policy)
                      else rows_j)  # "logging": the logged rewards, which no model changes
            for name in names:
                out.setdefault(f"difference:{name}", []).append(differences[name].state(rows_j, base_j))
        return out

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
                {name: self.estimate_of(name, state) for name in self.estimators},
                state.weights,
                str(self.policy),
                {name: self.difference_of(name, state) for name in self.differences()},
                None if self.baseline is None else str(self.baseline),
                state.baseline_weights,
                self.min_support,
                state.coverage,
                state.propensity,
                state.marginal_weights,
                state.baseline_marginal_weights,
                tuple(name for name, est in self.estimators.items() if est.needs_embedding),
                tuple(name for name, est in self.estimators.items() if est.model_based),
            )

    def estimate_of(self, name: str, state: PolicyState) -> Estimate:
        """Estimator ``name``'s estimate from a merged state, with the reward model's standard error where the state
        holds the fold models' states: the grouped jackknife of its values V̂_j under the K fold models
        (:func:`~dr_scale.ope.estimators.fold_jackknife`), which the intervals add to the rows' in quadrature."""
        return _with_model_stderr(self.estimators[name], state.estimators[name], state.folds.get(name))

    def difference_of(self, name: str, state: PolicyState) -> Estimate:
        """The paired difference of estimator ``name`` from a merged state, with the reward model's standard error
        as :meth:`estimate_of`'s."""
        return _with_model_stderr(self.differences()[name], state.differences[name],
                                  state.folds.get(f"difference:{name}"))

    @property
    def dimensions(self) -> tuple[int | None, int | None]:
        """(d, k) a partition is read with."""
        return self.n_features, self.n_actions


def _with_model_of(rows: RowInputs, other: RowInputs) -> RowInputs:
    """``rows`` with the reward model's predictions ρ̂_π, ρ̂_a of ``other`` (the same rows, another model)."""
    return replace(rows, reward_hat_pi=other.reward_hat_pi, reward_hat_logged=other.reward_hat_logged)


def _with_model_stderr(estimator: Estimator | Difference, state: Moments, folds: list[Moments] | None) -> Estimate:
    """``estimator``'s estimate at ``state``, with the fold jackknife of its values under the fold models' states
    ``folds`` as ``model_stderr`` (as it is without them)."""
    out = estimator.result(state)
    if not folds or state.n == 0:
        return out
    return replace(out, model_stderr=fold_jackknife(np.array([estimator.result(m).value for m in folds])))


def _checked_count(name: str, value: object) -> int:
    """A positive integer by the shared rule (:data:`dr_scale.io.config.PositiveInt`, as ``--n-actions``)."""
    from dr_scale.io.config import PositiveInt, check  # pydantic: imported when a count is given

    count: int = check(PositiveInt, name, value)
    return count


def check_evaluation(evaluation: object) -> Evaluation:
    """``evaluation``, checked an :class:`Evaluation` (anything else is a
    :class:`~dr_scale.core.errors.ParameterError`)."""
    if not isinstance(evaluation, Evaluation):
        raise ParameterError(f"`evaluation` must be an Evaluation, e.g. Evaluation(\"column:target_action\"), got "
                             f"{type(evaluation).__name__} {evaluation!r:.60}")
    return evaluation

