"""One policy's evaluation result and its rendering: the estimates, their "insufficient data" flags, the
warnings in words, a JSON-ready dict (:func:`estimate_dict`, :meth:`EvaluationResult.to_dict`) and a fixed-width
text table (:meth:`EvaluationResult.table`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from dr_scale.core.numbers import estimate, number
from dr_scale.ope.diagnostics import DEFAULT_MIN_ESS_RATIO, DEFAULT_MIN_SUPPORT, Coverage, WeightStats
from dr_scale.ope.estimators import Estimate, Projected
from dr_scale.propensity.diagnostics import PropensityState


def estimate_dict(e: Estimate, alpha: float, interval: str, insufficient: bool = False) -> dict[str, Any]:
    """value, stderr, interval (``ci``), confidence sequence (``cs``), n, the "insufficient data" flag and, for a
    tuned estimator, the chosen parameters (∞ as "inf") and why (``tuning``).

    The value and intervals are projected into the rewards' range (:meth:`Estimate.projected`); where that moved
    them, ``raw_value``, ``raw_ci`` and ``raw_cs`` keep the unprojected ones and ``projected`` is true. An estimate
    whose interval has no coverage guarantee (:attr:`Estimate.guarantee`) says so (``coverage_guarantee``: false),
    with ``model_based`` and the reward model's standard error (``model_stderr``) where it is known.
    """
    shown = e.projected(alpha, interval)
    out: dict[str, Any] = {"value": shown.value, "stderr": e.stderr, "ci": list(shown.ci), "cs": list(shown.cs),
                           "n": e.n, "insufficient_data": bool(insufficient)}
    if shown.moved:
        out.update(raw_value=shown.raw_value, raw_ci=list(shown.raw_ci), raw_cs=list(shown.raw_cs), projected=True)
    if not e.guarantee:
        out.update(coverage_guarantee=False, model_based=e.model_based)
    if e.model_stderr is not None:
        out["model_stderr"] = e.model_stderr
    chosen = {k: v if math.isfinite(v) else "inf" for k, v in e.chosen.items()}
    if chosen:
        out["chosen"] = chosen
    if e.tuning:
        out["tuning"] = e.tuning
    return out


def markers(e: Estimate, shown: Projected, insufficient: bool) -> str:
    """The notes after a table row: "insufficient data", no coverage guarantee, the raw value of a projection."""
    notes = ["insufficient data"] if insufficient else []
    if not e.guarantee:
        notes.append("model-based: no coverage guarantee" if e.model_based else "no coverage guarantee")
    if shown.moved:
        value, _, bounds = estimate(shown.raw_value, e.total_stderr, shown.raw_ci)
        notes.append(f"projected into the reward range, raw {value} {bounds}")
    return "".join(f"   {note}" for note in notes)


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
    >>> from dr_scale import Evaluation, LinearRewardModel, evaluate_partitions, read_log
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

    def _marginal_of(self, name: str) -> WeightStats | None:
        """MIPS's marginal weights' diagnostics when estimator ``name`` is marginalized, else None."""
        return self.marginal_weights if name in self.marginalized else None

    def weights_of(self, name: str) -> WeightStats:
        """The weights estimator ``name`` rests on: MIPS's marginal ones for a marginalized estimator, else w."""
        marginal = self._marginal_of(name)
        return self.weights if marginal is None else marginal

    def insufficient_of(self, name: str) -> bool:
        """Estimator ``name``'s value rests on fewer than ``min_support`` rows with a positive weight *of its
        own* (for MIPS: π lists the logged item's category) and a non-zero reward."""
        return self.weights_of(name).insufficient(self.min_support)

    def baseline_insufficient_of(self, name: str) -> bool:
        """:attr:`baseline_insufficient`, by the baseline's marginal weights for a marginalized estimator."""
        if self._marginal_of(name) is not None and self.baseline_marginal_weights is not None:
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
        plain = [n for n in self.estimates if self._marginal_of(n) is None] or not self.estimates
        if self.insufficient and plain:
            notes.append(f"{self.policy}: {self.weights.n_informative} rows where it takes the logged action and "
                         f"the reward is non-zero ({self.weights.n_matched} where it takes the logged action)")
        marginal = [n for n in self.estimates if self._marginal_of(n) is not None]
        m = self.marginal_weights
        if marginal and m is not None and m.insufficient(self.min_support):
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

    def to_dict(self, alpha: float = 0.05, interval: str = "normal") -> dict[str, Any]:
        """The result as a JSON-ready dict at level α with the ``interval`` kind: every estimator's
        :func:`estimate_dict`, the weights' (and the coverage's) diagnostics, the "insufficient data" flag, and
        with a baseline the paired differences; the support note and the propensities' diagnostics where there
        are some."""
        out: dict[str, Any] = {
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
        tuning = []
        for name, e in self.estimates.items():
            shown = e.projected(alpha, interval)
            chosen = ", ".join(f"{k}={v:g}" if math.isfinite(v) else f"{k}=∞" + (" (DR)" if k in ("tau", "max_weight")
                                                                             else "") for k, v in e.chosen.items())
            value, stderr, bounds = estimate(shown.value, e.total_stderr, shown.ci)
            w = self.weights_of(name)  # MIPS: its marginal weights' ESS and largest weight
            lines.append(
                f"{name:<{width}} {value:>12} {stderr:>12} {bounds:>27} {e.n:>10d} "
                f"{number(w.ess):>12} {number(w.max_w):>11}"
                + (f"   ({chosen})" if chosen else "") + markers(e, shown, self.insufficient_of(name))
            )
            tuning += [f"{name}: {e.tuning}"] if e.tuning else []
        if self.baseline is not None:
            head = f"{'estimator':<{width}} {'V(A) − V(B)':>12} {'std. error':>12} {level:>27}"
            lines += ["", f"difference: {self.policy} − {self.baseline} (paired, on the same rows)", head,
                      "-" * len(head)]
            for name, e in self.differences.items():
                shown = e.projected(alpha, interval)
                value, stderr, bounds = estimate(shown.value, e.total_stderr, shown.ci, sign=True)
                flagged = self.insufficient_of(name) or self.baseline_insufficient_of(name)
                lines.append(f"{name:<{width}} {value:>12} {stderr:>12} {bounds:>27}" + markers(e, shown, flagged))
        note = self.support_note()
        if note:
            lines += ["", note]
        if tuning:
            lines += ["", *tuning]
        return "\n".join(lines)
