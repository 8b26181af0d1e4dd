"""One switch from laptop to cluster: where Dask graphs run, with progress.

* ``scheduler="tcp://host:port"`` (or Dask's ``scheduler-address`` config, which
  ``DASK_SCHEDULER_ADDRESS`` sets) — a ``distributed.Client`` to that cluster;
* ``local_workers=N`` — a ``LocalCluster`` of N single-threaded worker processes;
* neither — Dask's local threaded scheduler, no cluster at all.

The same graphs run in all three; only where they run changes.
"""

from __future__ import annotations

import contextlib
import sys

import dask

CONNECT_TIMEOUT = "15s"


class SchedulerUnreachable(ConnectionError):
    """The scheduler address did not answer within the timeout."""


@contextlib.contextmanager
def dask_session(scheduler: str | None = None, local_workers: int | None = None, client=None, quiet: bool = False):
    """Yield a ``distributed.Client`` (or None for the local scheduler) for the block."""
    if client is not None:
        yield client
        return
    scheduler = scheduler or dask.config.get("scheduler-address", None)
    if scheduler:
        from distributed import Client

        try:
            c = Client(scheduler, timeout=CONNECT_TIMEOUT, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise SchedulerUnreachable(
                f"could not reach the Dask scheduler at {scheduler} within {CONNECT_TIMEOUT}: {exc}"
            ) from exc
        with c:
            _announce(c, quiet)
            yield c
    elif local_workers:
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=local_workers, threads_per_worker=1, processes=True,
                          dashboard_address=":0") as cluster, Client(cluster, set_as_default=False) as c:
            _announce(c, quiet)
            yield c
    else:
        yield None


def _announce(client, quiet: bool) -> None:
    if not quiet:
        print(f"dask: {client.scheduler.address}, dashboard {client.dashboard_link}", file=sys.stderr)


def compute(*collections, client=None, progress: bool = False):
    """Compute Dask collections on ``client`` (or locally), showing a progress bar."""
    if client is None:
        if progress:
            from dask.diagnostics import ProgressBar

            with ProgressBar(out=sys.stderr):
                return dask.compute(*collections, scheduler="threads")
        return dask.compute(*collections, scheduler="threads")
    futures = client.compute(list(collections))
    if progress:
        from distributed import progress as show_progress

        show_progress(futures)
        print(file=sys.stderr)
    return tuple(client.gather(futures))
