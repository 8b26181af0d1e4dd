"""The visits experiment (pipelines/visits.toml) on a SLURM cluster through dask-jobqueue.

Run on a login node, in the environment where dr-scale is installed
(``pip install . dask-jobqueue``)::

    python deploy/slurm/visits_slurm.py --jobs 4 -- --set rows=3854689 --set data=/shared/visits

Settings of the SLURM jobs (queue, account, cores, memory, walltime, environment
activation) come from dask-jobqueue's ``jobqueue.slurm`` config — see
deploy/slurm/jobqueue.yaml. Everything after ``--`` goes to ``dr-scale run``. The data,
the cache (DR_SCALE_CACHE) and ``out`` must be on a file system every compute node
mounts (or an object store), because the workers read and write them.
"""

from __future__ import annotations

import argparse
import sys

from dask_jobqueue import SLURMCluster
from distributed import Client

from dr_scale.cli import main as dr_scale


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=4, help="number of SLURM jobs of workers")
    parser.add_argument("--job-file", default="pipelines/visits.toml", help="dr-scale job specification")
    parser.add_argument("--wait", type=float, default=600, help="seconds to wait for the first worker")
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="-- then options for `dr-scale run`")
    args = parser.parse_args(argv)
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    with SLURMCluster() as cluster:
        cluster.scale(jobs=args.jobs)
        with Client(cluster) as client:
            client.wait_for_workers(1, timeout=args.wait)  # the queue may hold the jobs a while
        # The same command users type, pointed at this cluster's scheduler.
        return dr_scale(["run", args.job_file, "--scheduler", cluster.scheduler_address, *rest])


if __name__ == "__main__":
    sys.exit(run())
