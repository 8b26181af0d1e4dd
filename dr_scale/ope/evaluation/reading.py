"""Evaluate on a log: an :class:`~dr_scale.ope.evaluation.specification.Evaluation` or a
:class:`~dr_scale.ope.evaluation.comparison.Comparison` completed by the log's facts (its d and k, vocabulary,
action catalogue, the keyed split it reads), one state per part, tree-reduced (``dask.bag``), on an opened log's
Parquet parts (:func:`evaluate_log`), a Dask DataFrame (:func:`evaluate_dataframe`) or partitions in memory
(:func:`evaluate_partitions`)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, overload

import dask
import dask.bag as db

from dr_scale.core.errors import ParameterError, UserError
from dr_scale.logs.contract import LogDataError, Partition
from dr_scale.logs.filters import LogFilter
from dr_scale.logs.listing import SPEC_FILE
from dr_scale.logs.opened import OpenedLog, open_log
from dr_scale.logs.spec import table_spec
from dr_scale.logs.writing import table_from_pandas
from dr_scale.ope.evaluation.comparison import Comparison, ComparisonResult, ComparisonState
from dr_scale.ope.evaluation.results import EvaluationResult
from dr_scale.ope.evaluation.slots import BySlot, SlotResult, SlotStates, check_by_slot
from dr_scale.ope.evaluation.specification import Evaluation, check_evaluation
from dr_scale.ope.evaluation.states import PolicyState
from dr_scale.outofcore.compute import compute, one_key
from dr_scale.outofcore.mergeable import merge_all, parts_bag, tree_reduce
from dr_scale.policies import Policy
from dr_scale.reward.models import check_model_actions, on_other_half

if TYPE_CHECKING:
    import dask.dataframe as dd
    from distributed import Client


@overload
def with_log_defaults(evaluation: Evaluation, logs: OpenedLog) -> Evaluation:
    """An evaluation completed is an evaluation."""


@overload
def with_log_defaults(evaluation: Comparison, logs: OpenedLog) -> Comparison:
    """A comparison completed is a comparison."""


def with_log_defaults(evaluation: Evaluation | Comparison, logs: OpenedLog) -> Evaluation | Comparison:
    """A copy of ``evaluation`` with its d and k by the log's rule (:meth:`~dr_scale.logs.opened.OpenedLog.dimensions`:
    as given, else the log's metadata or vocabulary, else its reward or propensity model's), and its policies'
    actions named by value resolved by the log's vocabulary; a model or policy of another log's d or k is refused.
    A comparison's evaluations each so, and they must agree on k."""
    if isinstance(evaluation, Comparison):
        filled = {n: with_log_defaults(e, logs) for n, e in evaluation.evaluations.items()}
        ks = {e.n_actions for e in filled.values()}
        if len(ks) > 1:
            raise UserError(f"the policies' evaluations disagree on the number of actions k ({sorted(ks, key=str)}); "
                            "give the same n_actions and reward model to all")
        return Comparison(filled, evaluation.baseline)
    actions, meta, first_path = logs.vocabulary, logs.metadata, logs.paths[0]
    if actions is not None and meta.get("n_actions", len(actions)) != len(actions):
        raise LogDataError(first_path, "action", f"the log's metadata says {meta['n_actions']} actions, its "
                                                 f"vocabulary ({SPEC_FILE}) lists {len(actions)}")
    if actions is not None:
        meta["n_actions"] = len(actions)
    evaluation = replace(evaluation, policy=evaluation.target_policy.resolve(actions),
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
    policy_k = evaluation.target_policy.n_actions
    if policy_k is not None and meta.get("n_actions", policy_k) != policy_k:
        raise LogDataError(first_path, "action", f"the log has {meta['n_actions']} actions, the policy "
                                                 f"{evaluation.policy} has {policy_k}")
    n_features, n_actions = logs.dimensions(evaluation.n_features, evaluation.n_actions, (model, propensity))
    return replace(evaluation, n_features=n_features, n_actions=n_actions,
                   k_source=(evaluation.k_source if evaluation.n_actions is not None
                             else f"the log's metadata ({first_path})" if n_actions else None))


def log_states(logs: str | OpenedLog, evaluation: Evaluation | Comparison,
               storage_options: dict[str, Any] | None = None, log_filter: LogFilter | None = None) -> db.Bag:
    """A bag with one state per Parquet part of the log ``logs`` (a URL or an opened log, :func:`open_log`)
    (:class:`PolicyState`, or a :class:`ComparisonState` for a :class:`Comparison`): each part read once."""
    return _log_states(open_log(logs, storage_options, log_filter), evaluation)[1]


def _log_states(logs: OpenedLog, evaluation: Evaluation | Comparison, by_slot: bool = False
                ) -> tuple[Evaluation | Comparison | BySlot, db.Bag]:
    """(the evaluation with the log's dimensions and vocabulary — per slot with ``by_slot`` —, the bag of its
    states per part)."""
    evaluation = with_log_defaults(evaluation, logs)
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
    source: Evaluation | Comparison | BySlot = BySlot(check_by_slot(evaluation)) if by_slot else evaluation

    def file_state(path: str, evaluation: Evaluation | Comparison | BySlot) -> Any:
        """The state of the part at ``path``. (``fs`` travels inside the function, pickled without its secrets,
        which each worker adds back; given as a map argument it reached a LocalCluster's workers without them:
        tests/io/test_storage_secrets.py.)"""
        return evaluation.file_state(fs, path)

    return source, parts_bag(parts).map(file_state, one_key(source))


def _with_catalogue(evaluation: Evaluation | Comparison, logs: OpenedLog) -> Evaluation | Comparison:
    """``evaluation`` with the log's action catalogue where a marginalized estimator needs it and none was given."""
    if isinstance(evaluation, Comparison):
        if not any(e.needs_embedding and e.catalogue is None for e in evaluation.evaluations.values()):
            return evaluation
        return Comparison({n: e if e.catalogue is not None else replace(e, catalogue=logs.catalogue)
                           for n, e in evaluation.evaluations.items()}, evaluation.baseline)
    if not evaluation.needs_embedding or evaluation.catalogue is not None:
        return evaluation
    return replace(evaluation, catalogue=logs.catalogue)


@overload
def _on_other_half(evaluation: Evaluation, read: LogFilter | None) -> Evaluation:
    """An evaluation stays an evaluation."""


@overload
def _on_other_half(evaluation: Comparison, read: LogFilter | None) -> Comparison:
    """A comparison stays a comparison."""


def _on_other_half(evaluation: Evaluation | Comparison, read: LogFilter | None) -> Evaluation | Comparison:
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


def evaluate_log(logs: str | OpenedLog, evaluation: Evaluation | Comparison | dict[str, Evaluation], *,
                 client: Client | None = None, storage_options: dict[str, Any] | None = None, progress: bool = False,
                 log_filter: LogFilter | None = None, by_slot: bool = False
                 ) -> EvaluationResult | ComparisonResult | SlotResult:
    """Evaluate on a Parquet file, folder or URL of partitions, one task per part (per run of 8 consecutive parts
    in a log of 1,024 parts or more: :func:`~dr_scale.outofcore.mergeable.parts_bag`), out of core.

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
    by_slot : bool
        On a log with slots (a ranking, one row per slot), also estimate per slot and per impression in the
        same pass (:mod:`dr_scale.ope.evaluation.slots`; one policy's evaluation).

    Returns
    -------
    EvaluationResult, ComparisonResult or SlotResult
        A :class:`~dr_scale.ope.evaluation.slots.SlotResult` with ``by_slot``. ``evaluation`` is not changed:
        the dimensions it lacks are read from the log into a copy.

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
    source, states = _log_states(logs, _checked(evaluation), by_slot)
    (state,) = compute(tree_reduce(states), client=client, progress=progress)
    if state.rows == 0:
        raise LogDataError(str(logs), None, "the log has no rows; nothing to evaluate" if not logs.log_filter
                           else f"no rows of the log are selected ({logs.log_filter}); nothing to evaluate")
    return _result(source, state)


def evaluate_dataframe(ddf: dd.DataFrame, evaluation: Evaluation | Comparison | dict[str, Evaluation], *,
                       client: Client | None = None, progress: bool = False,
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

    def state_of(pdf: Any, i: int) -> list[PolicyState | ComparisonState]:
        """The state of the frame's partition ``i`` (a pandas DataFrame), as a list of one."""
        source = f"<dataframe partition {i}>"
        return [evaluation.table_state(table_from_pandas(pdf, source), source, log_filter)]

    parts = [dask.delayed(state_of)(d, i) for i, d in enumerate(ddf.to_delayed())]
    (state,) = compute(tree_reduce(db.from_delayed(parts)), client=client, progress=progress)
    if state.rows == 0:
        raise LogDataError("<dataframe>", None, "no rows" + (f" selected ({log_filter})" if log_filter else "")
                           + "; nothing to evaluate (a log with no rows is an error)")
    out = _result(evaluation, state)
    assert not isinstance(out, SlotResult)  # a frame is evaluated without slots
    return out


def evaluate_partitions(parts: list[Partition], evaluation: Evaluation | Comparison | dict[str, Evaluation], *,
                        by_slot: bool = False) -> EvaluationResult | ComparisonResult | SlotResult:
    """Evaluate in memory on already-read partitions (small logs, tests).

    The same per-part states as :func:`evaluate_log`'s, merged in the partitions' order.

    Parameters
    ----------
    parts : list of Partition
        The partitions, e.g. :func:`~dr_scale.logs.reading.read_log`'s or
        :func:`~dr_scale.logs.importing.frames.from_pandas`'s.
    evaluation : Evaluation, Comparison or dict of Evaluation
        One policy's evaluation, or several by name (a dict is ``Comparison(evaluations)``).
    by_slot : bool
        Also per slot and per impression (as :func:`evaluate_log`'s).

    Returns
    -------
    EvaluationResult, ComparisonResult or SlotResult
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
    if not parts:
        raise ParameterError("`parts` is empty: there are no rows to evaluate")
    if not sum(len(p) for p in parts):
        raise LogDataError(parts[0].source, None, "no rows; nothing to evaluate (a log with no rows is an error)")
    evaluation = _with_vocabulary(evaluation, parts)
    source: Evaluation | Comparison | BySlot = BySlot(check_by_slot(evaluation)) if by_slot else evaluation
    return _result(source, merge_all([source.state(p) for p in parts]))


def _with_vocabulary(evaluation: Evaluation | Comparison, parts: list[Partition]) -> Evaluation | Comparison:
    """``evaluation`` with its policies' actions named by value resolved by the vocabulary the partitions carry
    (``from_pandas``'s, :func:`~dr_scale.logs.spec.table_spec`), and k the vocabulary's when not given."""
    document = table_spec(parts[0].table) if parts[0].table is not None else None
    if document is None:
        return evaluation
    actions = document["action"]["values"]
    if isinstance(evaluation, Comparison):
        return Comparison({n: _resolved(e, actions) for n, e in evaluation.evaluations.items()}, evaluation.baseline)
    return _resolved(evaluation, actions)


def _resolved(evaluation: Evaluation, actions: list) -> Evaluation:
    """One evaluation's policies resolved by ``actions`` (:func:`_with_vocabulary`)."""
    return replace(evaluation, policy=evaluation.target_policy.resolve(actions),
                   baseline=evaluation.baseline.resolve(actions) if isinstance(evaluation.baseline, Policy)
                   else evaluation.baseline,
                   n_actions=evaluation.n_actions if evaluation.n_actions is not None else len(actions))


def _result(evaluation: Evaluation | Comparison | BySlot, state: object
            ) -> EvaluationResult | ComparisonResult | SlotResult:
    """The result of ``evaluation``'s merged ``state`` (a :class:`PolicyState`, a :class:`ComparisonState` for
    a :class:`Comparison`, :class:`SlotStates` per slot)."""
    if isinstance(evaluation, BySlot) and isinstance(state, SlotStates):
        return evaluation.result(state)
    if isinstance(evaluation, Comparison) and isinstance(state, ComparisonState):
        return evaluation.result(state)
    if isinstance(evaluation, Evaluation) and isinstance(state, PolicyState):
        return evaluation.result(state)
    raise TypeError(f"{type(evaluation).__name__} has no result of a {type(state).__name__}")


def _checked(evaluation: object) -> Evaluation | Comparison:
    """An Evaluation, or a Comparison (from a dict of Evaluations); anything else is refused."""
    if isinstance(evaluation, dict):
        return Comparison(evaluation)
    if isinstance(evaluation, Comparison):
        return evaluation
    return check_evaluation(evaluation)
