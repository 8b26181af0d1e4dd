"""Options shared by the sub-commands: where to compute, and how to reach storage."""

from __future__ import annotations

import json
import os

from dr_scale.config import PositiveInt, option
from dr_scale.errors import UserError
from dr_scale.storage import STORAGE_OPTIONS_ENV


def add_compute_options(parser) -> None:
    group = parser.add_argument_group("where to compute")
    group.add_argument("--scheduler", metavar="ADDRESS",
                       help="Dask scheduler address (default: Dask config / DASK_SCHEDULER_ADDRESS, "
                            "else the local threaded scheduler)")
    group.add_argument("--local-workers", type=option(PositiveInt, "positive integer"), metavar="N",
                       help="start a LocalCluster of N (≥ 1) worker processes for this run")
    group.add_argument("--no-progress", action="store_true", help="do not show a progress bar")


def storage_options(path: str | dict | None = None) -> dict:
    """fsspec storage options: a dict as is, a JSON file's object, else the DR_SCALE_STORAGE_OPTIONS variable.

    Credentials never travel on the command line; the file or variable holds them.
    """
    if isinstance(path, dict):
        return path
    if path:
        try:
            with open(path) as f:
                text = f.read()
        except OSError as exc:
            raise UserError(f"storage options file {path}: {exc.strerror or exc}") from None
        return _options_object(text, f"storage options file {path}")
    raw = os.environ.get(STORAGE_OPTIONS_ENV)
    return _options_object(raw, f"${STORAGE_OPTIONS_ENV}") if raw and raw.strip() else {}


def _options_object(text: str, where: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UserError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise UserError(f"{where}: expected a JSON object of fsspec options, got {type(value).__name__}")
    return value


def add_storage_option(parser) -> None:
    parser.add_argument("--storage-options", metavar="FILE",
                        help=f"JSON file of fsspec storage options (default: ${STORAGE_OPTIONS_ENV}, "
                             "else the filesystem's own environment/credential chain)")
