"""Slate (ranking) estimators: one impression shows K items in slots 0 … K−1 and earns a reward per slot.

Notation: impression i shows the slate s_i = (a_i0, …, a_i,K−1) to context x_i and earns r_ik at slot k;
μ is the logging policy, π the target policy, and every estimator reduces an impression to its per-impression
terms, so the state is a :class:`~dr_scale.ope.moments.Moments` over impressions (n = the number of
impressions), merged with ``+``, and intervals, paired differences and confidence sequences come from it exactly
as for single decisions (:class:`~dr_scale.ope.estimators.base.Estimator`). The weights an impression needs
(:class:`SlateInputs`):

    slate weight   w_i     = π(s_i | x_i) / μ(s_i | x_i)                      (standard IPS)
    slot weights   w_ik    = π(a_ik at slot k | x_i) / μ(a_ik at slot k | x_i)  (independent IPS, pseudoinverse)
    prefix weights w_i,0:k = π(a_i0, …, a_ik | x_i) / μ(a_i0, …, a_ik | x_i)   (reward-interaction IPS, cascade DR)

The estimators equal Open Bandit Pipeline 0.5.7's ``obp.ope.estimators_slate`` on the same inputs
(``SlateStandardIPS``, ``SlateIndependentIPS``, ``SlateRewardInteractionIPS``, ``SlateCascadeDoublyRobust`` and
the three self-normalized ones); the pseudoinverse equals ``vw-estimators``' ``slates.pseudo_inverse``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike

from dr_scale.core.errors import ParameterError
from dr_scale.ope import checks as check
from dr_scale.ope.estimators.base import Estimator
from dr_scale.ope.estimators.difference import OnPolicy
from dr_scale.ope.estimators.estimate import Estimate
from dr_scale.ope.moments import Moments
from dr_scale.policies.slates import SlateProbabilities

#: What each optional input of :class:`SlateInputs` is, for the message of an estimator that lacks it.
NEEDS = {"slate_weight": "the slate weights π(s|x)/μ(s|x)",
         "slot_weight": "the per-slot weights π(a at k|x)/μ(a at k|x)",
         "prefix_weight": "the prefix weights π(a_0:k|x)/μ(a_0:k|x)", "q_logged": "a Q-model Q̂_k (`q_logged`)",
         "q_target": "a Q-model's mean under π (`q_target`)"}


@dataclass(frozen=True)
class SlateInputs:
    """An impression's per-slot quantities, as (n, K) arrays (n impressions, K slots; no item axis).

    ``shown[i, k]`` says whether impression i had a slot k (a shorter impression is padded with reward 0 and
    weight 1). Each weight array is None when the target policy does not give it (a Plackett–Luce π has no
    closed-form per-slot marginals); an estimator that needs a missing one raises a ``ParameterError``.
    ``q_logged[i, k]`` = Q̂_k(x_i, a_i0, …, a_ik) and ``q_target[i, k]`` = Σ_a π(a | x_i, a_i0, …, a_i,k−1)
    Q̂_k(x_i, a_i0, …, a_i,k−1, a), the cascade Q-function (the expected reward from slot k on) at the logged
    prefix and its mean under π's next choice (Kiyohara et al. 2022, Sec. 3.1): cascade DR only.
    """

    reward: np.ndarray  # (n, K) r_ik, 0 where not shown
    shown: np.ndarray  # (n, K) bool
    slate_weight: np.ndarray | None = None  # (n,) w_i
    slot_weight: np.ndarray | None = None  # (n, K) w_ik
    prefix_weight: np.ndarray | None = None  # (n, K) w_i,0:k
    q_logged: np.ndarray | None = None  # (n, K)
    q_target: np.ndarray | None = None  # (n, K)

    @property
    def n(self) -> int:
        """The number of impressions."""
        return int(self.reward.shape[0])

    @property
    def total(self) -> np.ndarray:
        """R_i = Σ_k r_ik, the impression's reward."""
        out: np.ndarray = self.reward.sum(axis=1)
        return out

    @property
    def ranges(self) -> tuple[np.ndarray, np.ndarray]:
        """(min, max) of (R_i, 0): the range of an impression's reward (the empirical-likelihood interval's value
        range); ±∞ for no impressions."""
        if self.n == 0:
            return np.full(2, np.inf), np.full(2, -np.inf)
        total = self.total
        return np.array([total.min(), 0.0]), np.array([total.max(), 0.0])

    def need(self, name: str, estimator: str) -> np.ndarray:
        """The array ``name``, or a ``ParameterError`` saying that ``estimator`` needs it."""
        value = getattr(self, name)
        if value is None:
            raise ParameterError(f"{estimator} needs {NEEDS[name]}, which this target policy does not give "
                                 "(a Plackett–Luce policy has no closed-form per-slot marginals)")
        out: np.ndarray = value
        return out

    @classmethod
    def from_rows(cls, impression: ArrayLike, slot: ArrayLike, reward: ArrayLike, *,
                  slate_weight: ArrayLike | None = None, slot_weight: ArrayLike | None = None,
                  prefix_weight: ArrayLike | None = None, q_logged: ArrayLike | None = None,
                  q_target: ArrayLike | None = None, n_slots: int | None = None) -> SlateInputs:
        """Group per-row arrays (one row per shown slot, any order) into impressions, in increasing impression id.

        ``slate_weight`` is per row and must be equal on an impression's rows (obp's layout repeats it);
        the others are per row. A slot shown twice in one impression raises a ``ParameterError``.

        Examples
        --------
        >>> rows = SlateInputs.from_rows([7, 7, 3], [1, 0, 0], [1.0, 0.0, 1.0], slot_weight=[2.0, 0.5, 1.0])
        >>> rows.reward.tolist(), rows.shown.tolist(), rows.slot_weight.tolist()
        ([[1.0, 0.0], [0.0, 1.0]], [[True, False], [True, True]], [[1.0, 1.0], [0.5, 2.0]])
        """
        reward = check.vector("reward", reward, allow_empty=True)
        m = reward.shape[0]
        impression = np.asarray(impression).reshape(-1)
        slot = check.actions("slot", slot, m, n_slots)
        if impression.shape[0] != m:
            raise ParameterError(f"`impression` has {impression.shape[0]} rows, `reward` {m}")
        ids, row_of = np.unique(impression, return_inverse=True)
        k = int(n_slots if n_slots is not None else (slot.max() + 1 if m else 0))
        cell = row_of * k + slot
        if np.unique(cell).size != m:
            raise ParameterError("a slot appears twice in one impression (`impression`, `slot`)")
        shown = np.zeros(ids.size * k, dtype=bool)
        shown[cell] = True

        def grid(values: ArrayLike | None, name: str, fill: float) -> np.ndarray | None:
            """The per-row ``values`` on the (impressions, K) grid, ``fill`` where no row; None for None."""
            if values is None:
                return None
            out = np.full(ids.size * k, fill)
            out[cell] = check.vector(name, values, m, allow_empty=True)
            return out.reshape(ids.size, k)

        slate = grid(slate_weight, "slate_weight", np.nan)
        per_slate = None
        if slate is not None:
            per_slate = np.nanmax(slate, axis=1) if ids.size else np.zeros(0)
            if np.any(np.nanmin(slate, axis=1) != per_slate):
                raise ParameterError("`slate_weight` differs between the rows of one impression")
        return cls(grid(reward, "reward", 0.0), shown.reshape(ids.size, k), per_slate,  # type: ignore[arg-type]
                   grid(slot_weight, "slot_weight", 1.0), grid(prefix_weight, "prefix_weight", 1.0),
                   grid(q_logged, "q_logged", 0.0), grid(q_target, "q_target", 0.0))

    @classmethod
    def from_probabilities(cls, reward: np.ndarray, target: SlateProbabilities, logging: SlateProbabilities,
                           q_logged: np.ndarray | None = None, q_target: np.ndarray | None = None) -> SlateInputs:
        """The inputs of full slates ((n, K) rewards) from π's and μ's probabilities of the logged slates
        (:meth:`dr_scale.policies.slates.SlatePolicy.probabilities`): each weight the ratio of the two.

        Examples
        --------
        >>> from dr_scale.policies.slates import SlateProbabilities
        >>> mu = SlateProbabilities.factored(np.array([[0.5, 0.25]]))
        >>> pi = SlateProbabilities.factored(np.array([[0.5, 0.5]]))
        >>> rows = SlateInputs.from_probabilities(np.array([[1.0, 1.0]]), pi, mu)
        >>> rows.slate_weight.tolist(), rows.prefix_weight.tolist(), rows.slot_weight.tolist()
        ([2.0], [[1.0, 2.0]], [[1.0, 2.0]])
        """
        slot = None if target.marginal is None or logging.marginal is None else target.marginal / logging.marginal
        return cls(np.asarray(reward, dtype=np.float64), np.ones(reward.shape, dtype=bool),
                   target.slate / logging.slate, slot, target.prefix / logging.prefix, q_logged, q_target)

    @classmethod
    def from_obp(cls, *, slate_id: ArrayLike, reward: ArrayLike, position: ArrayLike, pscore: ArrayLike | None = None,
                 evaluation_policy_pscore: ArrayLike | None = None, pscore_item_position: ArrayLike | None = None,
                 evaluation_policy_pscore_item_position: ArrayLike | None = None,
                 pscore_cascade: ArrayLike | None = None, evaluation_policy_pscore_cascade: ArrayLike | None = None,
                 action: ArrayLike | None = None, q_hat: ArrayLike | None = None,
                 evaluation_policy_action_dist: ArrayLike | None = None, len_list: int | None = None,
                 n_unique_action: int | None = None) -> SlateInputs:
        """The inputs from obp's arguments (``obp.ope.estimators_slate``; per-row arrays, probabilities not weights).

        ``q_hat`` and ``evaluation_policy_action_dist`` are obp's flat (rows × ``n_unique_action``) arrays, rows
        sorted by slate and position as obp requires; they are reduced here to Q̂ at the logged item and its
        mean under π, per row.
        """
        def ratio(num: ArrayLike | None, den: ArrayLike | None) -> np.ndarray | None:
            """π's probability over μ's, per row; None when either is not given."""
            if num is None or den is None:
                return None
            return np.asarray(num, dtype=np.float64) / np.asarray(den, dtype=np.float64)

        q_logged = q_target = None
        if q_hat is not None and evaluation_policy_action_dist is not None and action is not None:
            q = np.asarray(q_hat, dtype=np.float64).reshape(-1, int(n_unique_action or 0))
            dist = np.asarray(evaluation_policy_action_dist, dtype=np.float64).reshape(q.shape)
            q_logged = q[np.arange(q.shape[0]), np.asarray(action)]
            q_target = (q * dist).sum(axis=1)
        return cls.from_rows(slate_id, position, reward, slate_weight=ratio(evaluation_policy_pscore, pscore),
                             slot_weight=ratio(evaluation_policy_pscore_item_position, pscore_item_position),
                             prefix_weight=ratio(evaluation_policy_pscore_cascade, pscore_cascade),
                             q_logged=q_logged, q_target=q_target, n_slots=len_list)


@dataclass(frozen=True)
class SlateEstimator(Estimator):
    """The base of the slate estimators: per-impression terms of :class:`SlateInputs` (n = impressions).

    Intervals, paired differences and confidence sequences are those of :class:`Estimator` over impressions;
    the empirical-likelihood interval is that of a plain mean of the linearised terms.
    """

    needs_model: ClassVar[bool] = False

    def terms(self, rows: SlateInputs) -> list[np.ndarray]:  # type: ignore[override]
        """The per-impression terms whose means the estimate is a function of."""
        raise NotImplementedError

    def state(self, rows: SlateInputs) -> Moments:  # type: ignore[override]
        """The mergeable state of a batch of impressions (whole impressions: an impression's rows in one batch)."""
        return Moments.of(*self.terms(rows), ranges=rows.ranges)

    def estimate(self, **arrays: Any) -> Estimate:
        """The estimate from obp's arguments (:meth:`SlateInputs.from_obp`) or a :class:`SlateInputs` (``rows=``).

        Examples
        --------
        >>> est = SlateStandardIPS().estimate(slate_id=[0, 0, 1, 1], reward=[1.0, 0.0, 0.0, 1.0],
        ...                                   position=[0, 1, 0, 1], pscore=[0.5, 0.5, 0.25, 0.25],
        ...                                   evaluation_policy_pscore=[0.5, 0.5, 0.5, 0.5])
        >>> est.value, est.n  # (1/2)(1·1 + 2·1)
        (1.5, 2)
        """
        rows = arrays.pop("rows", None)
        return self.result(self.state(rows if rows is not None else SlateInputs.from_obp(**arrays)))


@dataclass(frozen=True)
class SlateStandardIPS(SlateEstimator):
    """Standard slate IPS (Li et al. 2018; obp's ``SlateStandardIPS``): the whole slate's weight on its reward.

        V̂ = (1/n) Σ_i w_i Σ_k r_ik,    w_i = π(s_i|x_i) / μ(s_i|x_i)

    Unbiased for any reward structure; its weights are products over slots, so its variance grows
    exponentially with K.
    """

    name: ClassVar[str] = "SlateIPS"

    def terms(self, rows: SlateInputs) -> list[np.ndarray]:  # type: ignore[override]
        """(w_i R_i,)."""
        return [rows.need("slate_weight", self.name) * rows.total]


@dataclass(frozen=True)
class SlateIndependentIPS(SlateEstimator):
    """Independent IPS (Li et al. 2018; obp's ``SlateIndependentIPS``): each slot weighted by its own marginal.

        V̂ = (1/n) Σ_i Σ_k w_ik r_ik,    w_ik = π(a_ik at k | x_i) / μ(a_ik at k | x_i)

    Unbiased when a slot's reward depends on its own item only (no interaction between slots).
    """

    name: ClassVar[str] = "SlateIIPS"

    def terms(self, rows: SlateInputs) -> list[np.ndarray]:  # type: ignore[override]
        """(Σ_k w_ik r_ik,)."""
        return [(rows.need("slot_weight", self.name) * rows.reward).sum(axis=1)]


@dataclass(frozen=True)
class SlateRewardInteractionIPS(SlateEstimator):
    """Reward-interaction IPS (McInerney et al. 2020; obp's ``SlateRewardInteractionIPS``): the prefix's weight.

        V̂ = (1/n) Σ_i Σ_k w_i,0:k r_ik,    w_i,0:k = π(a_i0 … a_ik | x_i) / μ(a_i0 … a_ik | x_i)

    Unbiased under the cascade assumption (a slot's reward depends on the items above it, not below).
    """

    name: ClassVar[str] = "SlateRIPS"

    def terms(self, rows: SlateInputs) -> list[np.ndarray]:  # type: ignore[override]
        """(Σ_k w_i,0:k r_ik,)."""
        return [(rows.need("prefix_weight", self.name) * rows.reward).sum(axis=1)]


@dataclass(frozen=True)
class SlateCascadeDR(SlateEstimator):
    """Cascade doubly robust (Kiyohara et al., WSDM 2022, eq. 4; obp's ``SlateCascadeDoublyRobust``).

        V̂ = (1/n) Σ_i Σ_k [ w_i,0:k (r_ik − Q̂_k(x_i, a_i,0:k))
                            + w_i,0:k−1 E_{a∼π(·|x_i, a_i,0:k−1)} Q̂_k(x_i, a_i,0:k−1, a) ]

    with w_i,0:−1 = 1; Q̂_k estimates the reward from slot k on. RIPS plus a control variate of mean zero:
    unbiased under the cascade assumption whatever Q̂, and of lower variance the better Q̂ is.
    """

    name: ClassVar[str] = "SlateCascadeDR"
    needs_model: ClassVar[bool] = True

    def terms(self, rows: SlateInputs) -> list[np.ndarray]:  # type: ignore[override]
        """(Σ_k [w_0:k (r_k − Q̂_k) + w_0:k−1 E_π Q̂_k],)."""
        w = rows.need("prefix_weight", self.name)
        before = np.concatenate([np.ones((w.shape[0], 1)), w[:, :-1]], axis=1)
        q_logged, q_target = rows.need("q_logged", self.name), rows.need("q_target", self.name)
        return [(w * (rows.reward - q_logged) + before * q_target * rows.shown).sum(axis=1)]


@dataclass(frozen=True)
class SelfNormalizedSlateStandardIPS(SlateEstimator):
    """Self-normalized standard slate IPS (obp's ``SelfNormalizedSlateStandardIPS``).

        V̂ = [(1/n) Σ_i w_i R_i] / [Σ_i K_i w_i / Σ_i K_i],    K_i the slots impression i shows

    (obp divides by the mean weight over rows; with full slates the denominator is (1/n) Σ_i w_i).
    """

    name: ClassVar[str] = "SNSlateIPS"

    def terms(self, rows: SlateInputs) -> list[np.ndarray]:  # type: ignore[override]
        """(w_i R_i, K_i w_i, K_i)."""
        w, k = rows.need("slate_weight", self.name), rows.shown.sum(axis=1).astype(np.float64)
        return [w * rows.total, k * w, k]

    def value_of(self, means: np.ndarray) -> float:
        """V̂ = t̄₁ t̄₃ / t̄₂; NaN when Σ w_i = 0."""
        return float(means[0] * means[2] / means[1]) if means[1] != 0 else float("nan")

    def gradient(self, means: np.ndarray) -> np.ndarray:
        """∇(t̄₁ t̄₃ / t̄₂) = (t̄₃/t̄₂, −t̄₁ t̄₃/t̄₂², t̄₁/t̄₂)."""
        if means[1] == 0:
            return np.full(3, np.nan)
        return np.array([means[2] / means[1], -means[0] * means[2] / means[1] ** 2, means[0] / means[1]])


@dataclass(frozen=True)
class _PerSlotSelfNormalized(SlateEstimator):
    """Σ_k of a per-slot self-normalized mean: V̂ = Σ_k [(1/n) Σ_i w_ik r_ik] / [Σ_i∈k w_ik / n_k], n_k the
    impressions showing slot k (obp's ``BaseSlateSelfNormalizedInverseProbabilityWeighting``)."""

    weight: ClassVar[str] = ""

    def terms(self, rows: SlateInputs) -> list[np.ndarray]:  # type: ignore[override]
        """(w_ik r_ik for each k, then w_ik 1{k shown} for each k, then 1{k shown} for each k)."""
        w = rows.need(self.weight, self.name) * rows.shown
        shown = rows.shown.astype(np.float64)
        return [*(w * rows.reward).T, *w.T, *shown.T]

    def value_of(self, means: np.ndarray) -> float:
        """V̂ = Σ_k Ā_k N̄_k / B̄_k (A: w r, B: w, N: shown); NaN when some slot's Σ w = 0."""
        a, b, c = np.split(means, 3)
        return float(np.sum(a * c / b)) if np.all(b != 0) else float("nan")

    def gradient(self, means: np.ndarray) -> np.ndarray:
        """∂/∂Ā_k = N̄_k/B̄_k, ∂/∂B̄_k = −Ā_k N̄_k/B̄_k², ∂/∂N̄_k = Ā_k/B̄_k."""
        a, b, c = np.split(means, 3)
        if np.any(b == 0):
            return np.full(means.size, np.nan)
        return np.concatenate([c / b, -a * c / b**2, a / b])


@dataclass(frozen=True)
class SelfNormalizedSlateIndependentIPS(_PerSlotSelfNormalized):
    """Self-normalized independent IPS (obp's ``SelfNormalizedSlateIndependentIPS``): each slot's IPS mean divided
    by that slot's mean weight, summed over slots."""

    name: ClassVar[str] = "SNSlateIIPS"
    weight: ClassVar[str] = "slot_weight"


@dataclass(frozen=True)
class SelfNormalizedSlateRewardInteractionIPS(_PerSlotSelfNormalized):
    """Self-normalized reward-interaction IPS (obp's ``SelfNormalizedSlateRewardInteractionIPS``): each slot's
    RIPS mean divided by that slot's mean prefix weight, summed over slots."""

    name: ClassVar[str] = "SNSlateRIPS"
    weight: ClassVar[str] = "prefix_weight"


@dataclass(frozen=True)
class SlatePseudoInverse(SlateEstimator):
    """The pseudoinverse estimator (Swaminathan et al., NeurIPS 2017, Example 4) for additive slate rewards under a
    logging policy that draws the slots independently (a product distribution over the Cartesian product of slots).

        V̂ = (1/n) Σ_i R_i (Σ_k w_ik − K_i + 1),    w_ik = π(a_ik at k | x_i) / μ(a_ik at k | x_i)

    Unbiased when R_i = Σ_k φ_k(x_i, a_ik) (no interaction between slots); as ``vw-estimators``'
    ``slates.pseudo_inverse.Estimator``.

    Examples
    --------
    >>> rows = SlateInputs.from_rows([0, 0], [0, 1], [1.0, 0.0], slot_weight=[2.0, 0.5])
    >>> SlatePseudoInverse().result(SlatePseudoInverse().state(rows)).value  # 1 · (2 + 0.5 − 1)
    1.5
    """

    name: ClassVar[str] = "SlatePI"

    def terms(self, rows: SlateInputs) -> list[np.ndarray]:  # type: ignore[override]
        """(R_i (Σ_k w_ik − K_i + 1),)."""
        w = rows.need("slot_weight", self.name) * rows.shown
        return [rows.total * (w.sum(axis=1) - rows.shown.sum(axis=1) + 1)]


@dataclass(frozen=True)
class SlateOnPolicy(OnPolicy):
    """The logging policy's value from its own impressions, on-policy: (1/n) Σ_i R_i (a paired baseline)."""

    def terms(self, rows: SlateInputs) -> list[np.ndarray]:  # type: ignore[override]
        """(R_i,)."""
        return [rows.total]


#: The slate estimators by name.
SLATE_ESTIMATORS: dict[str, type[SlateEstimator]] = {
    cls.name: cls for cls in (SlateStandardIPS, SlateIndependentIPS, SlateRewardInteractionIPS, SlateCascadeDR,
                              SelfNormalizedSlateStandardIPS, SelfNormalizedSlateIndependentIPS,
                              SelfNormalizedSlateRewardInteractionIPS, SlatePseudoInverse)}
