"""``dr-scale report``: a scheduled report on candidate policies over a log share."""

from __future__ import annotations

import argparse
import datetime
import sys
from dataclasses import replace

from dr_scale.commands.common import (
    POSITIVE_INT,
    add_compute_options,
    add_filter_options,
    add_storage_option,
    check_named_actions,
    opened_log,
    storage_options,
)
from dr_scale.crossfit.limits import check_fit_limits
from dr_scale.outofcore.compute import dask_session


def add_parser(sub) -> None:
    """Add ``dr-scale report`` and its options to the sub-command parsers ``sub``."""
    from dr_scale.report.alerts import KINDS  # pydantic's models: imported when the parser is built

    p = sub.add_parser(
        "report", help="report on candidate policies over a log share (incremental, for cron)",
        description="Estimate candidate policies' values (DM, IPS, DR, SNIPS, SNDR with intervals and weight "
                    "diagnostics) over the newest partitions of a log share and write report.json, report.md and "
                    "report.html. Per-partition states are cached, so a daily run reads only new or changed "
                    "partitions. Exit status: 0 ok (or partial with --skip-bad-partitions), 3 bad partitions "
                    "(named in the report and on stderr), 4 report written with a support, drift or verdict alert "
                    "of a kind in --fail-on or the policies file's fail_on, 2 other errors.")
    p.add_argument("--logs", required=True,
                   help="folder, glob or fsspec URL of Parquet partitions (date=YYYY-MM-DD/…)")
    p.add_argument("--policies", required=True, metavar="FILE", help="TOML/YAML file of candidate policies")
    p.add_argument("--out", required=True, metavar="URL", help="folder (any fsspec URL) for the report")
    p.add_argument("--window", default="all", help="Nd or Nw of date partitions ending at --until, or all (default)")
    p.add_argument("--until", type=_date, metavar="YYYY-MM-DD",
                   help="last day of the window (default: the newest date in the share)")
    p.add_argument("--cache", metavar="URL", help="folder for cached per-partition states (default: OUT/state-cache)")
    p.add_argument("--skip-bad-partitions", action="store_true",
                   help="report over the good partitions, listing the bad ones, and exit 0")
    add_filter_options(p)
    p.add_argument("--allow-training-overlap", action="store_true",
                   help="report a learned policy even over partitions it was trained on (its policy file records "
                        "them); its results are then labelled in-sample")
    p.add_argument("--fail-on", action="append", choices=list(KINDS), default=[], metavar="KIND",
                   help="exit with status 4 after writing a report that carries an alert of this kind: support "
                        "(a threshold crossed), drift (a change against the day's history) or verdict (an estimate "
                        "is 'no reliable estimate', docs/estimators.md); repeatable, added to the policies file's "
                        "fail_on")
    from dr_scale.commands.fit import add_model_options
    from dr_scale.commands.fit_propensity import add_propensity_options

    add_propensity_options(p)
    add_model_options(p)
    p.add_argument("--n-actions", type=POSITIVE_INT, help=argparse.SUPPRESS)  # the fitting options' k (the log's)
    add_compute_options(p)
    add_storage_option(p)
    p.set_defaults(func=run)


def _with_estimated_propensities(args, logs, policies, client, opts):
    """The policies file with a propensity model fitted on the log share (cross-fitted), written to
    OUT/propensity-model.npz, as its ``propensity_model``."""
    import posixpath

    from dr_scale.commands.fit_propensity import fit_propensity_from_args, propensity_settings
    from dr_scale.io.outputs import record_file

    settings = propensity_settings(args)
    check_fit_limits(logs, folds=settings.folds, n_features=settings.n_features)
    model = fit_propensity_from_args(args, logs, client, opts, settings)
    path = posixpath.join(args.out.rstrip("/"), PROPENSITY_FILE)
    model.save(path, opts or None)
    record_file(path, opts)
    print(f"dr-scale report: propensities estimated on {logs} (cross-fitted, {settings.folds} folds), "
          f"model written to {path}", file=sys.stderr)
    return replace(policies, propensity_model=path)


#: Where ``report --estimate-propensity`` writes the propensity model it fits, in the output folder.
PROPENSITY_FILE = "propensity-model.npz"


def _date(text: str) -> datetime.date:
    """A YYYY-MM-DD date for ``--until``."""
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date YYYY-MM-DD") from None


def run(args) -> int:
    """Run ``dr-scale report``: the report over the log share's newest partitions written; the exit status (0 ok,
    3 bad partitions).
    """
    from dr_scale.commands.fit import model_options_given
    from dr_scale.commands.fit_propensity import check_not_reward_model, check_propensity_options
    from dr_scale.core.errors import UserError
    from dr_scale.report.make import check_report_folder, make_report  # imports matplotlib: only here
    from dr_scale.report.policies_file import load_policies

    opts = storage_options(args.storage_options)
    logs = opened_log(args, args.logs, opts)
    if model_options_given(args) and not args.estimate_propensity:
        raise UserError(f"{', '.join(model_options_given(args))} fit(s) the propensity model of "
                        "--estimate-propensity; give it, or drop them")
    check_not_reward_model(args)
    policies = load_policies(args.policies, opts)
    floor_given = args.propensity_floor is not None
    check_propensity_options(args, model_elsewhere=bool(policies.propensity_model))
    check_report_folder(args.out, logs, args.policies, opts)  # before the work (and the propensity fit)
    check_named_actions([candidate.policy for candidate in policies.policies], logs, policies.n_actions)
    if args.propensity_model:
        policies = replace(policies, propensity_model=args.propensity_model)
    if args.propensity_model or args.estimate_propensity or floor_given:
        policies = replace(policies, propensity_floor=args.propensity_floor)
    with dask_session(args.scheduler, args.local_workers, storage_options=opts) as client:
        if args.estimate_propensity:
            policies = _with_estimated_propensities(args, logs, policies, client, opts)
        _, status = make_report(logs, policies, args.out, window=args.window, until=args.until,
                                cache=args.cache, skip_bad=args.skip_bad_partitions, storage_options=opts,
                                client=client, progress=not args.no_progress,
                                allow_training_overlap=args.allow_training_overlap, fail_on=args.fail_on)
    return status
