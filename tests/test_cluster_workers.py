"""The worker processes ``--local-workers`` starts spend what the local process spends on a task.

Dask's nannies set ``MALLOC_TRIM_THRESHOLD_`` in their workers' environment, which pins glibc's
mmap threshold at 128 KiB: every larger array is then a fresh mapping whose pages fault in one
by one, each time. :data:`dr_scale.compute.WORKER_CONFIG` leaves it unset, so glibc reuses freed
memory as it does in the local process.
"""

from __future__ import annotations

import os
import platform
import resource

import dask
import numpy as np
import pytest

from dr_scale.compute import dask_session

ARRAYS, PAGES_EACH = 200, 512  # 2 MiB arrays: 512 pages of 4 KiB


def page_faults_of_short_lived_arrays() -> int:
    """Minor page faults while allocating, filling and freeing ARRAYS arrays of 2 MiB, one at a time."""
    np.ones(PAGES_EACH * 512)  # the first one raises glibc's adaptive threshold above its size
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(ARRAYS):
        np.ones(PAGES_EACH * 512)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc settings")
def test_local_workers_reuse_freed_memory_and_do_not_profile(monkeypatch):
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)  # a nanny started earlier in this process sets it
    with dask_session(local_workers=1, quiet=True) as client:
        client.wait_for_workers(1)  # they start in the background
        (faults,) = client.run(page_faults_of_short_lived_arrays).values()
        (trim,) = client.run(os.environ.get, "MALLOC_TRIM_THRESHOLD_").values()
        (profiling,) = client.run(dask.config.get, "distributed.worker.profile.enabled").values()
    assert trim is None and profiling is False
    assert faults < ARRAYS * PAGES_EACH / 10  # ~102,400 when every array is a fresh mapping
