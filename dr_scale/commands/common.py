"""Options shared by the sub-commands: where to compute, and how to reach storage."""

from __future__ import annotations

import contextlib
import sys
import warnings

from dr_scale.config import PositiveInt, option
from dr_scale.storage import STORAGE_OPTIONS_ENV, storage_options  # noqa: F401 - the sub-commands' import


def add_compute_options(parser) -> None:
    group = parser.add_argument_group("where to compute")
    group.add_argument("--scheduler", metavar="ADDRESS",
                       help="Dask scheduler address (default: Dask config / DASK_SCHEDULER_ADDRESS, "
                            "else the local threaded scheduler)")
    group.add_argument("--local-workers", type=option(PositiveInt, "positive integer"), metavar="N",
                       help="start a LocalCluster of N (≥ 1) worker processes for this run")
    group.add_argument("--no-progress", action="store_true", help="do not show a progress bar")


def add_storage_option(parser) -> None:
    parser.add_argument("--storage-options", metavar="FILE",
                        help=f"JSON file of fsspec storage options (default: ${STORAGE_OPTIONS_ENV}, "
                             "else the filesystem's own environment/credential chain)")


@contextlib.contextmanager
def warnings_as_lines(command: str):
    """Warnings raised inside the block (e.g. an action never logged) as one ``dr-scale CMD: warning:`` line each."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        print(f"dr-scale {command}: warning: {w.message}", file=sys.stderr)


@contextlib.contextmanager
def settings_errors_as_flags():
    """A settings object's error (:class:`dr_scale.fitting.SettingError`, naming a parameter) re-raised naming the
    parameter's command-line flag: ``folds must be …`` → ``--folds must be …``."""
    from dr_scale.fitting import SettingError

    try:
        yield
    except SettingError as exc:
        raise SettingError(f"--{exc.parameter.replace('_', '-')}", exc.message) from None
