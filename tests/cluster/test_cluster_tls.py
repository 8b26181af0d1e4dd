"""TLS on every Dask connection, configured exactly as deploy/tls/ documents.

A scheduler and workers started with the deployed ``dask-tls.yaml`` (through
``DASK_CONFIG``) and certificates from ``make-certs.sh``: ``dr-scale evaluate`` with the
same config gives the local result bit for bit; a client without certificates gets a
clear error, and a plain ``tcp://`` connection to the TLS scheduler is refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import dask
import pytest

from dr_scale.ope.estimators import STANDARD_ESTIMATORS
from dr_scale.ope.evaluation import Evaluation, evaluate_log
from dr_scale.outofcore.compute import SchedulerUnreachable, dask_session
from dr_scale.reward.models import LinearRewardModel
from dr_scale.synthetic.example import example_paths

DR_SCALE = str(Path(sys.executable).parent / "dr-scale")


@pytest.mark.timeout(180)
def test_tls_cluster_identical_and_plain_connections_refused(tls_dask_cluster, tmp_path):
    address = tls_dask_cluster.address
    assert address.startswith("tls://")
    env = {k: v for k, v in tls_dask_cluster.env.items() if k != "DASK_SCHEDULER_ADDRESS"}
    proc = subprocess.Popen([DR_SCALE, "evaluate", "--no-progress", "--json", str(tmp_path / "tls.json"),
                             "--scheduler", address], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        logs, model = example_paths()  # what `dr-scale evaluate` runs with no arguments, here in-process
        local = evaluate_log(logs, Evaluation("column:target_action", list(STANDARD_ESTIMATORS),
                                              reward_model=LinearRewardModel.load(model))).to_dict()
        _, err = proc.communicate(timeout=150)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert f"dask: scheduler {address}" in err
    on_tls = json.loads((tmp_path / "tls.json").read_text())
    assert on_tls["estimates"] == local["estimates"] and on_tls["diagnostics"] == local["diagnostics"]

    # This test process has no TLS configuration: a clear error, not a TypeError from deep in distributed.
    with pytest.raises(SchedulerUnreachable, match=f"cannot connect to {address}: no TLS configuration"):
        with dask_session(address):
            pass
    plain = address.replace("tls://", "tcp://")
    with dask.config.set({"dr-scale.connect-timeout": "5s"}), \
            pytest.raises(SchedulerUnreachable, match=f"could not reach the Dask scheduler at {plain}"):
        with dask_session(plain):
            pass
