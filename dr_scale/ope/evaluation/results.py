"""One policy's evaluation result and its rendering: the estimates, their "insufficient data" flags and verdicts
("no reliable estimate" where the weights fail a documented threshold, "model-based" for DM), the warnings in
words, a JSON-ready dict (:func:`estimate_dict`, :meth:`EvaluationResult.to_dict`) and a fixed-width text table
(:meth:`EvaluationResult.table`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from dr_scale.core.numbers import estimate, number
from dr_scale.ope.diagnostics import (
    DEFAULT_MIN_ESS_RATIO,
    DEFAULT_MIN_SUPPORT,
    MODEL_BASED,
    NO_RELIABLE_ESTIMATE,
    RELIABLE,
    Coverage,
    WeightStats,
)
from dr_scale.ope.estimators import Estimate, Projected
from dr_scale.propensity.diagnostics import PropensityState


def estimate_dict(e: Estimate, alpha: float, interval: str, insufficient: bool = False,
                  verdict: str | None = None) -> dict[str, Any]:
    """value, stderr, interval (``ci``), confidence sequence (``cs``), n, the "insufficient data" flag, the verdict
    where given ("reliable", "no reliable estimate", "model-based": :meth:`EvaluationResult.verdict_of`) and, for
    a tuned estimator, the chosen parameters (∞ as "inf") and why (``tuning``).

    The value and intervals are projected into the rewards' range (:meth:`Estimate.projected`); where that moved
    them, ``raw_value``, ``raw_ci`` and ``raw_cs`` keep the unprojected ones and ``projected`` is true. An estimate
    whose interval has no coverage guarantee (:attr:`Estimate.guarantee`) says so (``coverage_guarantee``: false),
    with ``model_based`` and the reward model's standard error (``model_stderr``) where it is known.
    """
    shown = e.projected(alpha, interval)
    out: dict[str, Any] = {"value": shown.value, "stderr": e.stderr, "ci": list(shown.ci), "cs": list(shown.cs),
                           "n": e.n, "insufficient_data": bool(insufficient)}
    if verdict is not None:
        out["verdict"] = verdict
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


def markers(e: Estimate, shown: Projected, insufficient: bool, raw: bool = True) -> str:
    """The notes after a table row: "insufficient data", no coverage guarantee (DM's: "model-based: no coverage
    guarantee") and, with ``raw``, the raw value and interval of a projection."""
    notes = ["insufficient data"] if insufficient else []
    if not e.guarantee:
        notes.append(f"{MODEL_BASED}: no coverage guarantee" if e.model_based else "no coverage guarantee")
    if raw and shown.ci_moved:
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
    model_based : tuple of str
        The estimators that rest on the reward model alone (DM): their verdict is "model-based", never "no
        reliable estimate" (:meth:`verdict_of`).

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
    model_based: tuple[str, ...] = ()  # the estimators that rest on the reward model alone (DM)

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

    def unreliable_of(self, name: str) -> list[str]:
        """Why estimator ``name``'s value is no reliable estimate (:meth:`WeightStats.unreliable
        <dr_scale.ope.diagnostics.WeightStats.unreliable>` of its own weights), in words; empty when it is
        reliable or model-based."""
        return [] if name in self.model_based else self.weights_of(name).unreliable(self.min_support)

    def verdict_of(self, name: str) -> str:
        """Estimator ``name``'s verdict: "model-based" (DM: no diagnostic of the weights applies), "no reliable
        estimate" (its weights fail a threshold of :meth:`unreliable_of`) or "reliable"."""
        if name in self.model_based:
            return MODEL_BASED
        return NO_RELIABLE_ESTIMATE if self.unreliable_of(name) else RELIABLE

    def baseline_unreliable_of(self, name: str) -> list[str]:
        """Why the baseline's value by estimator ``name`` is no reliable estimate (for "logging": fewer than
        ``min_support`` rows with a non-zero reward), in words; empty without a baseline or for DM."""
        if self.baseline is None or name in self.model_based:
            return []
        if self._marginal_of(name) is not None and self.baseline_marginal_weights is not None:
            return self.baseline_marginal_weights.unreliable(self.min_support)
        if self.baseline_weights is None:  # the logging policy: every row is its own, w = 1
            count = self.weights.n_rewarded
            return [f"{count} rows with a reward < {self.min_support}"] if count < self.min_support else []
        return self.baseline_weights.unreliable(self.min_support)

    def difference_verdict_of(self, name: str) -> str:
        """The verdict of V(policy) − V(baseline) by ``name``: "no reliable estimate" when either side is none."""
        if name in self.model_based:
            return MODEL_BASED
        return NO_RELIABLE_ESTIMATE if self.unreliable_of(name) or self.baseline_unreliable_of(name) else RELIABLE

    def verdict_note(self) -> str | None:
        """Which estimates are no reliable estimate and why, and which are model-based, in words (None when every
        estimate and difference is reliable or model-based)."""
        notes = []
        unreliable = [n for n in self.estimates if self.verdict_of(n) == NO_RELIABLE_ESTIMATE]
        for names in ([n for n in unreliable if self._marginal_of(n) is None],
                      [n for n in unreliable if self._marginal_of(n) is not None]):
            if names:
                notes.append(f"no reliable estimate by {', '.join(names)}: {'; '.join(self.unreliable_of(names[0]))}")
        against = [n for n in self.differences if self.verdict_of(n) == RELIABLE and self.baseline_unreliable_of(n)]
        if against:
            notes.append(f"no reliable difference from {self.baseline} by {', '.join(against)}: "
                         f"{'; '.join(self.baseline_unreliable_of(against[0]))}")
        if not notes:
            return None
        model = [n for n in self.estimates if n in self.model_based]
        if model:
            notes.append(f"{', '.join(model)} {'is' if len(model) == 1 else 'are'} model-based: resting on the reward "
                         "model alone, which no diagnostic of the weights checks")
        return "; ".join(notes) + " (thresholds: docs/estimators.md, \"No reliable estimate\")"

    def support_note(self) -> str | None:
        """Why values or differences carry "insufficient data", in words (None when they do not)."""
        notes = []
        plain = [n for n in self.estimates if self._marginal_of(n) is None] or not self.estimates
        if self.insufficient and plain:
            rows = "row" if self.weights.n_informative == 1 else "rows"
            notes.append(f"{self.policy}: {self.weights.n_informative} {rows} where it takes the logged action and "
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
        propensity = self.propensity.warnings(bool(self.model_based)) if self.propensity is not None else []
        return self.weights.warnings(min_ess_ratio) + coverage + propensity

    def to_dict(self, alpha: float = 0.05, interval: str = "normal") -> dict[str, Any]:
        """The result as a JSON-ready dict at level α with the ``interval`` kind: every estimator's
        :func:`estimate_dict`, the weights' (and the coverage's) diagnostics, the "insufficient data" flag, and
        with a baseline the paired differences; the support note and the propensities' diagnostics where there
        are some."""
        out: dict[str, Any] = {
            "policy": self.policy,
            "interval": interval,
            "estimates": {name: estimate_dict(e, alpha, interval, self.insufficient_of(name), self.verdict_of(name))
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
                                                        or self.baseline_insufficient_of(name),
                                                        self.difference_verdict_of(name))
                                    for name, e in self.differences.items()}}
        note = self.support_note()
        if note:
            out["support_note"] = note
        verdict = self.verdict_note()
        if verdict:
            out["verdict_note"] = verdict
        if self.propensity is not None:
            out["propensity_diagnostics"] = self.propensity.summary()
        return out

    def cells(self, name: str, alpha: float = 0.05, interval: str = "normal", difference: bool = False
              ) -> tuple[str, str, str, str]:
        """Estimator ``name``'s value (or difference from the baseline), standard error and interval as table text,
        projected into the rewards' range (:meth:`Estimate.projected`), and the marks after the row (:func:`markers`).
        The interval reads "no reliable estimate" where that is the verdict."""
        e = self.differences[name] if difference else self.estimates[name]
        shown = e.projected(alpha, interval)
        value, stderr, bounds = estimate(shown.value, e.total_stderr, shown.ci, sign=difference)
        verdict = self.difference_verdict_of(name) if difference else self.verdict_of(name)
        if verdict == NO_RELIABLE_ESTIMATE:
            bounds = NO_RELIABLE_ESTIMATE
        insufficient = self.insufficient_of(name) or (difference and self.baseline_insufficient_of(name))
        marks = markers(e, shown, insufficient, raw=verdict != NO_RELIABLE_ESTIMATE)  # no interval, raw or not
        return value, stderr, bounds, marks

    def table(self, alpha: float = 0.05, interval: str = "normal") -> str:
        """The results as a fixed-width text table; the interval's kind is in the header. An undefined
        number (SNIPS when π never takes a logged action, a standard error from one row) reads "—", never NaN.
        A value or difference resting on too few rows is marked "insufficient data" (:meth:`support_note`), and
        one whose weights fail the verdict's thresholds reads "no reliable estimate" (:meth:`verdict_note`)."""
        level = f"{100 * (1 - alpha):g}% CI ({interval})"
        width = max(10, *map(len, self.estimates))
        head = (f"{'estimator':<{width}} {'value':>12} {'std. error':>12} {level:>27} {'n':>10} {'ESS':>12} "
                f"{'max weight':>11}")
        lines = [head, "-" * len(head)]
        tuning = []
        for name, e in self.estimates.items():
            chosen = ", ".join(f"{k}={v:g}" if math.isfinite(v) else f"{k}=∞" + (" (DR)" if k in ("tau", "max_weight")
                                                                             else "") for k, v in e.chosen.items())
            value, stderr, bounds, marks = self.cells(name, alpha, interval)
            w = self.weights_of(name)  # MIPS: its marginal weights' ESS and largest weight
            lines.append(
                f"{name:<{width}} {value:>12} {stderr:>12} {bounds:>27} {e.n:>10d} "
                f"{number(w.ess):>12} {number(w.max_w):>11}"
                + (f"   ({chosen})" if chosen else "") + marks
            )
            tuning += [f"{name}: {e.tuning}"] if e.tuning else []
        if self.baseline is not None:
            head = f"{'estimator':<{width}} {'V(A) − V(B)':>12} {'std. error':>12} {level:>27}"
            lines += ["", f"difference: {self.policy} − {self.baseline} (paired, on the same rows)", head,
                      "-" * len(head)]
            for name in self.differences:
                value, stderr, bounds, marks = self.cells(name, alpha, interval, difference=True)
                lines.append(f"{name:<{width}} {value:>12} {stderr:>12} {bounds:>27}{marks}")
        notes = [n for n in (self.support_note(), self.verdict_note()) if n]
        return "\n".join(lines + [line for n in notes for line in ("", n)] + (["", *tuning] if tuning else []))
