"""The abstract base of the estimators: a per-row term, a function of its means, and the delta method."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike

from dr_scale.core.errors import ParameterError
from dr_scale.ope import checks as check
from dr_scale.ope.estimators.estimate import Estimate
from dr_scale.ope.estimators.inputs import RowInputs
from dr_scale.ope.intervals import Range, Summary, summary_of
from dr_scale.ope.moments import Moments

#: The per-row terms of the plain estimators, d_i = r_i − ρ̂_{a_i}(x_i): IPS and SNIPS read (w r, w), DR
#: (ρ̂_π + w d, w, ρ̂_π), SNDR (ρ̂_π, w d, w), DM (ρ̂_π). Without a reward model, the first two alone.
SHARED_TERMS = ("w r", "w", "ρ̂_π", "w d", "ρ̂_π + w d")


def shared_moments(rows: RowInputs) -> Moments:
    """The :class:`Moments` of :data:`SHARED_TERMS` over ``rows`` (of ("w r", "w") without ρ̂), computed once per
    batch of rows (:meth:`RowInputs.shared`): each plain estimator's state is its marginal (``Moments.take``,
    exact), so DM, IPS, DR, SNIPS and SNDR together cost one product of each kind and one co-moment matrix. Which
    of them a run asks for does not change any one's bits."""
    def make() -> Moments:
        """The five terms' moments (two without a model)."""
        w, r, c, logged = rows.weight, rows.reward, rows.reward_hat_pi, rows.reward_hat_logged
        if c is None or logged is None:
            return Moments.of(w * r, w, ranges=rows.ranges)
        wd = w * (r - logged)
        return Moments.of(w * r, w, c, wd, c + wd, ranges=rows.ranges)

    out: Moments = rows.shared("shared moments", make)
    return out


@dataclass(frozen=True)
class Estimator(ABC):
    """Abstract base class of the estimators: a per-row term, a function of its means, and the delta method.

    An estimator is V̂ = g(t̄), a function g (``value_of``) of the means t̄ = (1/n) Σ_i t(row_i)
    of its per-row terms (``terms``), with the delta method's standard error

        SE(V̂) = √( ∇g(t̄)ᵀ Σ̂ ∇g(t̄) / n ),    Σ̂ the terms' sample covariance,

    exact for the plain means (DM, IPS, DR). A subclass must define ``terms(rows) -> list[array]``
    (the base is abstract: ``Estimator()`` raises ``TypeError``), and sets ``name`` and ``needs_model``;
    a ratio estimator also defines ``value_of(means)`` and ``gradient(means)`` (the base's are those of
    the first term's plain mean); ``el_map`` maps the terms to (y, w) for the empirical-likelihood
    interval (one row: a plain mean), and ``model_term`` is the index of the term ρ̂_π, if any.

    Two ways in: :meth:`estimate` from numpy arrays in obp's layout, or ``state`` on
    batches of rows, merged with ``+``, then ``result`` (Parquet partitions, Dask).

    See Also
    --------
    DirectMethod, IPS, DoublyRobust, SNIPS, SNDR, SwitchDR, ClippedDR : The estimators.
    make_estimators : Estimators by name.
    dr_scale.ope.moments.Moments : The mergeable state.

    Examples
    --------
    >>> from dr_scale.ope.estimators import DoublyRobust
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> estimator = DoublyRobust()
    >>> isinstance(estimator, Estimator), estimator.name, estimator.needs_model
    (True, 'DR', True)

    The state of two halves of the rows, merged, gives the estimate of the whole:

    >>> halves = [{key: array[s] for key, array in log.items()} for s in (slice(0, 1000), slice(1000, None))]
    >>> states = [estimator.state(RowInputs.from_arrays(**half)) for half in halves]
    >>> merged = estimator.result(states[0] + states[1])
    >>> round(merged.value, 4) == round(estimator.estimate(**log).value, 4), merged.n
    (True, 2000)
    """

    name: ClassVar[str] = "estimator"
    needs_model: ClassVar[bool] = True
    needs_embedding: ClassVar[bool] = False  # the marginalized estimators: w(x, e) from the action catalogue
    needs_propensity: ClassVar[bool] = True  # reads p̂_i (all but DM, RM and BIPW)
    needs_importance_weight: ClassVar[bool] = False  # reads estimated weights ŵ(x_i, a_i) (BIPW)
    model_based: ClassVar[bool] = False  # rests on the reward model alone, not on the weights (DM): no weight verdict
    el_map: ClassVar[tuple] = ((1.0,),)
    model_term: ClassVar[int | None] = None
    #: Whether the estimator is a consistent, asymptotically normal mean under correct propensities (IPS, DR, SNIPS,
    #: SNDR …), so that its interval covers the value with probability → 1 − α; :attr:`guarantee` per instance.
    clt: ClassVar[bool] = False

    @property
    def guarantee(self) -> bool:
        """Whether this estimator's interval has an asymptotic coverage guarantee (:attr:`clt`)."""
        return self.clt

    @property
    def model_dependent(self) -> bool:
        """Whether its value leans on the reward model with no coverage guarantee (DM, DRos, the shrunk and tuned DR
        estimators): the cross-fitted fold models' jackknife adds the model's standard error to its intervals."""
        return self.needs_model and not self.guarantee

    @abstractmethod
    def terms(self, rows: RowInputs) -> list[np.ndarray]:
        """The per-row terms t(row_i) whose means t̄ the estimate V̂ = g(t̄) is a function of, one array each."""

    def value_of(self, means: np.ndarray) -> float:
        """V̂ = g(t̄); here the plain mean of the first term, g(t̄) = t̄₁."""
        return float(means[0])

    def gradient(self, means: np.ndarray) -> np.ndarray:
        """∇g(t̄), the delta method's gradient; here that of the plain mean, (1, 0, …, 0)."""
        out: np.ndarray = np.eye(1, means.size)[0]
        return out

    def linearize(self, state: Moments) -> tuple[float, np.ndarray, dict]:
        """(value, gradient of the value in the means, chosen parameters) at a state."""
        return self.value_of(state.mean), self.gradient(state.mean), {}

    def el_ranges(self, state: Moments) -> tuple[float, Range, Range, Range]:
        """The largest weight W seen, and the ranges of y at an unobserved row of weight 0, of y at
        one of weight W, and of the value (that of r).

        The unobserved row's reward r_f is anywhere in [min r, max r]; its model prediction is
        the mean one, c̄ = mean ρ̂_π (0 without a model), so y_f = c̄ + w_f (r_f − c̄)
        (IPS: y_f = w_f r_f).
        """
        r_lo, r_hi, top = state.low[0], state.high[0], state.high[1]
        c = 0.0 if self.model_term is None else float(state.mean[self.model_term])
        return top, (c, c), (c + top * (r_lo - c), c + top * (r_hi - c)), (r_lo, r_hi)

    # -- statistics ---------------------------------------------------------
    def state(self, rows: RowInputs) -> Moments:
        """The mergeable state of a batch of rows: the moments of the estimator's per-row terms.

        Parameters
        ----------
        rows : RowInputs
            The batch's per-row quantities (:meth:`RowInputs.from_arrays`, :meth:`RowInputs.from_actions`).

        Returns
        -------
        dr_scale.ope.moments.Moments
            The state; states of disjoint batches merge with ``+``.
        """
        if self.needs_model and rows.reward_hat_pi is None:
            raise ParameterError(f"{self.name} needs a reward model ρ̂ (`reward_hat`); none was given")
        shared = self.shared_terms()
        if shared and (not self.needs_model or rows.reward_hat_logged is not None):
            return shared_moments(rows).take([SHARED_TERMS.index(name) for name in shared])
        return Moments.of(*self.terms(rows), ranges=rows.ranges)

    def shared_terms(self) -> tuple[str, ...]:
        """:meth:`terms` by their names in :data:`SHARED_TERMS`, when they are all among them (their moments are
        then those of :func:`shared_moments`, computed once for every such estimator of a batch); else ()."""
        return ()

    def result(self, state: Moments) -> Estimate:
        """Estimate, delta-method standard error, n and the EL summary from a (merged) state.

        Parameters
        ----------
        state : dr_scale.ope.moments.Moments
            A state from :meth:`state`, or the sum of several.

        Returns
        -------
        Estimate
            The estimate; NaN value and standard error for a state of no rows.
        """
        if state.n == 0:
            return Estimate(float("nan"), float("nan"), 0)
        value, grad, chosen = self.linearize(state)
        variance = float(grad @ state.covariance() @ grad) / state.n
        return Estimate(value, float(np.sqrt(max(variance, 0.0))), state.n, self.summary(state, grad, value),
                        chosen, bounds=reward_bounds(state), guarantee=self.guarantee, model_based=self.model_based,
                        tuning=self.tuning(state))

    def tuning(self, state: Moments) -> str | None:
        """Why a tuned estimator chose its parameter at a state, in words (None: nothing is tuned)."""
        return None

    def summary(self, state: Moments, grad: np.ndarray, value: float | None = None) -> Summary:
        """The (y, w) moments and ranges of :mod:`dr_scale.ope.intervals` from a state; ``value`` the estimate."""
        a = np.asarray(self.el_map, dtype=np.float64) if len(self.el_map[0]) == state.m else grad[None, :]
        return summary_of(state.n, a @ state.mean, a @ state.comoment @ a.T / state.n,
                          *self.el_ranges(state), weighted=a.shape[0] == 2, estimate=value)

    # -- numpy API ----------------------------------------------------------
    def estimate(self, *, reward: ArrayLike, action: ArrayLike, propensity: ArrayLike, target_probs: ArrayLike,
                 reward_hat: ArrayLike | None = None) -> Estimate:
        """Estimate the target policy's value from arrays (obp's argument layout).

        Parameters
        ----------
        reward : array_like of float, shape (n,)
            The logged rewards r_i; at least one row.
        action : array_like of int, shape (n,)
            The logged actions a_i, in [0, k).
        propensity : array_like of float, shape (n,)
            p̂_i, the logging policy's probability of a_i, in (0, 1].
        target_probs : array_like of float, shape (n, k)
            π(a|x_i), rows summing to 1 (one-hot rows for a deterministic π).
        reward_hat : array_like of float, shape (n, k), optional
            ρ̂_a(x_i); required by the estimators that use a reward model (``needs_model``).

        Returns
        -------
        Estimate
            The value, its standard error, n, and the interval's summary.

        Examples
        --------
        >>> from dr_scale.ope.estimators import IPS
        >>> est = IPS().estimate(reward=[1.0, 0.0, 1.0], action=[0, 1, 1], propensity=[0.5, 0.5, 0.25],
        ...                      target_probs=[[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
        >>> round(est.value, 4), est.n  # (1/3)(1/0.5 + 0 + 0.5/0.25)
        (1.3333, 3)
        """
        check.vector("reward", reward)  # at least one row
        rows = RowInputs.from_arrays(reward, action, propensity, target_probs, reward_hat)
        return self.result(self.state(rows))

    def estimate_policy_value(self, **arrays: ArrayLike) -> float:
        """The point estimate alone, as obp's estimators return it."""
        return self.estimate(**arrays).value


def reward_bounds(state: Moments) -> tuple[float, float] | None:
    """[min r, max r], the range of the rewards a state saw (its first range), or None for a state without one."""
    if state.low.size == 0 or not (np.isfinite(state.low[0]) and np.isfinite(state.high[0])):
        return None
    return float(state.low[0]), float(state.high[0])
