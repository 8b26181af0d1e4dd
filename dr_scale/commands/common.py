"""Options shared by the sub-commands: where to compute, and how to reach storage."""

from __future__ import annotations

import json
import os

from dr_scale.storage import STORAGE_OPTIONS_ENV


def add_compute_options(parser) -> None:
    group = parser.add_argument_group("where to compute")
    group.add_argument("--scheduler", metavar="ADDRESS",
                       help="Dask scheduler address (default: Dask config / DASK_SCHEDULER_ADDRESS, "
                            "else the local threaded scheduler)")
    group.add_argument("--local-workers", type=int, metavar="N",
                       help="start a LocalCluster of N worker processes for this run")
    group.add_argument("--no-progress", action="store_true", help="do not show a progress bar")


def storage_options(path: str | None = None) -> dict:
    """fsspec storage options from a JSON file or the DR_SCALE_STORAGE_OPTIONS variable.

    Credentials never travel on the command line; the file or variable holds them.
    """
    if path:
        with open(path) as f:
            return json.load(f)
    raw = os.environ.get(STORAGE_OPTIONS_ENV)
    return json.loads(raw) if raw else {}


def add_storage_option(parser) -> None:
    parser.add_argument("--storage-options", metavar="FILE",
                        help=f"JSON file of fsspec storage options (default: ${STORAGE_OPTIONS_ENV}, "
                             "else the filesystem's own environment/credential chain)")
