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

import math
from dataclasses import dataclass, field, replace

import dask.bag as db
import numpy as np
import pyarrow as pa

from dr_scale.core.keyed_random import row_hash
from dr_scale.outofcore.compute import compute
from dr_scale.ope.diagnostics import DEFAULT_MIN_ESS_RATIO, Coverage, WeightStats
from dr_scale.core.errors import ParameterError, UserError
from dr_scale.ope.estimators import Difference, Estimate, Estimator, OnPolicy, RowInputs, make_estimators
from dr_scale.logs.contract import LogDataError, Partition, list_parts, log_metadata, partition_from_table, read_partition
from dr_scale.ope.mergeable import merge_all, tree_reduce
from dr_scale.ope.moments import Moments
from dr_scale.policies.target import Policy, parse_policy
from dr_scale.reward.models import predict_columns

#: The baseline that stands for the logging policy: its value is the logged rewards' mean.
LOGGING = "logging"


@dataclass(frozen=True)
class PolicyState:
    """Merged states of every estimator plus the weight diagnostics (and the paired differences)."""

    estimators: dict[str, Moments]
    weights: WeightStats
    differences: dict[str, Moments] = field(default_factory=dict)
    coverage: Coverage | None = None  # logged rows and π's mass per action
    rows_hash: int | None = None  # Σ row_hash mod 2⁶⁴ (the fit's fingerprint), for a cross-fitted model's check

    def __add__(self, other: "PolicyState") -> "PolicyState":
        both = self.coverage is not None and other.coverage is not None
        hashed = self.rows_hash is not None and other.rows_hash is not None
        return PolicyState({k: v + other.estimators[k] for k, v in self.estimators.items()},
                           self.weights + other.weights,
                           {k: v + other.differences[k] for k, v in self.differences.items()},
                           self.coverage + other.coverage if both else None,
                           (self.rows_hash + other.rows_hash) % 2 ** 64 if hashed else None)

    def to_dict(self) -> dict:
        out = {"estimators": {k: v.to_dict() for k, v in self.estimators.items()}, "weights": self.weights.to_dict(),
               "differences": {k: v.to_dict() for k, v in self.differences.items()}}
        if self.coverage is not None:
            out["coverage"] = self.coverage.to_dict()
        if self.rows_hash is not None:
            out["rows_hash"] = str(self.rows_hash)
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "PolicyState":
        return cls({k: Moments.from_dict(v) for k, v in d["estimators"].items()}, WeightStats.from_dict(d["weights"]),
                   {k: Moments.from_dict(v) for k, v in d["differences"].items()},
                   Coverage.from_dict(d["coverage"]) if "coverage" in d else None,
                   int(d["rows_hash"]) if "rows_hash" in d else None)


def estimate_dict(e: Estimate, alpha: float, interval: str) -> dict:
    """value, stderr, interval (``ci``), n and, for a tuned estimator, the chosen parameters (∞ as "inf")."""
    out = {"value": e.value, "stderr": e.stderr, "ci": list(map(float, e.ci(alpha, interval))), "n": e.n}
    chosen = {k: v if math.isfinite(v) else "inf" for k, v in e.chosen.items()}
    return {**out, "chosen": chosen} if chosen else out


@dataclass
class EvaluationResult:
    """Estimates (value, stderr, CI) per estimator, the weight diagnostics and V(A) − V(baseline)."""

    estimates: dict[str, Estimate]
    weights: WeightStats
    policy: str = ""
    differences: dict[str, Estimate] = field(default_factory=dict)
    baseline: str | None = None
    coverage: Coverage | None = None

    def warnings(self, min_ess_ratio: float = DEFAULT_MIN_ESS_RATIO) -> list[str]:
        """Poor overlap, tiny propensities, mass on actions the log never took, no matched rows: in words."""
        return self.weights.warnings(min_ess_ratio) + (self.coverage.warnings() if self.coverage else [])

    def to_dict(self, alpha: float = 0.05, interval: str = "normal") -> dict:
        out = {
            "policy": self.policy,
            "interval": interval,
            "estimates": {name: estimate_dict(e, alpha, interval) for name, e in self.estimates.items()},
            "diagnostics": {**self.weights.summary(), **(self.coverage.summary() if self.coverage else {})},
        }
        if self.baseline is not None:
            out["baseline"] = self.baseline
            out["difference"] = {"interval": "normal",
                                 **{name: estimate_dict(e, alpha, "normal") for name, e in self.differences.items()}}
        return out

    def table(self, alpha: float = 0.05, interval: str = "normal") -> str:
        """The results as a fixed-width text table; the interval's kind is in the header. An undefined
        number (SNIPS when π never takes a logged action, a standard error from one row) reads "—", never NaN."""
        level = f"{100 * (1 - alpha):g}% CI ({interval})"
        width = max(10, *map(len, self.estimates))
        head = (f"{'estimator':<{width}} {'value':>12} {'std. error':>12} {level:>27} {'n':>10} {'ESS':>12} "
                f"{'max weight':>11}")
        lines = [head, "-" * len(head)]
        for name, e in self.estimates.items():
            lo, hi = e.ci(alpha, interval)
            chosen = ", ".join(f"{k}={v:g}" if math.isfinite(v) else f"{k}=∞ (DR)" for k, v in e.chosen.items())
            bounds = f"[{_num(lo, '.6g')}, {_num(hi, '.6g')}]"
            lines.append(
                f"{name:<{width}} {_num(e.value, '.6g'):>12} {_num(e.stderr, '.4g'):>12} {bounds:>27} {e.n:>10d} "
                f"{_num(self.weights.ess, '.1f'):>12} {_num(self.weights.max_w, '.4g'):>11}"
                + (f"   ({chosen})" if chosen else "")
            )
        if self.baseline is not None:
            level = f"{100 * (1 - alpha):g}% CI (normal)"
            head = f"{'estimator':<{width}} {'V(A) − V(B)':>12} {'std. error':>12} {level:>27}"
            lines += ["", f"difference: {self.policy} − {self.baseline} (paired, on the same rows)", head,
                      "-" * len(head)]
            for name, e in self.differences.items():
                lo, hi = e.ci(alpha)
                bounds = f"[{_num(lo, '+.6g')}, {_num(hi, '+.6g')}]"
                lines.append(f"{name:<{width}} {_num(e.value, '+.6g'):>12} {_num(e.stderr, '.4g'):>12} {bounds:>27}")
        return "\n".join(lines)


def _num(x: float, spec: str) -> str:
    return format(x, spec) if np.isfinite(x) else "—"


@dataclass
class Evaluation:
    """What to evaluate: a target policy, the estimators, (for DM/DR) a reward model, and a baseline.

    ``baseline`` — another policy (any :func:`~dr_scale.policies.target.parse_policy` spelling) or
    ``"logging"`` (the logged rewards' mean) — adds V(policy) − V(baseline) per estimator,
    from paired per-row terms.
    """

    policy: Policy | str
    estimators: dict[str, Estimator] = field(default_factory=lambda: make_estimators(["IPS", "SNIPS"]))
    reward_model: object | None = None
    n_actions: int | None = None
    n_features: int | None = None
    model_source: str | None = None  # where the reward model came from, for messages
    k_source: str | None = None  # where n_actions came from, for messages (default: worked out here)
    baseline: Policy | str | None = None
    allow_other_log: bool = False  # use a cross-fitted reward model on a log other than the one it was fitted on

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
        return self.reward_model is not None or any(p.needs_features for p in self._policies)

    @property
    def _policies(self) -> list[Policy]:
        return [self.policy] + ([self.baseline] if isinstance(self.baseline, Policy) else [])

    @property
    def columns(self) -> tuple[str, ...]:
        """The extra log columns the policy (and the baseline) read."""
        return tuple(dict.fromkeys(c for p in self._policies for c in p.columns))

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

    def _inputs(self, part: Partition, policy: Policy | None = None) -> tuple[RowInputs, np.ndarray, int]:
        """:meth:`rows`, with π's decisions ((n,) actions or (n, k) probabilities) and k."""
        policy = policy or self.policy
        k = self.n_actions or int(max(part.action.max(initial=0), getattr(policy, "action", 0)) + 1)
        target = policy.decisions(part, k)
        if target.ndim == 1:  # a deterministic π: its actions
            reward_hat = None if self.reward_model is None else self._at_actions(part, target, k)
            return RowInputs.from_actions(part.reward, part.action, part.propensity, target,
                                          self._finite(reward_hat, part)), target, k
        reward_hat = None if self.reward_model is None else self._where_taken(part, target)
        return (RowInputs.from_arrays(part.reward, part.action, part.propensity, target,
                                      self._finite(reward_hat, part)), target, k)

    @property
    def checks_log(self) -> bool:
        """Whether the log must be the one the cross-fitted reward model was fitted on (its fingerprint)."""
        model = self.reward_model
        return (not self.allow_other_log and bool(getattr(model, "folds", 0))
                and "fingerprint" in (getattr(model, "metadata", None) or {}))

    def _finite(self, reward_hat, part: Partition):
        if reward_hat is not None and not np.isfinite(reward_hat).all():
            row = int(part.row_id[np.flatnonzero(~np.isfinite(reward_hat).reshape(len(part), -1).all(axis=1))[0]])
            raise UserError(f"{self._model_name()} predicts a NaN or infinite reward on {part.source} "
                            f"(e.g. row_id={row}): check its coefficients and the features' values")
        return reward_hat

    def _at_actions(self, part: Partition, target: np.ndarray, k: int) -> np.ndarray:
        """ρ̂_{π(x_i)}(x_i), (n,), from the model's columns of the actions in ``target`` only."""
        present = np.bincount(target, minlength=k) > 0
        taken = np.flatnonzero(present)
        columns = predict_columns(self.reward_model, part.X, taken, part.row_id)
        if taken.size == 1:
            return columns[:, 0]
        slot = np.cumsum(present) - 1  # each taken action's column in ``columns``
        return columns.take(np.arange(len(part)) * taken.size + slot[target])

    def _where_taken(self, part: Partition, probs: np.ndarray) -> np.ndarray:
        """ρ̂ (n, k) in the columns of the actions with some π(a|x_i) > 0, zeros in the others."""
        taken = np.flatnonzero(np.ones(len(part)) @ probs > 0)  # column sums by one BLAS mat-vec, not a strided axis-0 ``any``
        reward_hat = np.zeros(probs.shape)
        reward_hat[:, taken] = predict_columns(self.reward_model, part.X, taken, part.row_id)
        return reward_hat

    def state(self, part: Partition) -> PolicyState:
        """The partition's mergeable state. Float overflow here (rewards near 10³⁰⁸) is not warned about
        row by row: the sums come out non-finite and :meth:`result` refuses them with one clear error."""
        with np.errstate(over="ignore", invalid="ignore"):
            return self._state(part)

    def _state(self, part: Partition) -> PolicyState:
        rows, target, k = self._inputs(part)
        differences = self.differences()
        if differences:
            base = rows if self.baseline == LOGGING else self.rows(part, self.baseline)
            differences = {name: d.state(rows, base) for name, d in differences.items()}
        rows_hash = None
        if self.checks_log:  # the fit's fingerprint (dr_scale.reward.fitting.Extent): Σ h(row_id, a, r, |x|₀)
            rows_hash = int(row_hash(part.row_id, part.action, part.reward, np.diff(part.X.indptr))
                            .sum(dtype=np.uint64))
        return PolicyState(
            {name: est.state(rows) for name, est in self.estimators.items()},
            WeightStats.of(rows.weight, part.propensity, part.reward),
            differences,
            Coverage.of(part.action, target, k, rows.weight),
            rows_hash,
        )

    def result(self, state: PolicyState) -> EvaluationResult:
        """The estimates of a merged state; sums that overflowed float64 are an error, not an inf printed."""
        if self.checks_log and state.rows_hash is not None:
            fitted = self.reward_model.metadata["fingerprint"]
            here = f"{state.weights.n}:{state.rows_hash:016x}"
            if here != fitted:
                raise ParameterError(f"{self._model_name()} is cross-fitted on another log (fingerprint {fitted}; "
                                     f"this log's is {here}): its fold models would predict rows they may have seen, "
                                     "and cross-fitting would be silently lost. Refit it on this log (dr-scale fit "
                                     "--folds K), or pass `allow_other_log` to use it anyway")
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
                state.coverage,
            )

    # -- sources -------------------------------------------------------------
    def file_state(self, fs, path: str) -> PolicyState:
        try:
            part = read_partition(fs, path, n_features=self.n_features, n_actions=self.n_actions,
                                  with_features=self.needs_features, extra_columns=self.columns)
        except LogDataError as exc:
            raise self.explain(exc) from None
        return self.state(part)

    def table_state(self, table: pa.Table, source: str) -> PolicyState:
        try:
            part = partition_from_table(table, source, self.n_features, self.n_actions, self.needs_features)
        except LogDataError as exc:
            raise self.explain(exc) from None
        return self.state(part)


def _checked_count(name: str, value) -> int:
    """A positive integer by the shared rule (:data:`dr_scale.io.config.PositiveInt`, as ``--n-actions``)."""
    from dr_scale.io.config import PositiveInt, check  # pydantic: imported when a count is given

    return check(PositiveInt, name, value)


def _check_evaluation(evaluation) -> None:
    if not isinstance(evaluation, Evaluation):
        raise ParameterError(f"`evaluation` must be an Evaluation, e.g. Evaluation(\"column:target_action\"), got "
                             f"{type(evaluation).__name__} {evaluation!r:.60}")


def with_log_defaults(evaluation: Evaluation, fs, first_path: str) -> Evaluation:
    """A copy of ``evaluation`` with n_features / n_actions from the log's schema metadata where not given."""
    meta = log_metadata(fs, first_path)
    model = evaluation.reward_model
    for what, letter in (("n_actions", "k"), ("n_features", "d")):
        given = getattr(model, what, None)
        if what in meta and given is not None and given != meta[what]:
            raise UserError(f"{evaluation._model_name()} has {letter} = {given} {what[2:]}, but the log's metadata "
                            f"({first_path}) says {letter} = {meta[what]}; use a model fitted for this log")
    policy_k = evaluation.policy.n_actions
    if policy_k is not None and meta.get("n_actions", policy_k) != policy_k:
        raise LogDataError(first_path, "action", f"the log has {meta['n_actions']} actions, the policy "
                                                 f"{evaluation.policy} has {policy_k}")
    n_features = evaluation.n_features
    if n_features is None:
        n_features = meta.get("n_features", getattr(model, "n_features", None))
    n_actions = evaluation.n_actions if evaluation.n_actions is not None else meta.get("n_actions")
    filled = replace(evaluation, n_features=n_features, n_actions=n_actions)
    filled.k_source = (evaluation.k_source if evaluation.n_actions is not None
                       else f"the log's metadata ({first_path})" if n_actions else None)
    return filled


def log_states(url: str, evaluation: Evaluation, storage_options: dict | None = None) -> db.Bag:
    """A bag with one :class:`PolicyState` per Parquet part of the log at ``url``."""
    fs, paths = list_parts(url, storage_options)
    evaluation = with_log_defaults(evaluation, fs, paths[0])
    return db.from_sequence(paths, npartitions=len(paths)).map(lambda p: evaluation.file_state(fs, p))


def evaluate_log(url: str, evaluation: Evaluation, *, client=None, storage_options: dict | None = None,
                 progress: bool = False) -> EvaluationResult:
    """Evaluate on a Parquet file, folder or URL of partitions, one task per part.

    ``evaluation`` is not changed: the dimensions it lacks are read from the log into a copy.
    """
    _check_evaluation(evaluation)
    (state,) = compute(tree_reduce(log_states(url, evaluation, storage_options)), client=client, progress=progress)
    if state.weights.n == 0:
        raise LogDataError(url, None, "the log has no rows; nothing to evaluate")
    return evaluation.result(state)


def evaluate_dataframe(ddf, evaluation: Evaluation, *, client=None, progress: bool = False) -> EvaluationResult:
    """Evaluate on a Dask DataFrame with the logged-data columns, one task per partition."""
    _check_evaluation(evaluation)
    def state_of(pdf, i):
        return [evaluation.table_state(pa.Table.from_pandas(pdf, preserve_index=False), f"<dataframe partition {i}>")]

    import dask

    parts = [dask.delayed(state_of)(d, i) for i, d in enumerate(ddf.to_delayed())]
    (state,) = compute(tree_reduce(db.from_delayed(parts)), client=client, progress=progress)
    return evaluation.result(state)


def evaluate_partitions(parts: list[Partition], evaluation: Evaluation) -> EvaluationResult:
    """Evaluate in memory on already-read partitions (small logs, tests)."""
    _check_evaluation(evaluation)
    return evaluation.result(merge_all([evaluation.state(p) for p in parts]))


__all__ = [
    "LOGGING", "Evaluation", "EvaluationResult", "PolicyState", "evaluate_log", "evaluate_dataframe",
    "evaluate_partitions", "log_states", "reduce_states",
]
