"""Faults: a worker killed mid-job, an unreachable scheduler, Ctrl-C.

To make "mid-job" certain rather than lucky, the jobs here evaluate
:func:`slow_policy` — "always action 0" with a short sleep per partition — so the
results must equal those of ``constant:0`` bit for bit. The worker processes import
this module by name (tests/ is on their PYTHONPATH, see conftest.py), so its
module-level imports are kept light.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import evaluation

from dr_scale.ope.evaluation import evaluate_log, log_states
from dr_scale.outofcore.mergeable import tree_reduce

pytestmark = pytest.mark.slow  # worker processes killed, a scheduler that never answers, Ctrl-C: seconds each

DR_SCALE = str(Path(sys.executable).parent / "dr-scale")
N_PARTS = 80
SLEEP = 0.04  # seconds per partition: >= 1.6 s of work for two single-threaded workers
SLOW_POLICY = f"callable:{__name__}:slow_policy"


#: A file the slow policy creates when it first runs, if this variable names one: the job has started.
STARTED_ENV = "DR_SCALE_TEST_STARTED"


def slow_policy(X, row_id):
    """Always action 0 (as ``constant:0``), taking at least SLEEP seconds per partition."""
    if os.environ.get(STARTED_ENV):
        Path(os.environ[STARTED_ENV]).touch()
    time.sleep(SLEEP)
    return np.zeros(X.shape[0], dtype=np.int64)


@pytest.fixture(scope="module")
def many_parts(example_parts):
    """The example's 14,000 rows in 80 parts, and its reward model."""
    return example_parts(N_PARTS)


def without_policy(result) -> dict:
    d = result.to_dict()
    del d["policy"]
    return d


def wait_until(condition, timeout: float, what: str, interval: float = 0.01):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
    return value


@pytest.mark.timeout(120)
def test_worker_killed_mid_job_gives_the_same_result(dask_cluster, many_parts):
    logs = str(many_parts / "logs")
    expected = without_policy(evaluate_log(logs, evaluation(many_parts / "model.npz", "constant:0")))
    slow = evaluation(many_parts / "model.npz", SLOW_POLICY)
    with dask_cluster.client() as client:
        future = client.compute(tree_reduce(log_states(logs, slow)))
        # Once a worker holds finished per-part states, SIGKILL its process (not its nanny).
        holder = wait_until(lambda: next((w for w, keys in client.has_what().items() if keys), None),
                            timeout=60, what="a worker to hold a finished task")
        pid = client.run(os.getpid, workers=[holder])[holder]
        assert not future.done(), "the job finished before the kill: make it longer"
        os.kill(pid, signal.SIGKILL)
        state = future.result(timeout=90)
        wait_until(lambda: holder not in client.scheduler_info()["workers"], timeout=30,
                   what="the scheduler to notice the dead worker")
    assert without_policy(slow.result(state)) == expected


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(90)
def test_unreachable_scheduler_is_a_clear_error_not_a_hang(tmp_path):
    address = f"tcp://127.0.0.1:{free_port()}"  # nothing listens there
    env = {**os.environ, "DASK_DR_SCALE__CONNECT_TIMEOUT": "3s"}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    start = time.monotonic()
    proc = subprocess.run([DR_SCALE, "evaluate", "--scheduler", address, "--json", str(tmp_path / "out.json")],
                          capture_output=True, text=True, timeout=80, env=env)
    elapsed = time.monotonic() - start
    assert proc.returncode == 2
    assert f"dr-scale evaluate: error: could not reach the Dask scheduler at {address} within 3 s" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert elapsed < 60  # a hang guard, not a speed assertion
    assert not list(tmp_path.iterdir())


def interrupt_when_running(cmd: list[str], env: dict, started: Path) -> subprocess.CompletedProcess:
    """Run ``cmd``; once its tasks run (its progress bar shows, or the slow policy created ``started``: the local
    bar writes only its final state when stderr is not a terminal), send SIGINT (Ctrl-C); return how it ended."""
    env = {**env, STARTED_ENV: str(started)}
    # A job started in the background of a non-interactive shell inherits SIGINT *ignored*, which
    # Python then keeps: give the child the default disposition, as a terminal's Ctrl-C would find it.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    err = bytearray()

    def read_stderr():  # the only reader of the pipe: everything the process writes lands in ``err``
        while chunk := proc.stderr.read1(4096):
            err.extend(chunk)

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        wait_until(lambda: b"% Completed" in err or started.exists() or proc.poll() is not None, timeout=60,
                   what="the job's tasks to run")
        assert proc.poll() is None, f"the job ended before it could be interrupted:\n{err.decode()}"
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=10)
    out = proc.stdout.read()
    proc.stdout.close()
    proc.stderr.close()
    return subprocess.CompletedProcess(cmd, proc.returncode, out.decode(), err.decode())


@pytest.mark.timeout(120)
@pytest.mark.parametrize("where", ["local", "cluster"])
def test_ctrl_c_leaves_no_partial_output(where, many_parts, tmp_path, tests_env, request):
    out = tmp_path / "results"
    cmd = [DR_SCALE, "evaluate", str(many_parts / "logs"), "--policy", SLOW_POLICY,
           "--reward-model", str(many_parts / "model.npz"), "--json", str(out / "out.json")]
    tests_env.pop("DASK_SCHEDULER_ADDRESS", None)
    if where == "cluster":
        cluster = request.getfixturevalue("dask_cluster")
        cmd += ["--scheduler", cluster.address]
    done = interrupt_when_running(cmd, tests_env, tmp_path / "started")
    assert done.returncode == 130, done.stderr
    assert "dr-scale evaluate: interrupted; nothing was half-written" in done.stderr
    assert done.stdout == ""
    assert not out.exists() or not list(out.iterdir())
    if where == "cluster":
        with cluster.client() as client:  # the interrupted job's tasks were cancelled, not left running
            wait_until(lambda: client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) == 0,
                       timeout=30, what="the scheduler to forget the interrupted job", interval=0.2)


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_worker_killed_during_the_ridge_of_a_million_row_job_gives_the_same_result(dask_cluster, tmp_path):
    """The visits job on 1,000,000 users (1,000 features, 10 parts): once a worker computes a block of the
    ridge fits (its CG iterations, :func:`dr_scale.outofcore.blocks.solve_in_blocks`), SIGKILL its process;
    the lost parts, pieces and block are computed again and every estimate has the bits of local mode."""
    from dr_scale.experiments.visits.experiment import Settings, load_parts, run_experiment
    from dr_scale.synthetic.visits import generate_visits

    data = str(tmp_path / "visits")
    generate_visits(data, rows=1_000_000, features=1000, seed=1, rows_per_part=100_000)
    settings = Settings(fractions=(0.01, 0.05), repetitions=50, seed=3)
    local = run_experiment(load_parts(data), settings)
    outcome = {}
    with dask_cluster.client() as client:
        def on_cluster():
            try:
                outcome["result"] = run_experiment(load_parts(data, client=client), settings)
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                outcome["error"] = exc

        job = threading.Thread(target=on_cluster)
        job.start()
        holder = wait_until(lambda: next((w for w, keys in client.processing().items()
                                          if any(str(k).startswith("_solve_block") for k in keys)), None),
                            timeout=300, what="a worker to compute a block of the ridge fits", interval=0.005)
        pid = client.run(os.getpid, workers=[holder])[holder]
        assert job.is_alive(), "the job finished before the kill: make it longer"
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: holder not in client.scheduler_info()["workers"], timeout=30,
                   what="the scheduler to notice the dead worker")
        job.join(timeout=300)
        assert not job.is_alive() and "error" not in outcome, outcome.get("error")
        killed = outcome["result"]
    for name in ("ips", "dr", "r2", "subsample_size"):
        np.testing.assert_array_equal(getattr(killed, name), getattr(local, name))
    assert killed.ridge_iterations == local.ridge_iterations
