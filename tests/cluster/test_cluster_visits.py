"""The visits experiment (paper Sec. 5.2) on a real command-line cluster, identical to local mode.

At a small scale (20,000 users × 200 features in 8 parts, two fractions, three
repetitions): the data set written by the cluster's workers (``dr-scale generate
visits --scheduler …``) is the same table as the one written locally, and
``dr-scale run pipelines/visits.toml --scheduler …`` gives the same results.json (all
but the timings) as the job run locally. The cluster reads its parts on the workers
from a folder every worker can reach. The local side runs in this process, through the
same functions the commands call, while the cluster command runs.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dr_scale.experiments.visits.job import run as run_visits
from dr_scale.io.tomlcompat import tomllib
from dr_scale.synthetic.visits import generate_visits

BIN = Path(sys.executable).parent
JOB = Path(__file__).parents[2] / "pipelines" / "visits.toml"
ROWS, FEATURES, ROWS_PER_PART = 20_000, 200, 2500
SMALL = {"repetitions": 3, "fractions": [0.01, 0.05]}


def while_running(args: list[str], local, timeout: float = 150):
    """Start ``dr-scale args`` on the cluster, call ``local()`` meanwhile; the command must succeed."""
    env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
    proc = subprocess.Popen([str(BIN / "dr-scale"), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            local()
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, f"{args}:\n{err}"


def results(folder: Path) -> dict:
    d = json.loads((folder / "results.json").read_text())
    del d["timings_seconds"]
    return d


@pytest.mark.timeout(240)
def test_visits_generate_and_run_identical_on_cluster(dask_cluster, tmp_path):
    cluster = ["--scheduler", dask_cluster.address, "--no-progress"]
    local_data, cluster_data = tmp_path / "data-local", tmp_path / "data-cluster"
    while_running(["generate", "visits", "--rows", str(ROWS), "--features", str(FEATURES), "--rows-per-part",
                   str(ROWS_PER_PART), "--no-calibration", "--out", str(cluster_data), *cluster],
                  lambda: generate_visits(str(local_data), rows=ROWS, features=FEATURES,
                                          rows_per_part=ROWS_PER_PART))
    parts = sorted(p.name for p in local_data.glob("*.parquet"))
    assert len(parts) == 8
    assert sorted(p.name for p in cluster_data.glob("*.parquet")) == parts
    assert pq.read_table(cluster_data).equals(pq.read_table(local_data))

    config = {**tomllib.loads(JOB.read_text()), **SMALL, "data": str(local_data), "out": str(tmp_path / "local")}
    while_running(["run", str(JOB), "--set", f"data={local_data}", "--set", f"out={tmp_path / 'cluster'}",
                   *(f"--set={k}={json.dumps(v)}" for k, v in SMALL.items()), *cluster],
                  lambda: run_visits(config))
    local, on_cluster = results(tmp_path / "local"), results(tmp_path / "cluster")
    assert local["rows"] == ROWS and local["parts"] == 8 and local["settings"]["repetitions"] == 3
    assert on_cluster == local
