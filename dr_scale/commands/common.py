"""Options shared by the sub-commands: where to compute, and how to reach storage; the flags of a command."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings

from dr_scale.io.config import NonNegativeInt, PositiveInt, Seed, TestFraction, option
from dr_scale.io.storage import STORAGE_OPTIONS_ENV, storage_options  # noqa: F401 - the sub-commands' import

#: ``type=`` of the integer options (counts, sizes, seeds), by the shared rules of :mod:`dr_scale.io.config`.
POSITIVE_INT = option(PositiveInt, "positive integer")
NON_NEGATIVE_INT = option(NonNegativeInt, "non-negative integer")
SEED = option(Seed, "integer in [0, 2^64)")


def add_compute_options(parser) -> None:
    """--scheduler, --local-workers and --no-progress: where the command computes, and whether it shows progress."""
    group = parser.add_argument_group("where to compute")
    group.add_argument("--scheduler", metavar="ADDRESS",
                       help="Dask scheduler address (default: Dask config / DASK_SCHEDULER_ADDRESS, "
                            "else the local threaded scheduler)")
    group.add_argument("--local-workers", type=POSITIVE_INT, metavar="N",
                       help="start a LocalCluster of N worker processes for this run (1 ≤ N ≤ 4 × the "
                            "machine's cores)")
    group.add_argument("--no-progress", action="store_true", help="do not show a progress bar")


def add_storage_option(parser) -> None:
    """--storage-options FILE: the JSON fsspec options of every URL the command reads or writes."""
    parser.add_argument("--storage-options", metavar="FILE",
                        help=f"JSON file of fsspec storage options (default: ${STORAGE_OPTIONS_ENV}, "
                             "else the filesystem's own environment/credential chain)")


def add_filter_options(parser) -> None:
    """--days, --split, --test-fraction, --split-seed: the rows of the log to read (:mod:`dr_scale.logs.filters`)."""
    from dr_scale.logs.filters import DEFAULT_TEST_FRACTION, SPLITS

    group = parser.add_argument_group("which rows of the log to read")
    group.add_argument("--days", metavar="FIRST:LAST",
                       help="only the date=YYYY-MM-DD partitions from FIRST to LAST, both included (one DAY, "
                            ":LAST or FIRST: for open ends)")
    group.add_argument("--split", choices=SPLITS,
                       help="only the train or the test rows of the keyed split: a row is a test row when "
                            "u(row_id) < --test-fraction, u keyed by (--split-seed, 'train/test split')")
    group.add_argument("--test-fraction", type=option(TestFraction, "number in (0, 1)"), default=None, metavar="F",
                       help=f"share of test rows, in (0, 1) (default {DEFAULT_TEST_FRACTION:g})")
    group.add_argument("--split-seed", type=NON_NEGATIVE_INT, default=0, metavar="SEED",
                       help="key of the split (default 0)")


def opened_log(args, logs: str, opts: dict | None):
    """The log ``logs`` opened once for the command (:func:`dr_scale.logs.opened.open_log`), with the storage
    options ``opts`` and the filter of the rows options (--days, --split, --test-fraction, --split-seed)."""
    from dr_scale.core.errors import ParameterError
    from dr_scale.logs.filters import DEFAULT_TEST_FRACTION, LogFilter
    from dr_scale.logs.opened import open_log

    if args.split is None and (args.test_fraction is not None or args.split_seed):
        raise ParameterError("`test_fraction` and `split_seed` choose the rows of a `split`; give it (train or test)")
    log_filter = LogFilter(days=args.days, split=args.split, split_seed=args.split_seed,
                           test_fraction=DEFAULT_TEST_FRACTION if args.test_fraction is None else args.test_fraction)
    return open_log(logs, opts, log_filter)


def record_log_filter(fitted, logs) -> None:
    """Record in the ``metadata`` of a fitted model or learned policy the rows it was fitted on: the filter of the
    opened log ``logs`` (:func:`opened_log`), if any."""
    if logs.log_filter and getattr(fitted, "metadata", None) is not None:
        fitted.metadata["log_filter"] = logs.log_filter.to_dict()


#: Without a declared d (the log's ``dr_scale.n_features`` metadata or ``--n-features``), d is inferred as the
#: largest feature id + 1 only up to this; beyond it a stray id would silently size the model.
MAX_INFERRED_FEATURES = 1 << 20
#: A cross-fitting fold holds at least this many rows on average: ``--folds`` K ≤ rows / MIN_FOLD_ROWS. Each fold
#: costs a model and its share of every pass; folds of a few rows cost a pass each and predict from models that
#: differ by a handful of rows.
MIN_FOLD_ROWS = 10
#: At most this many cross-fitting folds: at K = 20 each fold model is fitted on 95% of the rows already, and the
#: work of a fit grows faster than K (the λ search fits every fold too): 2,000 rows of 0/1 rewards take ~4 s of CPU
#: at K = 10, ~11 s at K = 20, ~35 s at K = 40.
MAX_FOLDS = 20


def check_fit_limits(logs, *, folds: int | None, n_features: int | None, n_actions: int | None) -> None:
    """Limits of a reward-model fit, checked from the opened log's footers (read once,
    :attr:`~dr_scale.logs.opened.OpenedLog.footprint`) before the work, each naming its option.

    * ``--folds`` K: 2 ≤ K ≤ min(:data:`MAX_FOLDS`, rows / :data:`MIN_FOLD_ROWS`) (each fold model is fitted
      without one fold's rows; folds of a few rows cost a model each and as many passes as folds of many);
    * d: the declared one (``--n-features``, else the log's metadata), else the largest feature id + 1 —
      refused above :data:`MAX_INFERRED_FEATURES` unless ``--n-features`` says so (a stray id of 10⁷
      would silently make a model of 10⁷ rows);
    * the coefficients of the (K + 1) models, d × k float64 each, must fit in this machine's memory.
    """
    from dr_scale.core.errors import ParameterError

    foot = logs.footprint
    if folds and folds > MAX_FOLDS:
        raise ParameterError(f"`folds` = {folds}: at most {MAX_FOLDS} cross-fitting folds (each fold model already "
                             f"sees {1 - 1 / MAX_FOLDS:.0%} of the rows at K = {MAX_FOLDS}, and every fold adds a "
                             "model to each pass); give 2 ≤ K ≤ 20")
    if folds and folds * MIN_FOLD_ROWS > foot.rows:
        raise ParameterError(f"`folds` = {folds} leaves {foot.rows / folds:,.3g} rows a fold of the log's "
                             f"{foot.rows:,} rows; cross-fitting needs 2 ≤ K ≤ rows / {MIN_FOLD_ROWS} "
                             f"(here {foot.rows // MIN_FOLD_ROWS:,}): at least {MIN_FOLD_ROWS} rows a fold")
    d = n_features or foot.metadata.get("n_features")
    if d is None and foot.max_feature is not None and foot.max_feature + 1 > MAX_INFERRED_FEATURES:
        raise ParameterError(f"{logs}: the log declares no number of features (no dr_scale.n_features metadata) and "
                             f"its largest feature id is {foot.max_feature:,}: d would be {foot.max_feature + 1:,}. "
                             f"Give `n_features` if that is right, or fix the stray feature id")
    d = d or (foot.max_feature + 1 if foot.max_feature is not None else None)
    k = n_actions or foot.metadata.get("n_actions") or (foot.max_action + 1 if foot.max_action is not None else None)
    if d and k:
        need = 8 * d * k * ((folds or 0) + 1) * 3  # coefficients, and CG's residual and direction alike
        try:
            have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (OSError, ValueError):
            return
        if need > have:
            raise ParameterError(f"`n_features` d = {d:,} × k = {k} actions × {(folds or 0) + 1} model(s) need "
                                 f"about {need / 2**30:,.1f} GiB for the coefficients alone; this machine has "
                                 f"{have / 2**30:,.1f} GiB: check d")


@contextlib.contextmanager
def warnings_as_lines(command: str):
    """Warnings raised inside the block (e.g. an action never logged) as one ``dr-scale CMD: warning:`` line each,
    printed when raised (a warning before a long fit is seen before it, not after)."""

    def show(message, *_args, **_kwargs) -> None:
        print(f"dr-scale {command}: warning: {message}", file=sys.stderr, flush=True)

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        yield


def option_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, str]:
    """The flag of each option of the sub-command ``args`` was parsed for, by its parameter name (its ``dest``).

    The library names its parameters in errors (:class:`~dr_scale.core.errors.ParameterError`);
    the command line prints each as its flag: ``rows`` as ``--rows``, ``local_workers`` as
    ``--local-workers``. A parameter that is not an option of the command keeps its name.
    """
    flags: dict[str, str] = {}
    level: argparse.ArgumentParser | None = parser
    while level is not None:
        chosen = None
        for action in level._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(args, action.dest, ""))
            elif action.option_strings:
                flags[action.dest] = max(action.option_strings, key=len)
        level = chosen
    return flags
