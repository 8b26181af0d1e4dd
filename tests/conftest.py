"""Shared fixtures: a real Dask cluster started from the command line.

``dask_cluster`` (session scope) starts ``dask scheduler`` and ``dask worker
--nworkers 2 --nthreads 1`` as separate processes on 127.0.0.1 — the deployment
shape of a real cluster, not in-process threads — each in its own session so that
the whole process group (the worker command's nannies and their worker processes)
is stopped at the end. Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
TESTS = Path(__file__).parent
START_TIMEOUT = 60.0  # seconds for the scheduler file to appear and both workers to register
STOP_TIMEOUT = 15.0


@dataclass
class CommandLineCluster:
    """A scheduler and a two-process worker pool, started by the ``dask`` command."""

    address: str
    scheduler: subprocess.Popen
    workers: subprocess.Popen
    n_workers: int = 2

    def client(self, timeout: float = START_TIMEOUT):
        """A new client that has waited (bounded) for all workers, e.g. after one was killed."""
        from distributed import Client

        client = Client(self.address, timeout=timeout, set_as_default=False)
        try:
            client.wait_for_workers(self.n_workers, timeout=timeout)
        except BaseException:
            client.close()
            raise
        return client


def tests_on_path(env: dict | None = None) -> dict:
    """An environment whose PYTHONPATH has tests/, so processes can import test-provided callables
    (e.g. a deliberately slow ``callable:module:function`` policy)."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))
    return env


def _start(args: list[str], log: Path) -> subprocess.Popen:
    out = open(log, "wb")  # noqa: SIM115 - closed with the process in _stop
    proc = subprocess.Popen([str(BIN / "dask"), *args], stdout=out, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True, env=tests_on_path())
    proc.log = out
    return proc


def _stop(proc: subprocess.Popen) -> None:
    """Stop the process's whole group: SIGTERM, bounded wait, then SIGKILL; never leave a process."""
    pgid = proc.pid  # start_new_session=True: the process leads its own group
    for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT), (signal.SIGKILL, STOP_TIMEOUT)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and _group_alive(pgid):
            time.sleep(0.05)
        if proc.poll() is not None and not _group_alive(pgid):
            break
    proc.log.close()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _tail(path: Path, n: int = 3000) -> str:
    return path.read_bytes()[-n:].decode(errors="replace") if path.exists() else ""


@pytest.fixture(scope="session")
def dask_cluster(tmp_path_factory) -> CommandLineCluster:
    """A real cluster: ``dask scheduler`` + ``dask worker --nworkers 2 --nthreads 1`` on 127.0.0.1."""
    root = tmp_path_factory.mktemp("dask-cluster")
    scheduler_file = root / "scheduler.json"
    scheduler = _start(["scheduler", "--host", "127.0.0.1", "--port", "0", "--dashboard-address", "127.0.0.1:0",
                        "--scheduler-file", str(scheduler_file)], root / "scheduler.log")
    workers = None
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not scheduler_file.exists():
            if scheduler.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dask scheduler did not start:\n{_tail(root / 'scheduler.log')}")
            time.sleep(0.1)
        time.sleep(0.1)  # the file is written in one go; give the writer a moment to close it
        address = json.loads(scheduler_file.read_text())["address"]
        workers = _start(["worker", address, "--nworkers", "2", "--nthreads", "1", "--host", "127.0.0.1",
                          "--dashboard-address", "127.0.0.1:0", "--local-directory", str(root / "workers")],
                         root / "workers.log")
        cluster = CommandLineCluster(address, scheduler, workers)
        try:
            cluster.client().close()
        except Exception as exc:
            raise RuntimeError(f"dask workers did not register: {exc}\n{_tail(root / 'workers.log')}") from exc
        yield cluster
    finally:
        if workers is not None:
            _stop(workers)
        _stop(scheduler)


@pytest.fixture
def tests_env() -> dict:
    """This process's environment with tests/ on PYTHONPATH (for ``dr-scale`` subprocesses)."""
    return tests_on_path()
