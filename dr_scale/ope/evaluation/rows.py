"""The per-row quantities an :class:`~dr_scale.ope.evaluation.specification.Evaluation`'s estimators read on
a partition, from π(· | x_i) as one :class:`~dr_scale.policies.distributions.ActionDistribution`.

Per row (Dudík, Langford & Li 2011, Sec. 2): the propensity p̂_i (logged, or max(π̂₀(a_i | x_i), floor) from an
estimated logging policy), w_i = π(a_i|x_i) / p̂_i, and with a reward model ρ̂_π(x_i) = Σ_a π(a|x_i) ρ̂_a(x_i) and
ρ̂_{a_i}(x_i) (each row by the fold model that did not see it); MIPS's marginal weights w(x_i, e_i) =
p_π(e_i|x_i) / p_π₀(e_i|x_i) and BIPW's importance weights ŵ(x_i, a_i) where an estimator reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np
from numpy.typing import ArrayLike

from dr_scale.core.errors import UserError
from dr_scale.logs.contract import LogDataError, Partition, numeric_values, propensity_fault
from dr_scale.ope.estimators import RowInputs
from dr_scale.policies import ActionDistribution, ChosenActions, Policy
from dr_scale.reward.models import Features, RewardModel, mean_over_actions, predict_columns, predict_pairs

if TYPE_CHECKING:
    from dr_scale.ope.evaluation.specification import Evaluation


class PropensityEstimate(Protocol):
    """An estimated logging policy π̂₀ (e.g. :class:`~dr_scale.propensity.model.PropensityModel`): anything with
    ``predict_proba(X) -> (n, k)``; a cross-fitted one also takes ``row_id``, to predict each row with the fold
    model that did not see it (:func:`with_propensities` passes it where ``predict_proba`` accepts it)."""

    def predict_proba(self, X: Features) -> ArrayLike:
        """π̂₀(a | x_i) for every action a: (n, k), each row summing to 1."""


@dataclass(frozen=True)
class _ModelValues:
    """The reward model's ρ̂_a(x_i) of a partition's rows as :class:`~dr_scale.policies.distributions.ActionValues`,
    by blocks of actions (:func:`~dr_scale.reward.models.predict_columns`, ``predict_pairs``, ``mean_over_actions``),
    each row by the fold model that did not see it (``row_id``)."""

    model: RewardModel
    X: Features
    row_id: np.ndarray
    k: int

    def columns(self, actions: np.ndarray) -> np.ndarray:
        """ρ̂_a(x_i) for the given actions' columns: (n, len(actions))."""
        return predict_columns(self.model, self.X, actions, self.row_id)

    def pairs(self, actions: np.ndarray) -> np.ndarray:
        """ρ̂_{a_i}(x_i), one action per row: (n,)."""
        return predict_pairs(self.model, self.X, actions, self.row_id)

    def mean(self) -> np.ndarray:
        """(1/k) Σ_a ρ̂_a(x_i), (n,): the uniform policy's ρ̂_π(x_i) = Σ_a π(a|x_i) ρ̂_a(x_i), DR's model term
        (Dudík, Langford & Li 2011, Sec. 2.2, eq. 1, for stochastic π)."""
        return mean_over_actions(self.model, self.X, self.k, self.row_id)


def with_propensities(evaluation: Evaluation, part: Partition) -> tuple[Partition, np.ndarray | None]:
    """The partition with the propensities the estimators use, and π̂₀'s (n, k) probabilities (or None).

    With a propensity model: p̂_i = max(π̂₀(a_i | x_i), floor), each row predicted by the fold model that did not
    see it (``row_id``). Without one, a log with propensities is used as it is; a log without them is refused
    when an estimator needs them, and gets p = 1 placeholders (which DM never reads) otherwise.
    """
    model = evaluation.propensity_model
    if model is None:
        if part.has_propensity or len(part) == 0:
            return part, None
        if evaluation.needs_propensity:
            raise evaluation.missing_propensity(part.source)
        return replace(part, propensity=np.ones(len(part))), None
    probs = _estimated(evaluation, model, part)
    p_hat = np.maximum(probs[np.arange(len(part)), part.action], evaluation.propensity_floor)
    return replace(part, propensity=p_hat), probs


def _estimated(evaluation: Evaluation, model: PropensityEstimate, part: Partition) -> np.ndarray:
    """π̂₀(· | x_i), (n, k), checked: finite, ≥ 0, rows summing to 1."""
    import inspect

    kwargs = {"row_id": part.row_id} if "row_id" in inspect.signature(model.predict_proba).parameters else {}
    probs = np.asarray(model.predict_proba(part.X, **kwargs), dtype=np.float64)
    k = evaluation.n_actions or probs.shape[1]
    if probs.shape != (len(part), k):
        raise UserError(f"{evaluation._propensity_name()} gives {probs.shape[1]} probabilities per row, but the log "
                        f"{part.source} has k = {k} actions: use a propensity model fitted on this log")
    bad = ~np.isfinite(probs).all(axis=1) | (probs < 0).any(axis=1) | (np.abs(probs.sum(axis=1) - 1) > 1e-6)
    if bad.any():
        raise UserError(f"{evaluation._propensity_name()} gives no distribution on {part.source} (e.g. row_id="
                        f"{int(part.row_id[np.flatnonzero(bad)[0]])}): check its coefficients and the features")
    return probs


def policy_rows(evaluation: Evaluation, part: Partition, policy: Policy | None = None,
                target: ActionDistribution | None = None) -> tuple[RowInputs, ActionDistribution, int]:
    """The per-row quantities (r, w, ρ̂_π, ρ̂_a) of the partition for ``policy`` (default the evaluated one, which
    alone gets BIPW's importance weights), with π(· | x_i)
    (:class:`~dr_scale.policies.distributions.ActionDistribution`; ``target``: the one already computed on this
    partition) and k (:meth:`Evaluation.rows <dr_scale.ope.evaluation.specification.Evaluation.rows>`)."""
    rows, target, k = _policy_inputs(evaluation, part, policy, target)
    if not evaluation.needs_importance_weight or (policy is not None and policy is not evaluation.policy):
        return rows, target, k
    if evaluation.balancing_model is not None:  # the cross-fitted classifier's odds (dr_scale.ope.balancing)
        return (replace(rows, importance_weight=evaluation.balancing_model.weights(part.X, part.action, part.row_id)),
                target, k)
    column = evaluation.importance_weight
    if column not in part.table.column_names:
        raise LogDataError(part.source, column, "missing column: BIPW reads the estimated importance weights "
                           "ŵ(x_i, a_i) of the evaluated policy from it (docs/estimators.md)")
    weight = numeric_values(part.table.column(column), part.source, column, part.row_id).astype(np.float64)
    bad = ~(np.isfinite(weight) & (weight >= 0))
    if bad.any():
        raise LogDataError(part.source, column, "an estimated importance weight is negative, NaN or infinite",
                           int(part.row_id[np.flatnonzero(bad)[0]]))
    return replace(rows, importance_weight=weight), target, k


def _policy_inputs(evaluation: Evaluation, part: Partition, policy: Policy | None = None,
                   target: ActionDistribution | None = None) -> tuple[RowInputs, ActionDistribution, int]:
    """The rows of π from its :class:`~dr_scale.policies.distributions.ActionDistribution` on the partition:
    w_i = π(a_i|x_i) / p̂_i and, with a reward model, ρ̂_π(x_i) = Σ_a π(a|x_i) ρ̂_a(x_i) and ρ̂_{a_i}(x_i), the
    model asked for the actions π takes only (:class:`_ModelValues`)."""
    policy = policy or evaluation.target_policy
    if policy.needs_k and evaluation.n_actions is None:
        raise UserError(f"policy {policy} needs the number of actions k: give n_actions (--n-actions), a reward "
                        "model, or a log with dr_scale.n_actions metadata or an action vocabulary")
    k = evaluation.n_actions or int(max(part.action.max(initial=0), getattr(policy, "action", None) or 0) + 1)
    if policy.on_policy:  # π = π₀: w_i = 1, ρ̂_π(x_i) = ρ̂_{a_i}(x_i) (policies.simple.LoggingPolicy)
        logged = ChosenActions(part.action, k)  # the one-sample stand-in for π₀ in the diagnostics
        reward_hat = (None if evaluation.reward_model is None
                      else _finite(evaluation, logged.value(_values(evaluation.reward_model, part, k)), part))
        ones = np.ones(len(part))
        return (RowInputs(part.reward, ones, reward_hat, reward_hat, ones, target_prob=part.propensity),
                logged, k)
    target = policy.distribution(part, k) if target is None else target
    reward_hat_pi: np.ndarray | None = None
    reward_hat_logged: np.ndarray | None = None
    if evaluation.reward_model is not None:
        pi, logged_hat = target.value_and_logged(part.action, _values(evaluation.reward_model, part, k))
        reward_hat_pi, reward_hat_logged = _finite(evaluation, pi, part), _finite(evaluation, logged_hat, part)
    rows = RowInputs.from_logged_probability(part.reward, part.action, part.propensity, target.at(part.action),
                                             reward_hat_pi, reward_hat_logged)
    return _marginal(evaluation, part, rows, target, k), target, k


def _values(model: RewardModel, part: Partition, k: int) -> _ModelValues:
    """ρ̂_a(x_i) of the partition's rows, by blocks of actions, each row by the fold model that did not see it."""
    return _ModelValues(model, part.X, part.row_id, k)


def _marginal(evaluation: Evaluation, part: Partition, rows: RowInputs, target: ActionDistribution,
              k: int) -> RowInputs:
    """``rows`` with MIPS's marginal weights w(x_i, e_i) = p_π(e_i|x_i) / p_π₀(e_i|x_i), when an estimator
    needs them: p_π(e_i|x_i) from π and the catalogue's e(a), p_π₀ from the log's column."""
    if not evaluation.needs_embedding:
        return rows
    catalogue = evaluation.catalogue
    if catalogue is None or catalogue.embedding is None:
        raise UserError("MIPS and SNMIPS need the actions' embedding e(a): the log has no action catalogue "
                        "with an embedding column (_actions.parquet); give one as `catalogue`")
    embedding = catalogue.embedding
    if embedding.size < k:
        raise UserError(f"the action catalogue ({catalogue.source}) lists {embedding.size} actions, the log "
                        f"has k = {k}")
    column = evaluation.embedding_propensity
    p0 = numeric_values(part.table.column(column), part.source, column, part.row_id).astype(np.float64)
    fault = propensity_fault(p0)
    if fault is not None:
        raise LogDataError(part.source, column, fault[1], int(part.row_id[np.flatnonzero(fault[0])[0]]))
    return replace(rows, embedding_weight=target.category_probability(embedding, embedding[part.action]) / p0)


def _finite(evaluation: Evaluation, reward_hat: np.ndarray, part: Partition) -> np.ndarray:
    """``reward_hat`` (ρ̂ of the partition's rows), checked finite: a NaN or ∞ prediction is a user error."""
    if not np.isfinite(reward_hat).all():
        row = int(part.row_id[np.flatnonzero(~np.isfinite(reward_hat).reshape(len(part), -1).all(axis=1))[0]])
        raise UserError(f"{evaluation._model_name()} predicts a NaN or infinite reward on {part.source} "
                        f"(e.g. row_id={row}): check its coefficients and the features' values")
    return reward_hat
