"""``make_report``: list the share, build the states (incrementally), write the report.

Exit statuses (also those of ``dr-scale report``):

* 0 — report written over every partition of the window (status ``ok``), or, with
  ``skip_bad=True``, over the good ones, the skipped ones listed (status ``partial``);
* 3 — bad partitions and no ``skip_bad``: the report (status ``failed``) names each
  bad partition and its error and carries no estimates;
* 4 — the report was written (status ``ok``, ``warning`` or ``partial``) and carries an alert of a kind
  named in ``fail_on`` (the policies file's key, or ``fail_on=`` here: ``"support"``, ``"drift"``;
  :mod:`dr_scale.report.alerts`), so a scheduler notices;
* 2 — any other error (from the command line: unreadable policies file, no partitions in
  the window, unreachable store …); no report is written.
"""

from __future__ import annotations

import datetime
import posixpath
import sys
from dataclasses import replace
from typing import Annotated, Literal

from pydantic import Field

from dr_scale.core.errors import UserError, check_output_folder
from dr_scale.io.atomic import url_to_fs
from dr_scale.io.config import ConfigError, Model, NonNegativeInt, TestFraction, validate
from dr_scale.io.outputs import check_output_folder as check_outputs_folder
from dr_scale.io.outputs import record_outputs
from dr_scale.io.storage import storage_options
from dr_scale.logs.filters import DEFAULT_TEST_FRACTION, LogFilter
from dr_scale.logs.opened import open_log
from dr_scale.ope.estimators import make_estimators
from dr_scale.ope.evaluation import LOGGING, Evaluation
from dr_scale.policies import Policy
from dr_scale.report.alerts import KINDS, AlertKind
from dr_scale.report.build import ReportStates, build_states, fill_dimensions
from dr_scale.report.partitions import list_partitions, parse_window, select_window
from dr_scale.report.policies_file import PoliciesFile, load_policies
from dr_scale.report.render import primary_estimator, redact, report_dict, write_report
from dr_scale.report.state_cache import StateCache
from dr_scale.report.training import check_training_overlap
from dr_scale.reward.files import load_reward_model
from dr_scale.reward.models import check_model_actions

EXIT_OK, EXIT_BAD_PARTITIONS, EXIT_ALERT = 0, 3, 4
CACHE_FOLDER = "state-cache"


def evaluations_of(pf: PoliciesFile, storage_options: dict | None = None) -> dict[str, Evaluation]:
    """One :class:`Evaluation` per candidate policy, sharing the reward model, each with V − V(logging)."""
    try:
        model = load_reward_model(pf.reward_model, storage_options) if pf.reward_model else None
    except UserError as exc:
        raise ConfigError(f"reward_model: {exc}", pf.source) from None
    propensity = None
    if pf.propensity_model:
        from dr_scale.propensity.model import PropensityModel

        try:
            propensity = PropensityModel.load(pf.propensity_model, storage_options)
        except UserError as exc:
            raise ConfigError(f"propensity_model: {exc}", pf.source) from None
    return {c.name: Evaluation(c.policy, make_estimators(pf.estimators), reward_model=model, baseline=LOGGING,
                               propensity_model=propensity, propensity_floor=pf.propensity_floor,
                               propensity_source=pf.propensity_model,
                               n_actions=pf.n_actions, n_features=pf.n_features or getattr(model, "n_features", None),
                               model_source=pf.reward_model, min_support=pf.min_support,
                               allow_other_log=True,  # windows of the fitted log
                               k_source=None if pf.n_actions is None else f"n_actions in {pf.source}")
            for c in pf.policies}


def check_policies_fit(evaluations: dict[str, Evaluation], pf: PoliciesFile) -> None:
    """A candidate whose own k (a linear or softmax policy's actions) is not the log's k is the policies file's
    error, named with the policy, before any partition is read."""
    for name, e in evaluations.items():
        k = e.policy.n_actions if isinstance(e.policy, Policy) else None
        if k is not None and e.n_actions is not None and k != e.n_actions:
            raise ConfigError(f"policy {name!r} ({e.policy}) has {k} actions, but the log has k = {e.n_actions} "
                              f"(from {e.k_source or 'its metadata'}); use a policy learned for this log", pf.source)
    ks = {name: e.n_actions for name, e in evaluations.items()}
    if len(set(ks.values())) > 1:  # k from each policy itself (no metadata, model or n_actions): they disagree
        listed = ", ".join(f"policy {name!r} ({evaluations[name].policy}) has {k}" for name, k in ks.items())
        raise ConfigError(f"the candidates disagree on the number of actions k: {listed}; a log has one k: set "
                          "n_actions in the policies file (or write the log with dr_scale.n_actions metadata)",
                          pf.source)


def check_propensities(evaluations: dict[str, Evaluation], fs, parts, logs: str) -> None:
    """A log share without propensities, where an estimator needs them and no propensity model is given: one line
    (exit 2) before any partition is read, not every partition reported bad."""
    from dr_scale.logs.listing import has_propensity

    if not parts or has_propensity(fs, min(parts, key=lambda p: p.path).path):
        return
    for e in evaluations.values():
        if e.propensity_model is None and e.needs_propensity:
            raise e.missing_propensity(redact(str(logs)))


def pair_evaluations(pf: PoliciesFile, evaluations: dict[str, Evaluation]) -> dict[tuple, Evaluation]:
    """For each pair of candidates (a before b in the file), the primary estimator's V(a) − V(b), paired.

    Keyed ``("pair", a, b)``; the report compares each candidate with the best other one.
    """
    primary = primary_estimator(pf.estimators)
    names = list(evaluations)
    out = {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            e = evaluations[a]
            out[("pair", a, b)] = Evaluation(e.policy, {primary: e.estimators[primary]}, reward_model=e.reward_model,
                                             n_actions=e.n_actions, n_features=e.n_features,
                                             model_source=e.model_source, baseline=evaluations[b].policy,
                                             propensity_model=e.propensity_model,
                                             propensity_floor=e.propensity_floor,
                                             propensity_source=e.propensity_source,
                                             min_support=e.min_support, allow_other_log=True,
                                             catalogue=e.catalogue, embedding_propensity=e.embedding_propensity)
    return out


def resolved(evaluations: dict[str, Evaluation], actions: list | None) -> dict[str, Evaluation]:
    """The evaluations with actions named by value resolved by the log's vocabulary ``actions``, which gives k."""
    if actions is None:
        return evaluations
    for e in evaluations.values():
        check_model_actions(e.reward_model, actions, e._model_name())
    return {n: replace(e, policy=e.policy.resolve(actions) if isinstance(e.policy, Policy) else e.policy,
                       n_actions=e.n_actions or len(actions),
                       baseline=e.baseline.resolve(actions) if isinstance(e.baseline, Policy) else e.baseline)
            for n, e in evaluations.items()}


def compute_report(logs, policies: str | PoliciesFile, cache: str | None, *, window: str | None = None,
                   until: datetime.date | None = None, skip_bad: bool = False, storage_options: dict | None = None,
                   client=None, progress: bool = False, log=None, allow_training_overlap: bool = False) -> dict:
    """The report of ``logs`` (a URL, or opened with its filter: :func:`~dr_scale.logs.opened.open_log`) as a dict
    (nothing written but cache entries); notes go to ``log`` (stderr).

    A candidate learned on partitions of the window (its policy file's ``training`` record,
    :mod:`dr_scale.report.training`) stops the run with a ``UserError`` naming the days, unless
    ``allow_training_overlap``: then its results are labelled in-sample.
    """
    log = log or sys.stderr
    pf = policies if isinstance(policies, PoliciesFile) else load_policies(policies, storage_options)
    logs = open_log(logs, storage_options)
    fs, parts = list_partitions(logs)
    parts, span = select_window(parts, parse_window(window), until)
    evaluations = resolved(evaluations_of(pf, storage_options), logs.vocabulary)
    from dr_scale.reward.shared import check_log_catalogue

    check_log_catalogue([(e.reward_model, e._model_name()) for e in evaluations.values()], logs)
    if any(e.needs_embedding for e in evaluations.values()):  # MIPS: the log's action catalogue
        evaluations = {n: replace(e, catalogue=logs.catalogue) for n, e in evaluations.items()}
    in_sample = check_training_overlap({name: e.policy for name, e in evaluations.items()}, parts,
                                       read=logs.log_filter, allow=allow_training_overlap, fs=fs)
    for name, days in in_sample.items():
        print(f"dr-scale report: warning: {name} was learned on {days} of the window; its results are in-sample",
              file=log)
    try:
        evaluations = fill_dimensions(evaluations, fs, sorted(parts, key=lambda p: p.path))
    except UserError as exc:
        raise ConfigError(str(exc), pf.source) from None
    check_policies_fit(evaluations, pf)
    check_propensities(evaluations, fs, parts, logs)
    pairs = pair_evaluations(pf, evaluations)
    states: ReportStates = build_states(fs, parts, {**evaluations, **pairs},
                                        StateCache(cache, storage_options) if cache else None,
                                        client=client, progress=progress)
    for name, why in states.policy_errors.items():  # the policy's mistake, not the partitions': exit 2
        raise ConfigError(f"policy {name!r} ({evaluations[name].policy}) does not fit the log "
                          f"{redact(str(logs))}: {why}", pf.source)
    for path, why in sorted(states.cache_rejected.items()):
        print(f"dr-scale report: cached state of {path} not used ({why}); recomputed", file=log)
    for _path, error in sorted(states.bad.items()):
        print(f"dr-scale report: {'skipped' if skip_bad else 'bad partition'}: {error}", file=log)
    if not states.bad and not sum(states.rows.values()):
        raise UserError(f"{logs}: the partitions in the window have no rows; nothing to report")
    return report_dict(states, evaluations, pf, logs=str(logs), window=span, skip_bad=skip_bad, pairs=pairs,
                       in_sample=in_sample)


def make_report(logs, policies: str | PoliciesFile, out: str, *, window: str | None = None,
                until: datetime.date | None = None, cache: str | None = None, skip_bad: bool = False,
                storage_options: dict | None = None, client=None, progress: bool = False,
                log=None, allow_training_overlap: bool = False, fail_on: list[str] | None = None) -> tuple[dict, int]:
    """Write the report of ``logs`` under ``out`` (cache default ``OUT/state-cache``); return (report, exit status).

    ``fail_on``: alert kinds (``"support"``, ``"drift"``) that make the status 4, besides the policies file's."""
    log = log or sys.stderr
    fs, root = url_to_fs(out, storage_options)
    check_report_folder(out, logs, policies, storage_options)  # before the work, not after it
    if cache:
        check_output_folder(cache, *url_to_fs(cache, storage_options))
    report = compute_report(logs, policies, cache or posixpath.join(out, CACHE_FOLDER), window=window, until=until,
                            skip_bad=skip_bad, storage_options=storage_options, client=client, progress=progress,
                            log=log, allow_training_overlap=allow_training_overlap)
    failing = set(report["fail_on"]) | set(fail_on or ())
    report["fail_on"] = [k for k in KINDS if k in failing]
    written = write_report(out, report, storage_options)
    record_outputs(fs, root, [*written, *([] if cache else [CACHE_FOLDER])])
    for a in report["alerts"]:
        print(f"dr-scale report: warning: {a['kind']} alert, {a['policy']}"
              f"{' on ' + a['date'] if a['date'] else ' over the window'}: {a['message']}", file=log)
    count = {k: sum(p["source"] == k for p in report["partitions"]) for k in ("read", "cache", "bad")}
    bad = f", {count['bad']} bad" if count["bad"] else ""
    print(f"dr-scale report: {len(report['partitions'])} partitions ({count['read']} read, {count['cache']} from cache"
          f"{bad}), status {report['status']}; wrote {redact(out)}", file=log)
    if report["status"] == "failed":
        return report, EXIT_BAD_PARTITIONS
    raised = sorted({a["kind"] for a in report["alerts"]} & failing)
    if raised:
        print(f"dr-scale report: exit status {EXIT_ALERT}: {' and '.join(raised)} alerts raised (fail_on)", file=log)
        return report, EXIT_ALERT
    return report, EXIT_OK


#: What a report folder written before :data:`~dr_scale.io.outputs.OUTPUTS` existed holds (its report.json is
#: dr-scale's): the report's own names.
REPORT_NAMES = ("report.json", "report.md", "report.html", "plots", CACHE_FOLDER, "propensity-model.npz")


def check_report_folder(out: str, logs, policies, storage_options: dict | None = None) -> None:
    """The report's folder ``out`` by the outputs rule (:func:`dr_scale.io.outputs.check_output_folder`): not the
    log or the policies file, nor around or inside them, and no file in it that dr-scale did not write."""
    from dr_scale.io.atomic import written_by_dr_scale

    fs, root = url_to_fs(out, storage_options)
    source = policies.source if isinstance(policies, PoliciesFile) else policies
    legacy = REPORT_NAMES if fs.isdir(root) and written_by_dr_scale(fs, root) else ()
    check_outputs_folder(out, [str(logs), source], storage_options, allowed=legacy)


class ReportJob(Model):
    """The keys of pipelines/report.toml: the command's options."""

    job: Literal["report"]
    logs: Annotated[str, Field(min_length=1)]
    policies: Annotated[str, Field(min_length=1)]
    out: Annotated[str, Field(min_length=1)]
    window: str = "all"
    until: Annotated[datetime.date | None, Field(strict=False)] = None
    cache: str | None = None
    skip_bad_partitions: bool = False
    allow_training_overlap: bool = False
    fail_on: list[AlertKind] = []
    storage_options: dict | str | None = None
    days: str | None = None  # the rows to read, as the command's --days / --split (dr_scale.logs.filters)
    split: Literal["train", "test"] | None = None
    test_fraction: TestFraction = DEFAULT_TEST_FRACTION
    split_seed: NonNegativeInt = 0


def run_job(config: dict, client=None, progress: bool = False) -> int:
    """``dr-scale run pipelines/report.toml``: the report as a job; keys as the command's options.

    ``storage_options`` names a JSON file or is a table of options (default ``$DR_SCALE_STORAGE_OPTIONS``).
    """
    job = validate(ReportJob, config)
    log_filter = LogFilter(days=job.days, split=job.split, test_fraction=job.test_fraction, split_seed=job.split_seed)
    opts = storage_options(job.storage_options)
    _, status = make_report(open_log(job.logs, opts, log_filter), job.policies, job.out, window=job.window,
                            until=job.until, cache=job.cache, skip_bad=job.skip_bad_partitions, storage_options=opts,
                            client=client, progress=progress, allow_training_overlap=job.allow_training_overlap,
                            fail_on=job.fail_on)
    return status
