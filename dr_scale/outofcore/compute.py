"""One switch from laptop to cluster: where Dask graphs run, with progress.

* ``scheduler="tcp://host:port"`` (or Dask's ``scheduler-address`` config, which
  ``DASK_SCHEDULER_ADDRESS`` sets) — a ``distributed.Client`` to that cluster;
* ``local_workers=N`` — a ``LocalCluster`` of N single-threaded worker processes;
* neither — Dask's local threaded scheduler, no cluster at all;
* ``client=`` — a ``distributed.Client`` the caller already holds (Python API).

The same graphs run in all of them; only where they run changes. Connecting to a
scheduler is bounded by the Dask config key ``dr-scale.connect-timeout`` (default
15 s; environment ``DASK_DR_SCALE__CONNECT_TIMEOUT``), after which
:class:`SchedulerUnreachable` names the address. Security settings (TLS) come from
Dask's own ``distributed.comm.tls`` config, so a ``tls://`` address just works when
the certificates are configured (see docs/deploy.md).

:func:`compute` shows progress in the terminal in every mode and, when interrupted
(Ctrl-C), cancels the cluster's work before re-raising, so nothing keeps running on
the cluster for a job that no longer exists.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import multiprocessing
import os
import sys
import threading

import dask
from dask.system import CPU_COUNT
from dask.utils import parse_timedelta
from threadpoolctl import threadpool_limits

from dr_scale.core.errors import ParameterError, UserError
from dr_scale.io.storage import worker_environment

#: Dask settings of the ``LocalCluster`` that ``--local-workers`` starts, so its workers spend the CPU
#: the local process spends on the same tasks (docs/deploy.md § Worker settings; the same settings for
#: ``dask worker`` processes are deploy/dask/workers.yaml):
#:
#: * no ``MALLOC_TRIM_THRESHOLD_``: Dask's nannies set it, and glibc then also pins its mmap threshold
#:   at 128 KiB, so every larger array is a fresh mapping whose pages fault in one by one; unset, glibc
#:   adapts both thresholds as it does in the local process;
#: * no statistical profiler sampling every thread each 10 ms (the dashboard's profile page stays empty).
WORKER_CONFIG = {
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
    "distributed.worker.profile.enabled": False,
}

#: What a ``LocalCluster``'s worker processes import once, in the one process they are forked from
#: (:func:`_forked_workers`), instead of each on its own: Dask's worker (about 0.6 s of CPU), the data
#: contract's readers (pyarrow, fsspec) and the pass engine with numpy and scipy.sparse.
WORKER_PRELOAD = ("distributed", "scipy.sparse", "dr_scale.logs.reading", "dr_scale.outofcore.passes")

#: Dask config key of the memory limit of each ``--local-workers`` worker (default ``"auto"``: the machine's
#: memory over the workers; environment ``DASK_DR_SCALE__WORKER_MEMORY_LIMIT=6GiB``). Beyond 70% of it a
#: worker spills what it keeps to its local disk, at 80% it pauses, at 95% its nanny restarts it.
MEMORY_LIMIT_KEY = "dr-scale.worker-memory-limit"

#: Dask config key of the scheduler connect timeout, and its default.
CONNECT_TIMEOUT_KEY = "dr-scale.connect-timeout"
DEFAULT_CONNECT_TIMEOUT = "15s"


class SchedulerUnreachable(ParameterError, ConnectionError):
    """The scheduler address did not answer within the timeout."""


def connect_timeout() -> float:
    """Seconds to wait for a scheduler before giving up (Dask config ``dr-scale.connect-timeout``)."""
    value = dask.config.get(CONNECT_TIMEOUT_KEY, DEFAULT_CONNECT_TIMEOUT)
    try:
        seconds = parse_timedelta(value, default="s")
    except (KeyError, ValueError, TypeError):
        seconds = None
    if seconds is None or not seconds > 0:
        raise UserError(f"Dask config {CONNECT_TIMEOUT_KEY} = {value!r} (e.g. from DASK_DR_SCALE__CONNECT_TIMEOUT): "
                        "give a positive duration such as 15s or 2m")
    return seconds


def connect(scheduler: str):
    """A ``distributed.Client`` to ``scheduler``, or :class:`SchedulerUnreachable` within the timeout."""
    from distributed import Client
    from distributed.security import Security

    timeout = connect_timeout()
    if scheduler.startswith("tls://") and not Security().get_connection_args("client").get("ssl_context"):
        raise SchedulerUnreachable(
            f"cannot connect to {scheduler}: no TLS configuration for clients (Dask config "
            f"distributed.comm.tls.ca-file / .client.cert / .client.key; see docs/deploy.md)"
        )
    _check_address(scheduler)
    try:
        return Client(scheduler, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise SchedulerUnreachable(
            f"could not reach the Dask scheduler at {scheduler} within {timeout:g} s "
            f"({type(exc).__name__}: {exc}); check the address (`scheduler` / DASK_SCHEDULER_ADDRESS) "
            f"and that the scheduler is running"
        ) from exc


def _check_address(scheduler: str) -> None:
    """A scheduler address distributed can parse, with a port in range; else a :class:`UserError`."""
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.registry import backends

    try:
        scheme, location = parse_address(scheduler)
        if scheme not in backends:
            raise ValueError(f"unknown address scheme {scheme!r} (known schemes: {', '.join(sorted(backends))})")
        if scheme in ("tcp", "tls"):
            _, port = parse_host_port(location)
            if not 0 < port < 65536:
                raise ValueError(f"port {port} out of range")
    except (ValueError, TypeError) as exc:
        raise ParameterError(f"`scheduler` {scheduler!r}: {exc}; give an address such as tcp://HOST:8786 "
                        "(or set DASK_SCHEDULER_ADDRESS)") from None


#: ``local_workers`` is at most this many worker processes per core of the machine.
WORKERS_PER_CORE = 4


def max_local_workers() -> int:
    """The most ``--local-workers`` a machine takes: :data:`WORKERS_PER_CORE` × its cores (``os.cpu_count``)."""
    return WORKERS_PER_CORE * (os.cpu_count() or 1)


@contextlib.contextmanager
def dask_session(scheduler: str | None = None, local_workers: int | None = None, client=None, quiet: bool = False,
                 storage_options: dict | None = None):
    """Yield a ``distributed.Client`` (or None for the local threaded scheduler) for the block.

    ``client`` wins; then ``scheduler`` (else Dask's ``scheduler-address`` config);
    then ``local_workers``. Giving both a scheduler and local workers is an error.
    The secrets of ``storage_options`` reach a ``LocalCluster``'s workers through their
    environment (:func:`dr_scale.io.storage.worker_environment`), never through task graphs.
    Inside the block the client is also the *current* one (``Client.as_current``), so
    Dask and distributed helpers that look for a default client (``distributed.progress``,
    a bare ``dask.compute``) use it — without making it the process-wide default.
    """
    if client is not None:
        with client.as_current():
            yield client
        return
    if local_workers is not None and local_workers < 1:
        raise ParameterError(f"`local_workers` must be at least 1, got {local_workers}")
    if local_workers is not None and local_workers > max_local_workers():
        raise ParameterError(f"`local_workers` = {local_workers} is more than {WORKERS_PER_CORE} × this machine's "
                             f"{os.cpu_count() or 1} cores ({max_local_workers()}): each worker is a process with its "
                             "own memory and BLAS; use fewer, or a cluster (`scheduler`)")
    if scheduler and local_workers:
        raise ParameterError("give `scheduler` (an address) or `local_workers`, not both")
    scheduler = scheduler or (None if local_workers else dask.config.get("scheduler-address", None))
    if scheduler:
        with connect(scheduler) as c, c.as_current():
            _announce(c, quiet)
            yield c
    elif local_workers:
        from distributed import Client, LocalCluster

        # The workers start in the background (their processes import Python's libraries for a second or
        # two) while the caller prepares its job; the first pass that sizes its tasks waits for them
        # (:func:`cluster_workers`). Their settings are read as they start: the config stays set.
        with dask.config.set({**WORKER_CONFIG, **_forked_workers()}):
            cluster = LocalCluster(n_workers=0, threads_per_worker=1, processes=True, dashboard_address=":0",
                                   memory_limit=dask.config.get(MEMORY_LIMIT_KEY, "auto"),
                                   scheduler_kwargs={"dashboard": False}, env=worker_environment(storage_options))
            with cluster, Client(cluster, set_as_default=False) as c, c.as_current():  # (a client waits for
                cluster.scale(local_workers)                                          # the workers it sees asked for)
                dashboard = threading.Thread(target=_add_dashboard, args=(cluster,), name="dr-scale-dashboard",
                                             daemon=True)
                dashboard.start()
                _announce(c, quiet)
                try:
                    yield c
                except KeyboardInterrupt:
                    _quiet_shutdown(c)
                    raise
                finally:
                    dashboard.join()
    else:
        yield None


def _quiet_shutdown(client=None) -> None:
    """On an interrupt, the cluster's own shutdown noise is not the command's to print: asyncio's "Task
    exception was never retrieved" for the client's abandoned gather, the scheduler's and the nanny's
    warnings as workers stop mid-task. Their loggers in this process, which is about to exit, are raised
    to CRITICAL; the command prints its one ``interrupted`` line."""
    import logging

    for name in ("asyncio", "distributed", "tornado"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    from distributed import LocalCluster

    if client is not None and isinstance(getattr(client, "cluster", None), LocalCluster):  # this run's own workers
        with contextlib.suppress(Exception):
            client.run(_quiet_worker)


def _quiet_worker() -> None:
    """In a LocalCluster worker of an interrupted run: its cancelled tasks' warnings are not the user's concern."""
    import logging

    for name in ("distributed", "tornado", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _forked_workers() -> dict:
    """Dask config under which a LocalCluster's workers are forked from one server process that imported
    :data:`WORKER_PRELOAD` (multiprocessing's ``forkserver``), rather than each spawned as a new interpreter
    that imports them itself (Dask's default): two workers start on less than half the CPU. ``{}`` (Dask's
    default) where there is no forkserver (Windows)."""
    if not _set_forkserver_preload():
        return {}
    import distributed.utils

    # Dask sets its own list (with pandas, imported into this process first) unless told it has one.
    distributed.utils._forkserver_preload_set = True
    return {"distributed.worker.multiprocessing-method": "forkserver"}


def _set_forkserver_preload() -> bool:
    """:data:`WORKER_PRELOAD` as the forkserver's imports; False where there is no forkserver."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return False
    multiprocessing.get_context("forkserver").set_forkserver_preload(list(WORKER_PRELOAD))
    return True


def start_worker_server() -> None:
    """Start the forkserver of ``--local-workers``' workers now, first thing in the command: its imports (about a
    second of CPU) then run beside the command's own start-up instead of after it. It gets the environment Dask's
    nannies give the processes they start (``distributed.nanny.pre-spawn-environ`` with :data:`WORKER_CONFIG`: one
    BLAS thread, which the preloaded numpy reads as it loads); this process's environment is left as it was, and
    does not import Dask's distributed first (its defaults are read from its YAML file)."""
    if not _set_forkserver_preload():
        return
    import multiprocessing.forkserver

    env = {k: str(v) for k, v in _pre_spawn_environ().items() if v is not None}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k)
            else:
                os.environ[k] = v


def _pre_spawn_environ() -> dict:
    """``distributed.nanny.pre-spawn-environ`` as a nanny sees it under :data:`WORKER_CONFIG` — Dask's default
    (distributed's ``distributed.yaml``) under this machine's Dask config — without importing distributed."""
    import importlib.util
    from pathlib import Path

    import yaml

    key = "distributed.nanny.pre-spawn-environ"
    spec = importlib.util.find_spec("distributed")
    assert spec is not None and spec.origin is not None  # a dependency, installed as files
    defaults = yaml.safe_load((Path(spec.origin).parent / "distributed.yaml").read_text())
    with dask.config.set(WORKER_CONFIG):
        return {**dask.config.get(key, default={}, config=defaults), **dask.config.get(key, default={})}


def _add_dashboard(cluster) -> None:
    """Dask's dashboard on the LocalCluster's scheduler, added in a thread of its own while the job prepares and
    the workers start: its import (bokeh, about half a second of CPU) then delays neither. The scheduler already
    serves HTTP on the dashboard's port; this adds the dashboard's pages as Dask's ``Scheduler(dashboard=True)``
    does (``distributed.dashboard.scheduler.connect``). Without bokeh, or if that fails, the job runs on and
    says so."""
    try:
        from distributed.dashboard import scheduler as dashboard

        scheduler = cluster.scheduler

        async def connect():
            """Attach the dashboard to the scheduler's HTTP server, on the cluster's event loop."""
            dashboard.connect(scheduler.http_application, scheduler.http_server, scheduler)

        cluster.sync(connect)
    except Exception as exc:  # noqa: BLE001 -- the dashboard is a view; the job does not depend on it
        print(f"dask: no dashboard ({type(exc).__name__}: {exc})", file=sys.stderr)


def _announce(client, quiet: bool) -> None:
    """Tell the user where the job runs and where to watch it (stderr, so stdout stays the result)."""
    if not quiet:
        wanted = _wanted_workers(client)
        workers = f"{wanted} workers starting" if wanted else f"{len(client.scheduler_info()['workers'])} workers"
        print(f"dask: scheduler {client.scheduler.address} ({workers}), dashboard {client.dashboard_link}",
              file=sys.stderr)


def _wanted_workers(client) -> int:
    """How many workers the cluster object behind ``client`` asked for (0: no such object, e.g. a remote
    scheduler's client)."""
    return len(getattr(getattr(client, "cluster", None), "worker_spec", None) or ())


def cluster_workers(client) -> dict:
    """The scheduler's workers, ``{address: info}`` — once every worker that the client's own cluster
    (``--local-workers``) asked for has joined, or as many as joined within the connect timeout
    (``dr-scale.connect-timeout``); none by then is a :class:`UserError`."""
    workers = client.scheduler_info()["workers"]
    wanted = _wanted_workers(client)
    if len(workers) < wanted:
        timeout = connect_timeout()
        with contextlib.suppress(TimeoutError):
            client.wait_for_workers(wanted, timeout=timeout)
        workers = client.scheduler_info()["workers"]
        if not workers:
            raise UserError(f"none of the {wanted} local Dask workers started within {timeout:g} s "
                            f"(Dask config {CONNECT_TIMEOUT_KEY}); the scheduler's log above says why")
    return workers


@contextlib.contextmanager
def _local_pool():
    """The local scheduler's threads, as *daemon* threads (``multiprocessing.pool.ThreadPool``).

    Dask's default pool is a ``concurrent.futures`` executor, whose non-daemon threads the
    interpreter joins at exit; a Ctrl-C that lands while that pool is starting its threads
    can leave one waiting forever, so the interrupted command would print its message and
    then hang. Daemon threads cannot hold the process; the pool is terminated on exit.
    When a task fails, the tasks still running are waited for first: they may be writing into
    folders (spilled parts) that the caller removes next.
    """
    from multiprocessing.pool import ThreadPool

    pool = ThreadPool(dask.config.get("num_workers", None) or CPU_COUNT)
    try:
        yield pool
    except Exception:
        pool.close()
        pool.join()
        raise
    finally:
        pool.terminate()


def _progress_bar():
    from dr_scale.outofcore.progress import graph_bar

    return graph_bar(sys.stderr)


def check_client(client) -> None:
    """``client`` is None (the local threaded scheduler) or a ``distributed.Client``: else a
    :class:`~dr_scale.core.errors.ParameterError` naming ``client`` (not an AttributeError deep in a run)."""
    if client is not None and not all(callable(getattr(client, m, None)) for m in ("compute", "gather",
                                                                                    "scheduler_info")):
        raise ParameterError(f"`client` must be a distributed.Client, or None for the local threaded scheduler; got "
                             f"{type(client).__name__} {client!r:.60}")


def one_key(obj):
    """``obj`` (a model, an evaluation, a dict of them) as one graph key that each worker receives once and every
    task using it reads, rather than a copy pickled into each task's own arguments or closure — where a worker's
    memory would grow with the tasks it runs. Not traversed: a dict stays one key, its values are not hashed."""
    return dask.delayed(obj, traverse=False)


#: Dask's warning of a graph larger than this (``distributed.admin.large-graph-warning-threshold``), raised past
#: any model: a run's models are in its graph once (:func:`one_key`), the scheduler hands them to one worker and the
#: others fetch them from it, so Dask's advice (load the data with Dask, embed it once) is already followed.
LARGE_GRAPH = {"distributed.admin.large-graph-warning-threshold": "1 TiB"}


def compute(*collections, client=None, progress: bool = False):
    """Compute Dask collections on ``client`` (or the local threaded scheduler), showing progress.

    Locally, BLAS runs single-threaded inside the tasks, as it does on Dask workers (whose
    nannies set ``OPENBLAS_NUM_THREADS=1`` etc.): the tasks are the parallelism, and a BLAS
    reduction (``X.T @ X``, ``np.dot``) split over a different number of threads sums in a
    different order — the last bits of a result would depend on where it ran.

    On any interruption the cluster's futures are cancelled before the exception
    propagates; the caller writes outputs only after this returns, so an interrupted
    job leaves no partial output.
    """
    check_client(client)
    if client is None:
        with _local_scheduler(progress) as pool:
            return dask.compute(*collections, scheduler=_threaded_get(), pool=pool)
    with dask.config.set(LARGE_GRAPH):
        futures = client.compute(list(collections))
    with _cancel_on_interrupt(client, futures):
        _show_progress(client, futures, progress)
        return tuple(client.gather(futures))


def persist(*collections, client=None, progress: bool = False) -> list:
    """Persist Dask collections: computed into local memory, or kept in the cluster workers' memory.

    The same scheduler settings, progress and interruption handling as :func:`compute`;
    returns once every piece is in memory (task errors are raised here).
    """
    if client is None:
        with _local_scheduler(progress) as pool:
            return list(dask.persist(*collections, scheduler=_threaded_get(), pool=pool))
    from distributed import futures_of, wait

    with dask.config.set(LARGE_GRAPH):
        persisted = client.persist(list(collections))
    futures = futures_of(persisted)
    with _cancel_on_interrupt(client, futures):
        _show_progress(client, futures, progress)
        with client.as_current():  # ``wait`` asks for the current client; ours need not be the default
            wait(futures)
        for future in futures:
            if future.status == "error":
                future.result()  # raises the task's exception
    return list(persisted)


def _threaded_get():
    """Dask's threaded scheduler as a function: named ``"threads"``, dask first imports distributed to
    look for a default client, an import at a command's start that a local run does not need."""
    from dask.threaded import get

    return get


@contextlib.contextmanager
def _local_scheduler(progress: bool):
    """The local threaded scheduler's pool, single-threaded BLAS inside tasks, a progress bar; the C heap's free
    pages returned to the system after the computation (:func:`release_freed_memory`)."""
    try:
        with _local_pool() as pool, threadpool_limits(limits=1, user_api="blas"), \
                (_progress_bar() if progress else contextlib.nullcontext()):
            yield pool
    finally:
        release_freed_memory()


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none."""
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def release_freed_memory() -> None:
    """Return the C heap's free pages to the system (glibc's ``malloc_trim(0)``; elsewhere nothing), as Dask's
    workers do ("Memory not released back to the OS" in Dask's documentation), and Arrow's (its memory pool's
    ``release_unused``: the pool keeps what a Parquet read freed — 0.4 GiB through the 2M-row fit's passes).

    A pass's tasks allocate and free tens of MB per part on two threads; glibc raises its mmap threshold
    after such frees and serves the next ones from its per-thread heaps, which keep the freed pages. Without
    this, the resident memory of the 10M-row propensity fit grows from pass to pass by hundreds of MB of
    pages nothing uses (docs/benchmarks.md § The logging policy π̂₀ against scikit-learn).
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def _show_progress(client, futures, progress: bool) -> None:
    if progress:
        from distributed import progress as show_progress

        with contextlib.redirect_stdout(sys.stderr):  # distributed draws its bar on stdout
            show_progress(futures, scheduler=client.scheduler.address)  # our client need not be the default


@contextlib.contextmanager
def _cancel_on_interrupt(client, futures):
    """Cancel the cluster's work for ``futures`` if the block is interrupted or fails."""
    try:
        yield
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            _quiet_shutdown(client)
        with contextlib.suppress(Exception):
            client.cancel(futures)
        raise
