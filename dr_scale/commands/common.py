"""Options shared by the sub-commands: where to compute, and how to reach storage; the flags of a command."""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings

from dr_scale.io.config import NonNegativeInt, PositiveInt, TestFraction, option
from dr_scale.io.storage import STORAGE_OPTIONS_ENV, storage_options  # noqa: F401 - the sub-commands' import

#: ``type=`` of the integer options (counts, sizes, seeds), by the shared rules of :mod:`dr_scale.io.config`.
POSITIVE_INT = option(PositiveInt, "positive integer")
NON_NEGATIVE_INT = option(NonNegativeInt, "non-negative integer")


def add_compute_options(parser) -> None:
    group = parser.add_argument_group("where to compute")
    group.add_argument("--scheduler", metavar="ADDRESS",
                       help="Dask scheduler address (default: Dask config / DASK_SCHEDULER_ADDRESS, "
                            "else the local threaded scheduler)")
    group.add_argument("--local-workers", type=POSITIVE_INT, metavar="N",
                       help="start a LocalCluster of N (≥ 1) worker processes for this run")
    group.add_argument("--no-progress", action="store_true", help="do not show a progress bar")


def add_storage_option(parser) -> None:
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


def filtered_log(args, logs: str) -> str:
    """``logs`` carrying the filter of the options (:meth:`dr_scale.logs.filters.LogFilter.on`), or as it is."""
    from dr_scale.core.errors import ParameterError
    from dr_scale.logs.filters import DEFAULT_TEST_FRACTION, LogFilter

    if args.split is None and (args.test_fraction is not None or args.split_seed):
        raise ParameterError("`test_fraction` and `split_seed` choose the rows of a `split`; give it (train or test)")
    log_filter = LogFilter(days=args.days, split=args.split, split_seed=args.split_seed,
                           test_fraction=DEFAULT_TEST_FRACTION if args.test_fraction is None else args.test_fraction)
    return log_filter.on(logs) if log_filter else logs


@contextlib.contextmanager
def warnings_as_lines(command: str):
    """Warnings raised inside the block (e.g. an action never logged) as one ``dr-scale CMD: warning:`` line each."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        print(f"dr-scale {command}: warning: {w.message}", file=sys.stderr)


def option_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, str]:
    """The flag of each option of the sub-command ``args`` was parsed for, by its parameter name (its ``dest``).

    The library names its parameters in errors (:class:`~dr_scale.core.errors.ParameterError`);
    the command line prints each as its flag: ``rows`` as ``--rows``, ``local_workers`` as
    ``--local-workers``. A parameter that is not an option of the command keeps its name.
    """
    flags: dict[str, str] = {}
    while parser is not None:
        chosen = None
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(args, action.dest, None))
            elif action.option_strings:
                flags[action.dest] = max(action.option_strings, key=len)
        parser = chosen
    return flags
