"""Several policies evaluated on the same rows of one log (:class:`Comparison`), each part read once: their
merged states (:class:`ComparisonState`) and results with the paired differences V(A) − V(baseline)
(:class:`ComparisonResult`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from dr_scale.core.errors import ParameterError
from dr_scale.core.numbers import number
from dr_scale.logs.contract import LogDataError, Partition
from dr_scale.ope.diagnostics import Coverage
from dr_scale.ope.estimators import RowInputs
from dr_scale.ope.evaluation.results import EvaluationResult
from dr_scale.ope.evaluation.rows import policy_rows, with_propensities
from dr_scale.ope.evaluation.specification import LOGGING, Evaluation, check_evaluation
from dr_scale.ope.evaluation.states import PartitionSource, PolicyState
from dr_scale.policies import Policy


@dataclass(frozen=True)
class ComparisonState:
    """The merged :class:`PolicyState` of every policy of a :class:`Comparison`, by name. Merge with ``+``."""

    states: dict[str, PolicyState]

    def __add__(self, other: ComparisonState) -> ComparisonState:
        return ComparisonState({k: v + other.states[k] for k, v in self.states.items()})

    @property
    def rows(self) -> int:
        """The number of rows the state summarises (every policy's are the same)."""
        return next(iter(self.states.values())).weights.n

    def to_dict(self) -> dict[str, Any]:
        """The state as a JSON-ready dict, the policies' :meth:`PolicyState.to_dict` by name."""
        return {k: v.to_dict() for k, v in self.states.items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ComparisonState:
        """The state of a :meth:`to_dict` dict (``from_dict(s.to_dict())`` equals ``s``)."""
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
    >>> from dr_scale import LinearRewardModel, evaluate_partitions, read_log
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

    def to_dict(self, alpha: float = 0.05, interval: str = "normal") -> dict[str, Any]:
        """The results as a JSON-ready dict: the baseline's name and every policy's
        :meth:`EvaluationResult.to_dict` at level α with the ``interval`` kind, by name."""
        return {"baseline": self.baseline,
                "policies": {name: r.to_dict(alpha, interval) for name, r in self.results.items()}}

    def table(self, alpha: float = 0.05, interval: str = "normal") -> str:
        """One fixed-width table of every policy's estimates, then one of the paired differences; each row marked as
        in :meth:`EvaluationResult.table` ("insufficient data", "no reliable estimate", "model-based"), each policy's
        support and verdict notes below."""
        level = f"{100 * (1 - alpha):g}% CI ({interval})"
        pw = max(8, *map(len, self.results))
        ew = max(10, *(len(e) for r in self.results.values() for e in r.estimates))
        head = (f"{'policy':<{pw}} {'estimator':<{ew}} {'value':>12} {'std. error':>12} {level:>27} {'n':>10} "
                f"{'ESS':>12} {'max weight':>11}")
        lines = [head, "-" * len(head)]
        for policy, r in self.results.items():
            for name, e in r.estimates.items():
                value, stderr, bounds, marks = r.cells(name, alpha, interval)
                w = r.weights_of(name)  # MIPS: its marginal weights' ESS and largest weight
                lines.append(f"{policy:<{pw}} {name:<{ew}} {value:>12} {stderr:>12} {bounds:>27} {e.n:>10d} "
                             f"{number(w.ess):>12} {number(w.max_w):>11}{marks}")
        level = f"{100 * (1 - alpha):g}% CI (normal)"
        head = f"{'policy':<{pw}} {'estimator':<{ew}} {'V(A) − V(B)':>12} {'std. error':>12} {level:>27}"
        lines += ["", f"difference: each policy A − {self.baseline} (paired, on the same rows)", head, "-" * len(head)]
        for policy, r in self.results.items():
            for name in r.differences:
                value, stderr, bounds, marks = r.cells(name, alpha, difference=True)
                lines.append(f"{policy:<{pw}} {name:<{ew}} {value:>12} {stderr:>12} {bounds:>27}{marks}")
        notes = [n for policy, r in self.results.items()
                 for n in (r.support_note(), r.verdict_note() and f"{policy}: {r.verdict_note()}") if n]
        return "\n".join(lines + [line for n in notes for line in ("", n)])


@dataclass(frozen=True)
class Comparison(PartitionSource[ComparisonState]):
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
    >>> from dr_scale import LinearRewardModel, evaluate_partitions, read_log
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

    def __post_init__(self) -> None:
        if not isinstance(self.evaluations, dict) or len(self.evaluations) < 2:
            raise ParameterError("`evaluations` must be a dict of at least two Evaluations by name")
        for name, e in self.evaluations.items():
            if not isinstance(name, str):
                raise ParameterError(f"`evaluations`: the names must be strings, got {name!r}")
            check_evaluation(e)
            if e.baseline is not None:
                raise ParameterError(f"`evaluations` {name!r} has a baseline of its own; give the comparison's "
                                     "`baseline` instead")
        if self.baseline is None:  # frozen: set once, here
            object.__setattr__(self, "baseline", next(iter(self.evaluations)))
        if self.baseline != LOGGING and self.baseline not in self.evaluations:
            raise ParameterError(f"`baseline` {self.baseline!r} is not one of the policies "
                                 f"({', '.join(self.evaluations)}) nor {LOGGING!r}")
        names = {tuple(e.estimators) for e in self.evaluations.values()}
        if len(names) > 1:
            raise ParameterError("`evaluations` must all have the same estimators, to compare them")

    @property
    def baseline_name(self) -> str:
        """The baseline: a policy's name or ``"logging"`` (the first policy's name when none was given)."""
        baseline = self.baseline
        if baseline is None:
            raise TypeError("the comparison's baseline was not set")
        return baseline

    @functools.cached_property
    def paired(self) -> dict[str, Evaluation]:
        """Each evaluation with the comparison's baseline as its own (none for the baseline itself)."""
        if self.baseline == LOGGING:
            return {n: replace(e, baseline=LOGGING) for n, e in self.evaluations.items()}
        base = self.evaluations[self.baseline_name].policy
        return {n: e if n == self.baseline else replace(e, baseline=base) for n, e in self.evaluations.items()}

    @property
    def needs_features(self) -> bool:
        """Whether the rows' features x_i are read: for any of the evaluations."""
        return any(e.needs_features for e in self.paired.values())

    @property
    def columns(self) -> tuple[str, ...]:
        """The extra log columns any of the evaluations reads, each once."""
        return tuple(dict.fromkeys(c for e in self.paired.values() for c in e.columns))

    def state(self, part: Partition) -> ComparisonState:
        """Every policy's state on the partition's rows; a policy's rows are built once and shared where the
        evaluations agree on the reward model and k."""
        paired = self.paired
        logged = part.propensity if part.has_propensity else None
        # by propensity model: each predicts once
        estimated: dict[tuple[int, float], tuple[Partition, np.ndarray | None]] = {}
        for e in paired.values():
            key = (id(e.propensity_model), e.propensity_floor)
            if key not in estimated:
                estimated[key] = with_propensities(e, part)
        parts = {n: estimated[id(e.propensity_model), e.propensity_floor] for n, e in paired.items()}
        with np.errstate(over="ignore", invalid="ignore"):
            inputs = {n: policy_rows(e, parts[n][0]) for n, e in paired.items()}
            rows = {n: rows for n, (rows, _, _) in inputs.items()}
            states = {}
            for n, e in paired.items():
                base: RowInputs | None = None
                if e.baseline == LOGGING:
                    base = rows[n]
                elif isinstance(e.baseline, Policy):
                    b = self.evaluations.get(self.baseline_name)
                    if (b is not None and b.reward_model is e.reward_model and b.n_actions == e.n_actions
                            and b.propensity_model is e.propensity_model):
                        base = rows[self.baseline_name]
                    else:
                        base = e.rows(parts[n][0], e.baseline)
                _, target, _ = inputs[n]
                own, probs = parts[n]
                state = e.state_of_rows(own, rows[n], base, Coverage.of(part.action, target.mass()), target)
                states[n] = e.with_diagnostics(state, own, probs, target, logged)
        return ComparisonState(states)

    def result(self, state: ComparisonState) -> ComparisonResult:
        """Every policy's result of a merged state (:meth:`Evaluation.result`), with the paired differences."""
        paired = self.paired
        return ComparisonResult({n: e.result(state.states[n]) for n, e in paired.items()}, self.baseline_name)

    def explain(self, exc: LogDataError) -> LogDataError:
        """A data error with where k or d came from (:meth:`Evaluation.explain` of the first evaluation)."""
        return next(iter(self.evaluations.values())).explain(exc)

    @property
    def dimensions(self) -> tuple[int | None, int | None]:
        """(d, k) a partition is read with: the first evaluation's (they agree,
        :func:`~dr_scale.ope.evaluation.reading.with_log_defaults`)."""
        first = next(iter(self.evaluations.values()))
        return first.n_features, first.n_actions
