"""No secret in any task graph: storage options' secrets stay on the client, workers re-supply theirs.

Every command here runs with explicit storage options holding sentinel secrets (``key``,
``secret`` and a nested ``client_kwargs.aws_secret_access_key``) next to a public sentinel.
The local scheduler is swapped for one that pickles each graph it is given exactly as a
distributed client would (``distributed.protocol.pickle.dumps``) before running it: no
pickled graph may hold a secret, and the graphs that read or write data must hold the
public option (the filesystem does travel, without its secrets).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import dask
import pytest
from distributed.protocol.pickle import dumps
from s3_server import s3_bucket, s3_endpoint  # noqa: F401 - fixtures

import dr_scale.outofcore.compute
from dr_scale.cli import main
from dr_scale.io.storage import PortableFileSystem, is_secret, public_options, secret_options, url_to_fs

SECRETS = {"key": "KEY-SENTINEL-3f9c", "secret": "SECRET-SENTINEL-81b2",
           "client_kwargs": {"aws_secret_access_key": "NESTED-SENTINEL-77d0", "endpoint_url": "PUBLIC-ENDPOINT"}}
PUBLIC = b"PUBLIC-ENDPOINT"
OPTIONS = {**SECRETS, "auto_mkdir": True}
JOB = str(Path(__file__).parents[2] / "pipelines" / "visits.toml")


@pytest.fixture
def graphs(monkeypatch):
    """The pickled bytes of every graph the local scheduler runs during the test."""
    seen: list[bytes] = []
    threaded = dr_scale.outofcore.compute._threaded_get()

    def pickling_get(dsk, keys, **kwargs):
        seen.append(dumps(dict(dsk.__dask_graph__() if hasattr(dsk, "__dask_graph__") else dsk)))
        return threaded(dsk, keys, **kwargs)

    monkeypatch.setattr(dr_scale.outofcore.compute, "_threaded_get", lambda: pickling_get)
    return seen


def assert_no_secret(seen: list[bytes]) -> None:
    assert seen, "no graph was run"
    for blob in seen:
        for word in (b"KEY-SENTINEL", b"SECRET-SENTINEL", b"NESTED-SENTINEL"):
            assert word not in blob
    assert any(PUBLIC in blob for blob in seen), "no graph carried the filesystem"


@pytest.fixture
def options_file(tmp_path):
    path = tmp_path / "storage.json"
    path.write_text(json.dumps(OPTIONS))
    return str(path)


def test_the_rule_names_secrets_at_any_depth():
    assert all(is_secret(k) for k in ("key", "secret", "token", "aws_session_token", "account_key", "sas_token",
                                      "client_secret", "password", "connection_string", "credentials"))
    assert not any(is_secret(k) for k in ("endpoint_url", "region_name", "anon", "profile", "account_name"))
    assert public_options(OPTIONS) == {"client_kwargs": {"endpoint_url": "PUBLIC-ENDPOINT"}, "auto_mkdir": True}
    assert secret_options(OPTIONS) == {"key": SECRETS["key"], "secret": SECRETS["secret"],
                                       "client_kwargs": {"aws_secret_access_key": "NESTED-SENTINEL-77d0"}}


def test_a_worker_re_supplies_its_own_secrets(monkeypatch, tmp_path):
    fs, path = url_to_fs(str(tmp_path), OPTIONS)
    assert fs.storage_options["key"] == SECRETS["key"]  # the client keeps what it was given
    blob = pickle.dumps(fs)
    assert b"SENTINEL" not in blob
    monkeypatch.setenv("DR_SCALE_STORAGE_OPTIONS", json.dumps({"key": "worker-key", "region_name": "ignored"}))
    with dask.config.set({"dr-scale.storage-options": {"client_kwargs": {"aws_secret_access_key": "worker-nested"}}}):
        rebuilt = pickle.loads(blob)
        options = rebuilt.storage_options  # made on first use, with this process's secrets
    assert isinstance(rebuilt, PortableFileSystem)
    assert options == {"key": "worker-key", "auto_mkdir": True, "client_kwargs": {
        "endpoint_url": "PUBLIC-ENDPOINT", "aws_secret_access_key": "worker-nested"}}
    assert rebuilt.exists(path)


@pytest.mark.slow
def test_evaluate_fit_and_report_graphs_hold_no_secret(graphs, options_file, tmp_path, capsys):
    from dr_scale.synthetic.example import write_example

    write_example(str(tmp_path / "share"), seed=3)
    logs = str(tmp_path / "share" / "logs")
    assert main(["evaluate", logs, "--reward-model", str(tmp_path / "share" / "reward_model.npz"),
                 "--storage-options", options_file, "--json", str(tmp_path / "e.json"), "--no-progress"]) == 0
    assert_no_secret(graphs)
    graphs.clear()
    assert main(["fit", logs, "--out", str(tmp_path / "fitted.npz"), "--folds", "2", "--storage-options",
                 options_file, "--no-progress"]) == 0
    assert_no_secret(graphs)
    graphs.clear()
    policies = tmp_path / "policies.toml"
    policies.write_text(f'reward_model = "{tmp_path / "share" / "reward_model.npz"}"\n'
                        '[[policy]]\nname = "candidate"\nspec = "column:target_action"\n')
    assert main(["report", "--logs", logs, "--policies", str(policies), "--out", str(tmp_path / "report"),
                 "--storage-options", options_file, "--no-progress"]) == 0
    assert_no_secret(graphs)


@pytest.mark.slow
def test_generate_and_run_graphs_hold_no_secret(graphs, options_file, tmp_path, capsys):
    data = str(tmp_path / "visits")
    assert main(["generate", "visits", "--rows", "4000", "--features", "60", "--rows-per-part", "1000",
                 "--out", data, "--logged-view", str(tmp_path / "logged"), "--storage-options", options_file,
                 "--no-progress"]) == 0
    assert_no_secret(graphs)
    graphs.clear()
    assert main(["generate", "bandit", "--rows", "3000", "--features", "200", "--actions", "3", "--rows-per-part",
                 "1000", "--out", str(tmp_path / "bandit"), "--storage-options", options_file, "--no-progress"]) == 0
    assert_no_secret(graphs)
    graphs.clear()
    assert main(["run", JOB, "--set", f"data={data}", "--set", "repetitions=2",
                 "--set", "fractions=[0.05, 0.2]", "--set", f"out={tmp_path / 'out'}", "--set", "spill=memory",
                 "--set", f"storage_options={json.dumps(OPTIONS)}", "--no-progress"]) == 0
    assert_no_secret(graphs)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_local_cluster_workers_get_the_secrets_through_their_environment(s3_bucket, tmp_path, monkeypatch, capsys):  # noqa: F811
    """``evaluate --local-workers`` on a real S3-compatible server with the credentials in a storage-options
    file only: the workers read the bucket with secrets from their environment, and match local mode."""
    from dr_scale.synthetic.example import write_example

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "DR_SCALE_STORAGE_OPTIONS"):
        monkeypatch.delenv(name, raising=False)
    bucket, options = s3_bucket
    write_example(f"{bucket}/share", seed=2, storage_options=options)
    path = tmp_path / "storage.json"
    path.write_text(json.dumps(options))
    results = {}
    for mode, extra in (("local", []), ("cluster", ["--local-workers", "1"])):
        out = tmp_path / f"{mode}.json"
        assert main(["evaluate", f"{bucket}/share/logs", "--reward-model", f"{bucket}/share/reward_model.npz",
                     "--storage-options", str(path), "--json", str(out), "--no-progress", *extra]) == 0
        results[mode] = json.loads(out.read_text())
    assert results["cluster"] == results["local"]
