"""``dr-scale run JOB.toml``: run a job specification from ``pipelines/``.

A job file names its kind in ``job = "…"``; the rest of the file is that job's
options, which command-line ``--set key=value`` pairs override. Each kind is a
function ``run(config: dict, client, progress: bool) -> int`` in the module listed
in :data:`JOBS`, which checks ``config`` with :func:`dr_scale.io.config.validate` against
its typed model; a :class:`~dr_scale.io.config.ConfigError` it raises is reported with the
job file's name.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Sequence

from dr_scale.commands.common import add_compute_options, storage_options
from dr_scale.io.config import ConfigError, read_config_file
from dr_scale.outofcore.compute import dask_session

#: job kind -> "module:function"
JOBS: dict[str, str] = {}
JOBS["classification_eval"] = "dr_scale.experiments.classification.job:run_evaluation"
JOBS["classification_opt"] = "dr_scale.experiments.classification.job:run_optimization"
JOBS["visits"] = "dr_scale.experiments.visits.job:run"
JOBS["report"] = "dr_scale.report.make:run_job"


def add_parser(sub) -> None:
    """Add ``dr-scale run`` and its options to the sub-command parsers ``sub``."""
    p = sub.add_parser("run", help="run a job specification (pipelines/*.toml)",
                       description="Run a job specification: " + ", ".join(JOBS or ["(none yet)"]))
    p.add_argument("job", help="path of a job file, e.g. pipelines/visits.toml")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override an option of the job file (VALUE parsed as JSON when it can be)")
    add_compute_options(p)
    p.set_defaults(func=run)


def load_job(path: str, overrides: Sequence[str] = ()) -> dict:
    """The job file's table with the ``--set KEY=VALUE`` overrides (VALUE as JSON when it parses)."""
    config = read_config_file(path)
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        try:
            config[key] = json.loads(value)
        except json.JSONDecodeError:
            config[key] = value
    if not isinstance(config.get("job"), str) or config["job"] not in JOBS:
        raise ConfigError(f"job = {config.get('job')!r}; known jobs: {', '.join(JOBS)}", path)
    return config


def run(args) -> int:
    """Run ``dr-scale run``: the job file's job, with its ``--set`` overrides; the exit status."""
    config = load_job(args.job, args.set)
    module, _, function = JOBS[config["job"]].partition(":")
    try:
        options = config.get("storage_options")  # a job's options, or the name of their JSON file
        options = storage_options(options) if isinstance(options, (str, dict)) else None
        with dask_session(args.scheduler, args.local_workers, storage_options=options) as client:
            job = getattr(importlib.import_module(module), function)  # while a LocalCluster's workers start
            return int(job(config, client=client, progress=not args.no_progress) or 0)
    except ConfigError as exc:
        raise exc.in_file(f"{args.job}{' (with --set)' if args.set else ''}") from None
