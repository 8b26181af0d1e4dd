"""Options shared by the sub-commands: where to compute, and how to reach storage; the flags of a command."""

from __future__ import annotations

import argparse
import contextlib
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


def check_named_actions(policies, logs, n_actions: int | None = None) -> None:
    """Before a command's work (its fits, minutes on a large log): the actions the ``policies`` name by value are in
    the opened log's vocabulary, and those named by id among its k actions (``n_actions``, else the log's
    metadata; :meth:`~dr_scale.policies.Policy.check_named_actions`) — what the evaluation refuses too, later."""
    k = logs.dimensions(n_actions=n_actions)[1]
    for policy in policies:
        resolved = policy.resolve(logs.vocabulary)
        if k is not None:
            resolved.check_named_actions(k)


def record_log_filter(fitted, logs) -> None:
    """Record in the ``metadata`` of a fitted model or learned policy the rows it was fitted on: the filter of the
    opened log ``logs`` (:func:`opened_log`), if any."""
    if logs.log_filter and getattr(fitted, "metadata", None) is not None:
        fitted.metadata["log_filter"] = logs.log_filter.to_dict()


@contextlib.contextmanager
def warnings_as_lines(command: str):
    """Warnings raised inside the block (e.g. an action never logged) as one ``dr-scale CMD: warning:`` line each,
    printed when raised (a warning before a long fit is seen before it, not after)."""

    def show(message, *_args, **_kwargs) -> None:
        """One warning as its line."""
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
