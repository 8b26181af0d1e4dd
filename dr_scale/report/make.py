"""``make_report``: list the share, build the states (incrementally), write the report.

Exit statuses (also those of ``dr-scale report``):

* 0 — report written over every partition of the window (status ``ok``), or, with
  ``skip_bad=True``, over the good ones, the skipped ones listed (status ``partial``);
* 3 — bad partitions and no ``skip_bad``: the report (status ``failed``) names each
  bad partition and its error and carries no estimates;
* 2 — any other error (from the command line: unreadable policies file, no partitions in
  the window, unreachable store …); no report is written.
"""

from __future__ import annotations

import datetime
import posixpath
import sys

from dr_scale.commands.common import storage_options
from dr_scale.estimators import make_estimators
from dr_scale.evaluation import LOGGING, Evaluation
from dr_scale.report.build import ReportStates, build_states
from dr_scale.report.partitions import list_partitions, parse_window, select_window
from dr_scale.report.policies_file import PoliciesFile, load_policies
from dr_scale.report.render import primary_estimator, redact, report_dict, write_report
from dr_scale.report.state_cache import StateCache
from dr_scale.reward_models import LinearRewardModel

EXIT_OK, EXIT_BAD_PARTITIONS = 0, 3
CACHE_FOLDER = "state-cache"


def evaluations_of(pf: PoliciesFile, storage_options: dict | None = None) -> dict[str, Evaluation]:
    """One :class:`Evaluation` per candidate policy, sharing the reward model, each with V − V(logging)."""
    model = LinearRewardModel.load(pf.reward_model, storage_options) if pf.reward_model else None
    return {c.name: Evaluation(c.spec, make_estimators(pf.estimators), reward_model=model, baseline=LOGGING,
                               n_actions=pf.n_actions, n_features=pf.n_features or getattr(model, "n_features", None))
            for c in pf.policies}


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
                                             baseline=evaluations[b].policy)
    return out


def compute_report(logs: str, policies: str | PoliciesFile, cache: str | None, *, window: str | None = None,
                   until: datetime.date | None = None, skip_bad: bool = False, storage_options: dict | None = None,
                   client=None, progress: bool = False, log=None) -> dict:
    """The report of ``logs`` as a dict (nothing written but cache entries); notes go to ``log`` (stderr)."""
    log = log or sys.stderr
    pf = policies if isinstance(policies, PoliciesFile) else load_policies(policies, storage_options)
    fs, parts = list_partitions(logs, storage_options)
    parts, span = select_window(parts, parse_window(window), until)
    evaluations = evaluations_of(pf, storage_options)
    pairs = pair_evaluations(pf, evaluations)
    states: ReportStates = build_states(fs, parts, {**evaluations, **pairs},
                                        StateCache(cache, storage_options) if cache else None,
                                        client=client, progress=progress)
    for path, why in sorted(states.cache_rejected.items()):
        print(f"dr-scale report: cached state of {path} not used ({why}); recomputed", file=log)
    for path, error in sorted(states.bad.items()):
        print(f"dr-scale report: {'skipped' if skip_bad else 'bad partition'}: {error}", file=log)
    return report_dict(states, evaluations, pf, logs=logs, window=span, skip_bad=skip_bad, pairs=pairs)


def make_report(logs: str, policies: str | PoliciesFile, out: str, *, window: str | None = None,
                until: datetime.date | None = None, cache: str | None = None, skip_bad: bool = False,
                storage_options: dict | None = None, client=None, progress: bool = False,
                log=None) -> tuple[dict, int]:
    """Write the report of ``logs`` under ``out`` (cache default ``OUT/state-cache``); return (report, exit status)."""
    log = log or sys.stderr
    report = compute_report(logs, policies, cache or posixpath.join(out, CACHE_FOLDER), window=window, until=until,
                            skip_bad=skip_bad, storage_options=storage_options, client=client, progress=progress,
                            log=log)
    write_report(out, report, storage_options)
    count = {k: sum(p["source"] == k for p in report["partitions"]) for k in ("read", "cache", "bad")}
    bad = f", {count['bad']} bad" if count["bad"] else ""
    print(f"dr-scale report: {len(report['partitions'])} partitions ({count['read']} read, {count['cache']} from cache"
          f"{bad}), status {report['status']}; wrote {redact(out)}", file=log)
    return report, EXIT_BAD_PARTITIONS if report["status"] == "failed" else EXIT_OK


JOB_KEYS = {"job", "logs", "policies", "out", "window", "until", "cache", "skip_bad_partitions", "storage_options"}


def run_job(config: dict, client=None, progress: bool = False) -> int:
    """``dr-scale run pipelines/report.toml``: the report as a job; keys as the command's options.

    ``storage_options`` names a JSON file (default ``$DR_SCALE_STORAGE_OPTIONS``), as ``--storage-options``.
    """
    unknown = sorted(set(config) - JOB_KEYS)
    if unknown:
        raise ValueError(f"report job: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(JOB_KEYS))}")
    missing = [k for k in ("logs", "policies", "out") if not config.get(k)]
    if missing:
        raise ValueError(f"report job: missing {', '.join(missing)}")
    until = config.get("until")
    if isinstance(until, str):
        until = datetime.date.fromisoformat(until)
    _, status = make_report(config["logs"], config["policies"], config["out"], window=str(config.get("window", "all")),
                            until=until, cache=config.get("cache"), skip_bad=bool(config.get("skip_bad_partitions")),
                            storage_options=storage_options(config.get("storage_options")), client=client,
                            progress=progress)
    return status
