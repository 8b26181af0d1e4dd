"""The worker processes ``--local-workers`` starts spend what the local process spends on a task.

Dask's nannies set ``MALLOC_TRIM_THRESHOLD_`` in their workers' environment, which pins glibc's
mmap threshold at 128 KiB: every larger array is then a fresh mapping whose pages fault in one
by one, each time. :data:`dr_scale.outofcore.compute.WORKER_CONFIG` leaves it unset, so glibc reuses freed
memory as it does in the local process.
"""

from __future__ import annotations

import os
import platform
import resource

import dask
import numpy as np
import pytest

from dr_scale.outofcore.compute import dask_session

ARRAYS, PAGES_EACH = 200, 512  # 2 MiB arrays: 512 pages of 4 KiB


def page_faults_of_short_lived_arrays() -> int:
    """Minor page faults while allocating, filling and freeing ARRAYS arrays of 2 MiB, one at a time."""
    np.ones(PAGES_EACH * 512)  # the first one raises glibc's adaptive threshold above its size
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(ARRAYS):
        np.ones(PAGES_EACH * 512)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def parent_command_line() -> str:
    """The command line of the process this worker process was started by."""
    import psutil

    return " ".join(psutil.Process().parent().cmdline())


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_local_workers_start_forked_in_the_background_with_the_local_process_settings(monkeypatch):
    """One start of ``local_workers=2`` (each start costs seconds): the session returns before its workers have
    started and a pass sizes its tasks by all of them (it waits); they are forked from one forkserver that
    imported Dask and the pass engine; the dashboard serves; their memory limit comes from the Dask config; glibc
    reuses their freed memory (no ``MALLOC_TRIM_THRESHOLD_``) and no profiler samples them."""
    import urllib.request

    from dr_scale.outofcore.compute import MEMORY_LIMIT_KEY, cluster_workers
    from dr_scale.outofcore.passes import worker_slots

    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)  # a nanny started earlier in this process sets it
    with dask.config.set({MEMORY_LIMIT_KEY: "1.5GiB"}), dask_session(local_workers=2, quiet=True) as client:
        assert len(worker_slots(client)) == 2  # right away: the first pass waits for both workers
        parents = set(client.run(parent_command_line).values())
        page = urllib.request.urlopen(client.dashboard_link, timeout=30).read().decode()
        limits = [w["memory_limit"] for w in cluster_workers(client).values()]
        faults = list(client.run(page_faults_of_short_lived_arrays).values())
        trim = set(client.run(os.environ.get, "MALLOC_TRIM_THRESHOLD_").values())
        profiling = set(client.run(dask.config.get, "distributed.worker.profile.enabled").values())
    assert len(parents) == 1 and "forkserver" in parents.pop()
    assert "bokeh" in page.lower() and "Dask" in page
    assert limits == [int(1.5 * 2 ** 30)] * 2
    assert trim == {None} and profiling == {False}
    if platform.libc_ver()[0] == "glibc":  # glibc's malloc settings
        assert max(faults) < ARRAYS * PAGES_EACH / 10  # ~102,400 when every array is a fresh mapping


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_local_workers_that_never_start_are_a_user_error_within_the_connect_timeout():
    """A worker that cannot start (here: a preload module that does not exist) is no hang: the first pass
    waits for the workers for ``dr-scale.connect-timeout``, then names the setting."""
    from dr_scale.core.errors import UserError
    from dr_scale.outofcore.compute import CONNECT_TIMEOUT_KEY, cluster_workers

    settings = {"distributed.worker.preload": ["dr_scale_no_such_module"], CONNECT_TIMEOUT_KEY: "3s"}
    with pytest.raises(UserError, match=r"none of the 2 local Dask workers started within 3 s .*connect-timeout"), \
            dask.config.set(settings), dask_session(local_workers=2, quiet=True) as client:
        cluster_workers(client)


EARLY_FORKSERVER = """
import os
from threadpoolctl import threadpool_info

def blas_threads():
    from threadpoolctl import threadpool_info
    return sorted({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})

if __name__ == "__main__":
    from dr_scale.outofcore.compute import dask_session, start_worker_server
    start_worker_server()
    print("env", os.environ.get("OPENBLAS_NUM_THREADS"))
    with dask_session(local_workers=1, quiet=True) as client:
        client.wait_for_workers(1)
        print("workers", list(client.run(blas_threads).values()))
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_forkserver_started_early_gives_its_workers_one_blas_thread(tmp_path):
    """``dr-scale … --local-workers N`` starts the workers' forkserver before anything else; its preloaded numpy
    must still run BLAS on one thread (Dask's nanny environment), or sums would differ from local mode's. The
    command's own environment is left as it was."""
    import subprocess
    import sys

    script = tmp_path / "early.py"
    script.write_text(EARLY_FORKSERVER)
    blas = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    env = {k: v for k, v in os.environ.items() if k not in blas}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=100,
                         check=True).stdout.splitlines()
    assert out == ["env None", "workers [[1]]"]
