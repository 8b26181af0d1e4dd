"""Identical results on a real command-line cluster, a LocalCluster and the local scheduler.

The cluster is ``dask scheduler`` + ``dask worker --nworkers 2`` processes (see
conftest.py). Results must agree bit for bit: every estimator state is a tree
reduction in a fixed order over per-file states, so where a task runs cannot
change a single float. The task graph must not carry the data: workers read the
Parquet parts themselves, so the graph's size does not grow with the rows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import evaluation
from distributed.protocol.pickle import dumps

from dr_scale.logs.writing import write_log
from dr_scale.ope.evaluation import evaluate_log, log_states
from dr_scale.outofcore.mergeable import tree_reduce
from dr_scale.synthetic.example import N_ACTIONS, N_FEATURES

DR_SCALE = str(Path(sys.executable).parent / "dr-scale")
N_PARTS = 8


@pytest.fixture(scope="module")
def example_log(example_parts):
    """The example's 14,000 rows as an 8-part log plus its reward model, in a folder every worker reads."""
    return example_parts(N_PARTS)


def local_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
    env.update(extra)
    return env


def evaluate_cli(log_root: Path, out: Path, *mode: str, env: dict | None = None) -> subprocess.Popen:
    """Start ``dr-scale evaluate`` on the log (the runs of a test go in parallel; see :func:`finish`)."""
    return subprocess.Popen(
        [DR_SCALE, "evaluate", str(log_root / "logs"), "--reward-model", str(log_root / "model.npz"),
         "--json", str(out), *mode],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env or local_env())


def finish(proc: subprocess.Popen, timeout: float = 150) -> tuple[str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    return out, err


@pytest.mark.timeout(180)
def test_evaluate_cli_identical_local_cluster_and_localcluster(dask_cluster, example_log, tmp_path):
    runs = [
        evaluate_cli(example_log, tmp_path / "local.json"),
        # The cluster through the standard Dask environment variable, not an option.
        evaluate_cli(example_log, tmp_path / "cluster.json",
                     env=local_env(DASK_SCHEDULER_ADDRESS=dask_cluster.address)),
        evaluate_cli(example_log, tmp_path / "localcluster.json", "--local-workers", "2"),
    ]
    (local_out, local_err), (cluster_out, cluster_err), (lc_out, lc_err) = [finish(p) for p in runs]

    results = [json.loads((tmp_path / f"{name}.json").read_text()) for name in ("local", "cluster", "localcluster")]
    assert results[0]["estimates"]["DR"]["n"] == 14_000
    assert results[1] == results[0]  # bit for bit: JSON floats round-trip exactly
    assert results[2] == results[0]
    assert cluster_out == local_out == lc_out  # progress goes to stderr, not into the results
    assert f"dask: scheduler {dask_cluster.address} (2 workers), dashboard http" in cluster_err
    assert "dashboard http" in lc_err
    assert "dask: scheduler" not in local_err
    assert "100% Completed" in local_err and "100% Completed" in cluster_err  # progress in every mode


@pytest.mark.timeout(120)
def test_python_api_accepts_a_client_large_parts(dask_cluster, example, example_log, tmp_path):
    """Parts of 70,000 rows: big enough for multi-threaded BLAS to split a reduction differently
    (local mode pins BLAS to one thread per task, as the workers' nannies do)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = example[0]
    copies = [table.set_column(0, "row_id", pc.add(table.column("row_id"), i * table.num_rows)) for i in range(20)]
    logs = str(tmp_path / "large")
    write_log(pa.concat_tables(copies), logs, n_parts=4, n_features=N_FEATURES, n_actions=N_ACTIONS)
    expected = evaluate_log(logs, evaluation(example_log / "model.npz")).to_dict()
    with dask_cluster.client() as client:
        got = evaluate_log(logs, evaluation(example_log / "model.npz"), client=client).to_dict()
    assert expected["estimates"]["DR"]["n"] == 280_000
    assert got == expected


def graph_bytes(logs: str, model_path: Path) -> int:
    """Pickled size of the task graph the client sends for an evaluation of ``logs``."""
    collection = tree_reduce(log_states(logs, evaluation(model_path)))
    return len(dumps(dict(collection.__dask_graph__())))


@pytest.mark.timeout(60)
def test_task_graph_does_not_carry_the_data(example, example_log, tmp_path):
    """Same number of parts, 10x the rows: the graph is the same size (the workers read the files)."""
    table = example[0]
    small, big = tmp_path / "rows-01400", tmp_path / "rows-14000"  # equal-length paths
    write_log(table.slice(0, 1400), str(small), n_parts=N_PARTS,
              n_features=N_FEATURES, n_actions=N_ACTIONS)
    write_log(table, str(big), n_parts=N_PARTS, n_features=N_FEATURES, n_actions=N_ACTIONS)
    small_graph = graph_bytes(str(small), example_log / "model.npz")
    big_graph = graph_bytes(str(big), example_log / "model.npz")
    data_growth = sum(p.stat().st_size for p in big.iterdir()) - sum(p.stat().st_size for p in small.iterdir())
    print(f"task graph: {small_graph} bytes for 1,400 rows, {big_graph} bytes for 14,000 rows "
          f"({N_PARTS} parts; the Parquet data grew by {data_growth} bytes)")
    assert abs(big_graph - small_graph) <= 64  # a few bytes of pickle framing at most
    assert data_growth > 10 * 64


def _boom(_):
    raise RuntimeError("task failed on a worker")


@pytest.mark.timeout(120)
def test_persist_with_a_client_that_is_not_the_default(dask_cluster):
    """The Python API's own client (set_as_default=False) persists, waits and raises task errors."""
    import dask

    from dr_scale.outofcore.compute import compute, persist

    with dask_cluster.client() as client:
        pieces = persist(*[dask.delayed(np.arange)(n) for n in (3, 5)], client=client, progress=True)
        assert compute(*[dask.delayed(len)(p) for p in pieces], client=client) == (3, 5)
        with pytest.raises(RuntimeError, match="task failed on a worker"):
            persist(dask.delayed(_boom)(0), client=client)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_graph_carrying_a_large_model_once_prints_no_dask_advice(local_cluster):
    """A run's models are in its graph once (one_key): Dask's "Sending large graph … Consider loading the data with
    Dask directly" is not advice a user can act on, and neither compute nor persist lets it through."""
    import warnings

    import dask
    from distributed import Client

    from dr_scale.outofcore.compute import compute, one_key, persist

    model = np.zeros(2_000_000)  # 16 MB, past Dask's 10 MB threshold
    with Client(local_cluster, set_as_default=False) as client, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert compute(dask.delayed(len)(one_key(model)), client=client) == (2_000_000,)
        (total,) = persist(dask.delayed(np.sum)(one_key(model)), client=client)
        assert compute(total, client=client) == (0.0,)
    assert not [w for w in caught if "large graph" in str(w.message)]


@pytest.mark.timeout(180)
def test_filters_and_several_policies_identical_on_the_cluster(dask_cluster, example_log):
    """The split's rows and a comparison of policies, and ρ̂ fitted on the train rows: the same on a cluster of
    worker processes (which unpickle the filtered part paths) as locally."""
    from dr_scale.logs.filters import LogFilter
    from dr_scale.logs.opened import open_log
    from dr_scale.reward.fitting import fit_reward_model

    logs = str(example_log / "logs")
    specs = ["column:target_action", "uniform", "epsilon-greedy:0.2:constant:1", "logging"]

    def run(client):
        model = fit_reward_model(open_log(logs, log_filter=LogFilter(split="train", test_fraction=0.3)),
                                 client=client)
        result = evaluate_log(logs, {s: evaluation(model, s) for s in specs}, client=client,
                              log_filter=LogFilter(split="test", test_fraction=0.3))
        return model.metadata["rows"], result.to_dict()

    expected = run(None)
    with dask_cluster.client() as client:
        got = run(client)
    assert got == expected
    train_rows, result = expected
    assert train_rows + result["policies"]["uniform"]["estimates"]["IPS"]["n"] == 14_000
