"""TLS on every Dask connection, configured exactly as deploy/tls/ documents.

A scheduler and workers started with the deployed ``dask-tls.yaml`` (through
``DASK_CONFIG``) and certificates from ``make-certs.sh``: ``dr-scale evaluate`` with the
same config gives the local result bit for bit; without certificates it fails with a
clear message, and a plain ``tcp://`` connection to the TLS scheduler is refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DR_SCALE = str(Path(sys.executable).parent / "dr-scale")


def evaluate(*args: str, env: dict, out: Path) -> subprocess.Popen:
    """Start ``dr-scale evaluate`` on the bundled example (the runs of the test go in parallel)."""
    env = {k: v for k, v in env.items() if k != "DASK_SCHEDULER_ADDRESS"}
    return subprocess.Popen([DR_SCALE, "evaluate", "--no-progress", "--json", str(out), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**env, "DASK_DR_SCALE__CONNECT_TIMEOUT": "5s"})


def finish(proc: subprocess.Popen, timeout: float = 150) -> subprocess.CompletedProcess:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.timeout(240)
def test_tls_cluster_identical_and_plain_connections_refused(tls_dask_cluster, tmp_path):
    address = tls_dask_cluster.address
    assert address.startswith("tls://")
    plain_address = address.replace("tls://", "tcp://")
    local, tls, no_certs, plain = [finish(p) for p in [
        evaluate(env=dict(os.environ), out=tmp_path / "local.json"),
        evaluate("--scheduler", address, env=tls_dask_cluster.env, out=tmp_path / "tls.json"),
        evaluate("--scheduler", address, env=dict(os.environ), out=tmp_path / "no-certs.json"),
        evaluate("--scheduler", plain_address, env=dict(os.environ), out=tmp_path / "plain.json"),
    ]]
    assert local.returncode == 0, local.stderr
    assert tls.returncode == 0, tls.stderr
    assert f"dask: scheduler {address}" in tls.stderr
    assert json.loads((tmp_path / "tls.json").read_text()) == json.loads((tmp_path / "local.json").read_text())

    assert no_certs.returncode == 2
    assert f"cannot connect to {address}: no TLS configuration for clients" in no_certs.stderr

    assert plain.returncode == 2
    assert f"could not reach the Dask scheduler at {plain_address}" in plain.stderr
    assert not (tmp_path / "no-certs.json").exists() and not (tmp_path / "plain.json").exists()
