"""Shared fixtures and helpers: the example log, an evaluation by every estimator, a real Dask cluster.

``example`` is the bundled example's 14,000 rows in memory (table, reward model, true
value); ``example_parts(n_parts)`` writes them once per session as an undated log of
n parts beside its reward model; :func:`evaluation` is an :class:`~dr_scale.Evaluation`
by every estimator. Tests import the helper as ``from conftest import evaluation``
(tests/ is on ``sys.path`` under pytest, and on the cluster's PYTHONPATH).


``dask_cluster`` (session scope) starts ``dask scheduler`` and ``dask worker
--nworkers 2 --nthreads 1`` as separate processes on 127.0.0.1 — the deployment
shape of a real cluster, not in-process threads — each in its own session so that
the whole process group (the worker command's nannies and their worker processes)
is stopped at the end. Every wait is bounded. ``tls_dask_cluster`` is the same with
TLS on every connection, configured by deploy/tls/. The processes (and ``tests_env``,
for ``dr-scale`` subprocesses) have tests/ on PYTHONPATH, so test modules can provide
callables the workers import by name.
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

#: Every estimator; ClippedDR and SwitchDR get the thresholds of :func:`evaluation`.
ALL_ESTIMATORS = ["DM", "IPS", "DR", "SNIPS", "SNDR", "SwitchDR", "ClippedDR"]
EXAMPLE_SEED = 5
BIN = Path(sys.executable).parent
TESTS = Path(__file__).parent
DEPLOY = TESTS.parent / "deploy"
TLS_DIR = "/etc/dask/tls"  # where deploy/tls/dask-tls.yaml expects the certificates
START_TIMEOUT = 60.0  # seconds for the scheduler file to appear and both workers to register
STOP_TIMEOUT = 15.0


@dataclass
class CommandLineCluster:
    """A scheduler and a two-process worker pool, started by the ``dask`` command."""

    address: str
    scheduler: subprocess.Popen
    workers: subprocess.Popen
    security: object | None = None  # a distributed.Security for TLS clusters
    env: dict | None = None         # the processes' environment (e.g. DASK_CONFIG for TLS)
    n_workers: int = 2

    def client(self, timeout: float = START_TIMEOUT):
        """A new client that has waited (bounded) for all workers, e.g. after one was killed."""
        from distributed import Client

        client = Client(self.address, timeout=timeout, set_as_default=False, security=self.security)
        try:
            client.wait_for_workers(self.n_workers, timeout=timeout)
        except BaseException:
            client.close()
            raise
        return client


#: tests/ and its sub-folders: pytest imports each test module by its base name from its own folder.
TEST_FOLDERS = [TESTS, *sorted(p for p in TESTS.iterdir() if p.is_dir() and any(p.glob("test_*.py")))]


def tests_on_path(env: dict | None = None) -> dict:
    """An environment whose PYTHONPATH has tests/ and its sub-folders, so processes can import
    test-provided callables (e.g. a deliberately slow ``callable:module:function`` policy)."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [*map(str, TEST_FOLDERS), env.get("PYTHONPATH")]))
    return env


def random_binary(n, d, density, seed):
    """A random sparse binary CSR matrix (n, d) whose columns are correlated through a latent factor."""
    import numpy as np
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    # correlated columns: a latent factor raises the odds of the first half of the features
    z = rng.random(n) < 0.4
    probs = np.where(z[:, None], np.r_[np.full(d // 2, 3 * density), np.full(d - d // 2, density)], density)
    return sp.csr_matrix((rng.random((n, d)) < probs).astype(np.float64))


def cli(capsys, *argv) -> tuple[int, str, str]:
    """``dr-scale ARGV`` in this process: (exit status, stdout, stderr), never a traceback."""
    from dr_scale.cli import main

    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    assert "Traceback" not in out.err, out.err
    return code, out.out, out.err


def error_line(err: str) -> str:
    """The one ``: error:`` line of a command's stderr."""
    (line,) = [x for x in err.splitlines() if ": error: " in x]
    return line


def machine() -> dict:
    """The code paths that set the last bits of a pinned figure: numpy's SIMD extensions found here and
    the BLAS kernels (tests that pin outputs bit for bit compare them on a like machine only)."""
    import numpy as np
    from threadpoolctl import threadpool_info

    simd = np.show_config(mode="dicts")["SIMD Extensions"]
    return {"simd": sorted(simd["found"]), "blas": sorted(f"{i.get('internal_api')} {i.get('architecture')}"
                                                         for i in threadpool_info() if i["user_api"] == "blas")}


def _start(args: list[str], log: Path, env: dict) -> subprocess.Popen:
    out = open(log, "wb")  # noqa: SIM115 - closed with the process in _stop
    proc = subprocess.Popen([str(BIN / "dask"), *args], stdout=out, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True, env=env)
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


@contextlib.contextmanager
def command_line_cluster(root: Path, env: dict | None = None, security=None):
    """Start ``dask scheduler`` + ``dask worker --nworkers 2 --nthreads 1`` on 127.0.0.1 under ``root``.

    ``env`` (default: this process's, with tests/ on PYTHONPATH) is the processes' environment,
    e.g. a ``DASK_CONFIG`` with TLS settings. Both process groups are stopped on exit.
    """
    env = tests_on_path(env)
    scheduler_file = root / "scheduler.json"
    scheduler = _start(["scheduler", "--host", "127.0.0.1", "--port", "0", "--dashboard-address", "127.0.0.1:0",
                        "--scheduler-file", str(scheduler_file)], root / "scheduler.log", env)
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
                         root / "workers.log", env)
        cluster = CommandLineCluster(address, scheduler, workers, security, env)
        try:
            cluster.client().close()
        except Exception as exc:
            raise RuntimeError(f"dask workers did not register: {exc}\n{_tail(root / 'workers.log')}") from exc
        yield cluster
    finally:
        if workers is not None:
            _stop(workers)
        _stop(scheduler)


#: Fixtures of real external components; a test that uses one is marked ``slow``.
SLOW_FIXTURES = {"dask_cluster", "tls_dask_cluster", "local_cluster", "s3_endpoint", "s3_bucket"}
#: The package's docstring examples of a second or more (each fits a model on a log): ``slow`` as the tests of
#: seconds of work are (``@pytest.mark.slow``), since a docstring cannot carry a mark.
SLOW_DOCTESTS = {"dr_scale.reward.fitting.fit_reward_model", "dr_scale.ope.balancing.fit_balancing_model_on_log",
                 "dr_scale.learning.learn.learn_policy", "dr_scale.reward.shared.fitting.fit_shared_model",
                 "dr_scale.learning.scorer.learn_item_scorer", "dr_scale.propensity.fitting.fit_propensity_model"}


def pytest_collection_modifyitems(items):
    """Mark the tests on a real cluster, TLS or S3 server, and the slow docstring examples, ``slow``:
    ``-m "not slow"`` is the quick loop."""
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())) or item.name in SLOW_DOCTESTS:
            item.add_marker(pytest.mark.slow)


def evaluation(model, policy: str = "column:target_action"):
    """An Evaluation of ``policy`` by every estimator (ClippedDR at weight 10, SwitchDR at τ = 5);
    ``model``: a LinearRewardModel or the path of its file."""
    from dr_scale import Evaluation, LinearRewardModel, make_estimators

    if not isinstance(model, LinearRewardModel):
        model = LinearRewardModel.load(str(model))
    return Evaluation(policy, make_estimators(ALL_ESTIMATORS, clip=10.0, tau=5.0), reward_model=model)


@pytest.fixture(scope="session")
def example():
    """The bundled example's rows without their date column: (table, reward model, true value of its target)."""
    from dr_scale.synthetic.example import make_example

    table, model, truth = make_example(seed=EXAMPLE_SEED)
    return table.drop_columns(["date"]), model, truth


@pytest.fixture(scope="session")
def example_parts(tmp_path_factory):
    """``example_parts(n_parts)``: a folder with ``logs/`` (the example's rows in n parts) and ``model.npz``,
    written once per session in a folder every worker reads."""
    from dr_scale.synthetic.example import write_example_parts

    written = {}

    def folder(n_parts: int) -> Path:
        if n_parts not in written:
            written[n_parts] = tmp_path_factory.mktemp(f"example-{n_parts}-parts")
            write_example_parts(str(written[n_parts]), n_parts, seed=EXAMPLE_SEED)
        return written[n_parts]

    return folder


@pytest.fixture(scope="session")
def dask_cluster(tmp_path_factory) -> CommandLineCluster:
    """A real cluster: ``dask scheduler`` + ``dask worker --nworkers 2 --nthreads 1`` on 127.0.0.1."""
    with command_line_cluster(tmp_path_factory.mktemp("dask-cluster")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def local_cluster():
    """The ``distributed.LocalCluster`` that ``--local-workers 2`` starts — two single-threaded worker processes
    with its Dask settings (``WORKER_CONFIG``) — started once per session and shared by every test that runs work
    on worker processes: the Python API through ``Client(local_cluster)`` (each test its own client), the commands
    through ``--scheduler local_cluster.scheduler_address``. Only the tests of the starting itself (``--local-workers``:
    tests/cluster/test_cluster_workers.py, the secrets in the workers' environment, an interrupted run) and the
    8-worker scaling test start a cluster of their own."""
    import dask
    from distributed import LocalCluster

    from dr_scale.outofcore.compute import WORKER_CONFIG

    with dask.config.set(WORKER_CONFIG), LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                                      dashboard_address=":0") as cluster:
        yield cluster


@pytest.fixture(scope="session")
def tls_dask_cluster(tmp_path_factory) -> CommandLineCluster:
    """The same cluster with TLS on every connection, configured by deploy/tls/dask-tls.yaml.

    Certificates come from deploy/tls/make-certs.sh; the config file is the deployed one with
    its certificate folder pointed at them, and reaches the processes through ``DASK_CONFIG``.
    """
    from distributed.security import Security

    root = tmp_path_factory.mktemp("dask-tls")
    certs, config = root / "certs", root / "config"
    subprocess.run(["bash", str(DEPLOY / "tls" / "make-certs.sh"), str(certs), "127.0.0.1"], check=True,
                   capture_output=True, timeout=120)
    config.mkdir()
    text = (DEPLOY / "tls" / "dask-tls.yaml").read_text()
    assert TLS_DIR in text
    (config / "dask-tls.yaml").write_text(text.replace(TLS_DIR, str(certs)))
    security = Security(tls_ca_file=str(certs / "ca.pem"), tls_client_cert=str(certs / "client.pem"),
                        tls_client_key=str(certs / "client-key.pem"), require_encryption=True)
    with command_line_cluster(root, {**os.environ, "DASK_CONFIG": str(config)}, security) as cluster:
        yield cluster


@pytest.fixture
def tests_env() -> dict:
    """This process's environment with tests/ on PYTHONPATH (for ``dr-scale`` subprocesses)."""
    return tests_on_path()


@pytest.fixture
def modes(local_cluster) -> dict:
    """The options of a command run twice, on the local scheduler and on the shared ``local_cluster``."""
    return {"local": [], "cluster": ["--scheduler", local_cluster.scheduler_address]}
