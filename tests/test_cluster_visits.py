"""The visits experiment (paper Sec. 5.2) on a real command-line cluster, identical to local mode.

At a small scale (20,000 users × 200 features in 8 parts, two fractions, three
repetitions): the generated data set is the same table whether its parts were
written by the local scheduler or by the cluster's workers, and ``dr-scale run
pipelines/visits.toml`` gives the same results.json (all but the timings) locally
and on the cluster. The job reads its parts on the workers from a folder every
worker can reach.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

BIN = Path(sys.executable).parent
JOB = Path(__file__).parent.parent / "pipelines" / "visits.toml"
GENERATE = ["generate", "visits", "--rows", "20000", "--features", "200", "--rows-per-part", "2500",
            "--no-calibration", "--no-progress"]
SMALL = ["--set", "repetitions=3", "--set", "fractions=[0.01, 0.05]", "--no-progress"]


def run_all(commands: list[list[str]], timeout: float = 150) -> list[str]:
    """Run ``dr-scale`` commands in parallel; each must succeed; their stdouts."""
    env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
    procs = [subprocess.Popen([str(BIN / "dr-scale"), *c], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for c in commands]
    outs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, f"{proc.args}:\n{err}"
            outs.append(out)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return outs


def results(folder: Path) -> dict:
    d = json.loads((folder / "results.json").read_text())
    del d["timings_seconds"]
    return d


@pytest.mark.timeout(300)
def test_visits_generate_and_run_identical_on_cluster(dask_cluster, tmp_path):
    cluster = ["--scheduler", dask_cluster.address]
    local_data, cluster_data = tmp_path / "data-local", tmp_path / "data-cluster"
    run_all([[*GENERATE, "--out", str(local_data)], [*GENERATE, "--out", str(cluster_data), *cluster]])
    parts = sorted(p.name for p in local_data.glob("*.parquet"))
    assert len(parts) == 8
    assert sorted(p.name for p in cluster_data.glob("*.parquet")) == parts
    assert pq.read_table(cluster_data).equals(pq.read_table(local_data))

    job = ["run", str(JOB), "--set", f"data={local_data}", *SMALL]
    local_out, cluster_out = run_all([[*job, "--set", f"out={tmp_path / 'out-local'}"],
                                      [*job, "--set", f"out={tmp_path / 'out-cluster'}", *cluster]])
    local, on_cluster = results(tmp_path / "out-local"), results(tmp_path / "out-cluster")
    assert local["rows"] == 20_000 and local["parts"] == 8
    assert on_cluster == local
    assert cluster_out.splitlines()[-4:-1] == local_out.splitlines()[-4:-1]  # the printed table
