"""What an unattended run meets — policy mistakes, outputs in the way, killed runs, limits, models from another log —
through the real command or the API.

Each case ends in one clear line (exit 2, naming the file, policy or option) or the right
result: a policy that does not fit the log is the policy's error, not its partitions';
``--overwrite`` replaces only what dr-scale wrote; outputs are checked before the work;
spill folders do not outlive their run; limits fail fast with the reason.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from conftest import cli, error_line
from fsspec.implementations.local import LocalFileSystem

from dr_scale.cli import main
from dr_scale.io.outputs import record_outputs
from dr_scale.logs.sparse import csr_to_features
from dr_scale.logs.writing import write_log
from dr_scale.reward.models import LinearRewardModel

D, K = 6, 4
ROOT = Path(__file__).parents[2]


def columns(n: int = 60, seed: int = 0, start: int = 0, k: int = K) -> dict:
    rng = np.random.default_rng(seed)
    X = sp.random(n, D, density=0.5, format="csr", random_state=seed)
    return {"row_id": pa.array(np.arange(start, start + n, dtype=np.int64)), "features": csr_to_features(X),
            "action": pa.array(np.arange(n) % k), "reward": pa.array(rng.random(n)),
            "propensity": pa.array(np.full(n, 1 / k)), "target_action": pa.array(rng.integers(0, k, n))}


def share(root: Path, metadata: bool = True, days: int = 3) -> Path:
    """A date-partitioned log of ``days`` days, with or without the dr_scale.* schema metadata."""
    for day in range(1, days + 1):
        folder = root / "share" / f"date=2026-11-0{day}"
        if metadata:
            write_log(pa.table(columns(40, day, 100 * day)), str(folder), n_features=D, n_actions=K)
        else:
            folder.mkdir(parents=True)
            pq.write_table(pa.table(columns(40, day, 100 * day)), folder / "part-00000.parquet")
    return root / "share"


def linear_policy(path: Path, d: int = D, k: int = K, seed: int = 0) -> Path:
    coef = np.random.default_rng(seed).normal(size=(d, k))
    np.savez(path, coef=coef, intercept=np.zeros(k), metadata=np.array("{}"))
    return path


# -- (1) a policy that does not fit the log is the policy file's error -----------------------------------
@pytest.fixture
def model(tmp_path) -> Path:
    path = tmp_path / "rho.npz"
    LinearRewardModel(np.full((D, K), 0.1), np.zeros(K)).save(str(path))
    return path


@pytest.mark.parametrize("metadata", [True, False], ids=["metadata", "no-metadata"])
@pytest.mark.parametrize("with_model", [True, False], ids=["model", "no-model"])
@pytest.mark.parametrize("skip", [False, True], ids=["strict", "skip-bad"])
def test_a_policy_with_other_k_is_a_policy_error(tmp_path, capsys, model, metadata, with_model, skip):
    """k = 3 policy on a 4-action log: exit 2 naming the policies file and the policy; no partition blamed."""
    logs = share(tmp_path, metadata)
    linear_policy(tmp_path / "pol_k3.npz", k=3)
    linear_policy(tmp_path / "pol_k4.npz", k=K)
    policies = tmp_path / "p.toml"
    policies.write_text(('reward_model = "rho.npz"\n' if with_model else "")
                        + '[[policy]]\nname = "good"\nspec = "linear:pol_k4.npz"\n'
                        + '[[policy]]\nname = "bad"\nspec = "linear:pol_k3.npz"\n')
    code, _, err = cli(capsys, "report", "--logs", logs, "--policies", policies, "--out", tmp_path / "out",
                       "--no-progress", *(["--skip-bad-partitions"] if skip else []))
    line = error_line(err)
    assert code == 2, err
    assert str(policies) in line and "'bad'" in line and "pol_k3.npz" in line, line
    assert "bad partition" not in err and "skipped" not in err, err
    assert not (tmp_path / "out" / "report.json").exists()


def test_a_policy_with_fewer_features_than_the_log_uses_is_a_policy_error(tmp_path, capsys):
    logs = share(tmp_path)
    linear_policy(tmp_path / "narrow.npz", d=2)
    policies = tmp_path / "p.toml"
    policies.write_text('[[policy]]\nname = "narrow"\nspec = "linear:narrow.npz"\n')
    code, _, err = cli(capsys, "report", "--logs", logs, "--policies", policies, "--out", tmp_path / "out",
                       "--no-progress", "--skip-bad-partitions")
    assert code == 2 and "'narrow'" in error_line(err) and "feature index beyond the policy's 2 features" in err
    assert "skipped" not in err


def test_skipping_every_partition_is_a_failed_report_not_exit_0(tmp_path, capsys, model):
    """--skip-bad-partitions with no good partition left: status failed, exit 3 (no empty 'partial' report)."""
    logs = share(tmp_path, days=2)
    for part in logs.rglob("*.parquet"):
        table = pq.read_table(part)
        prop = table["propensity"].to_numpy().copy()
        prop[0] = 0.0
        pq.write_table(table.set_column(table.schema.get_field_index("propensity"), "propensity", pa.array(prop)),
                       part)
    policies = tmp_path / "p.toml"
    policies.write_text(f'reward_model = "{model}"\n[[policy]]\nspec = "constant:1"\n')
    code, _, err = cli(capsys, "report", "--logs", logs, "--policies", policies, "--out", tmp_path / "out",
                       "--no-progress", "--skip-bad-partitions")
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert code == 3 and report["status"] == "failed" and len(report["bad_partitions"]) == 2, err


@pytest.mark.slow
def test_one_bad_partition_is_still_skipped(tmp_path, capsys, model):
    """The policy check does not swallow real bad data: one bad day, skipped, the rest reported (exit 0)."""
    logs = share(tmp_path)
    part = next((logs / "date=2026-11-02").glob("*.parquet"))
    table = pq.read_table(part)
    prop = table["propensity"].to_numpy().copy()
    prop[3] = 2.0
    pq.write_table(table.set_column(table.schema.get_field_index("propensity"), "propensity", pa.array(prop)), part)
    linear_policy(tmp_path / "pol.npz")
    policies = tmp_path / "p.toml"
    policies.write_text(f'reward_model = "{model}"\n[[policy]]\nname = "lin"\nspec = "linear:pol.npz"\n')
    code, _, err = cli(capsys, "report", "--logs", logs, "--policies", policies, "--out", tmp_path / "out",
                       "--no-progress", "--skip-bad-partitions")
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert code == 0 and report["status"] == "partial" and len(report["skipped_partitions"]) == 1, err
    assert report["policies"][0]["name"] == "lin"


# -- (2) --overwrite replaces only what dr-scale wrote ------------------------------------------------------
GENERATE = {"bandit": ["generate", "bandit", "--rows", "200", "--features", "96", "--actions", "3"],
            "visits": ["generate", "visits", "--rows", "200", "--features", "10", "--no-calibration"]}


@pytest.mark.parametrize("kind", sorted(GENERATE))
def test_overwrite_replaces_a_generated_folder(tmp_path, capsys, kind):
    out = tmp_path / "log"
    assert cli(capsys, *GENERATE[kind], "--out", out, "--no-progress")[0] == 0
    assert (out / "_dr_scale").exists() and (out / "_manifest.json").exists()
    (out / "part-00007.parquet").write_bytes(b"stale")  # a file of the old set that the new one does not have
    record_outputs(LocalFileSystem(), str(out), ["part-00007.parquet"])  # ... which dr-scale wrote
    code, _, err = cli(capsys, *GENERATE[kind], "--out", out, "--no-progress")
    assert code == 2 and "exists and is not empty" in error_line(err) and "--overwrite" in error_line(err)
    assert cli(capsys, *GENERATE[kind], "--out", out, "--no-progress", "--overwrite")[0] == 0
    assert not (out / "part-00007.parquet").exists()


@pytest.mark.parametrize("kind", sorted(GENERATE))
@pytest.mark.parametrize("target", ["notes-folder", "policy-file", "folder-of-policies"])
def test_overwrite_refuses_what_dr_scale_did_not_write(tmp_path, capsys, kind, target):
    """A folder of notes, a policy .npz where a folder should be: refused with a line naming it, left intact."""
    if target == "policy-file":
        out = linear_policy(tmp_path / "pol.npz")
    else:
        out = tmp_path / "mine"
        out.mkdir()
        (out / "notes.txt").write_text("keep me")
        if target == "folder-of-policies":
            linear_policy(out / "pol.npz")
    before = {p: p.read_bytes() for p in [out, *out.rglob("*")] if p.is_file()}
    code, _, err = cli(capsys, *GENERATE[kind], "--out", out, "--no-progress", "--overwrite")
    assert code == 2 and str(out) in error_line(err), err
    assert "dr-scale did not write" in err or "is a file, not a folder" in err
    assert {p: p.read_bytes() for p in before} == before


def test_overwrite_replaces_a_report_folder(tmp_path, capsys):
    out = tmp_path / "o"
    out.mkdir()
    (out / "report.json").write_text(json.dumps({"schema": "dr-scale/report", "status": "ok"}))
    record_outputs(LocalFileSystem(), str(out), ["report.json"])  # as the report records what it writes
    assert cli(capsys, *GENERATE["bandit"], "--out", out, "--no-progress", "--overwrite")[0] == 0
    assert not (out / "report.json").exists() and (out / "_manifest.json").exists()


# -- (8) an interrupted generate leaves no log that readers take for complete --------------------------------
def test_a_generated_folder_without_its_manifest_is_refused_by_readers(tmp_path, capsys):
    out = tmp_path / "log"
    assert cli(capsys, *GENERATE["bandit"], "--out", out, "--no-progress")[0] == 0
    (out / "_manifest.json").unlink()  # as a generate killed before its last write leaves it
    for argv in (["evaluate", out, "--policy", "constant:1"], ["fit", out, "--out", tmp_path / "m.npz"]):
        code, _, err = cli(capsys, *argv, "--no-progress")
        assert code == 2 and "incomplete" in error_line(err) and "--overwrite" in error_line(err), err
    assert cli(capsys, *GENERATE["bandit"], "--out", out, "--no-progress", "--overwrite")[0] == 0


def _subprocess_env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


@pytest.mark.slow
def test_sigterm_during_generate_leaves_a_log_evaluate_refuses(tmp_path):
    out = tmp_path / "log"
    proc = subprocess.Popen([sys.executable, "-m", "dr_scale.cli", "generate", "bandit", "--rows", "400000",
                             "--features", "4096", "--actions", "5", "--rows-per-part", "2000", "--out", str(out),
                             "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_subprocess_env())
    deadline = time.monotonic() + 120
    while not list(out.glob("part-*.parquet")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and b"left incomplete" in err and b"--overwrite" in err, err.decode()
    assert (out / "_dr_scale").exists() and not (out / "_manifest.json").exists()
    done = subprocess.run([sys.executable, "-m", "dr_scale.cli", "evaluate", str(out), "--policy", "constant:1",
                           "--no-progress"], capture_output=True, env=_subprocess_env(), timeout=120)
    assert done.returncode == 2 and b"incomplete" in done.stderr, done.stderr


# -- (3) outputs checked before the work ---------------------------------------------------------------------
def _no_work(*args, **kwargs):
    raise AssertionError("the work started before the output was checked")


@pytest.fixture
def small_log(tmp_path) -> Path:
    logs = tmp_path / "logs"
    write_log(pa.table(columns(60)), str(logs), n_parts=2, n_features=D, n_actions=K)
    return logs


@pytest.mark.parametrize("command", ["fit", "learn", "evaluate", "report", "generate"])
@pytest.mark.parametrize("problem", ["is-folder", "long-name", "long-folder", "under-a-file"])
def test_outputs_are_checked_before_the_work(tmp_path, capsys, monkeypatch, small_log, command, problem):
    import dr_scale.commands.evaluate as evaluate_command
    import dr_scale.commands.learn as learn_command
    import dr_scale.report.make as report_make
    import dr_scale.reward.fitting as fitting
    import dr_scale.synthetic.bandit as bandit

    monkeypatch.setattr(fitting, "fit_reward_model", _no_work)
    monkeypatch.setattr(learn_command, "learn_policy", _no_work)
    monkeypatch.setattr(evaluate_command, "evaluate_log", _no_work)
    monkeypatch.setattr(report_make, "compute_report", _no_work)
    monkeypatch.setattr(bandit, "_write_part", _no_work)
    (tmp_path / "a-file").write_text("x")
    folder_wanted = command in ("report", "generate")
    if problem == "is-folder":
        if folder_wanted:
            pytest.skip("a folder is what these write")
        out = tmp_path
    elif problem == "long-name":
        out = tmp_path / ("n" * 240 + ("" if folder_wanted else ".npz"))
        if folder_wanted:
            out = tmp_path / ("n" * 256)
    elif problem == "long-folder":
        out = tmp_path / ("f" * 256) / "out.npz"
    else:
        out = tmp_path / "a-file" / "out.npz"
    policies = tmp_path / "p.toml"
    policies.write_text('[[policy]]\nspec = "constant:1"\n')
    argv = {"fit": ["fit", small_log, "--out", out], "learn": ["learn", small_log, "--out", out],
            "evaluate": ["evaluate", small_log, "--policy", "constant:1", "--json", out],
            "report": ["report", "--logs", small_log, "--policies", policies, "--out", out],
            "generate": [*GENERATE["bandit"], "--out", out]}[command]
    code, _, err = cli(capsys, *argv, "--no-progress")
    assert code == 2, err
    line = error_line(err)
    assert "the work started" not in line and str(out)[:60] in line, line
    assert any(words in line for words in ("is a folder", "bytes", "is a file", "a part of this path is a file"))


# -- (4) spill folders do not outlive their run ----------------------------------------------------------------
def _spill_entries(cache: Path) -> list[str]:
    spill = cache / "spill"
    return sorted(p.name for p in spill.iterdir() if p.name.startswith("dr-scale-spill-")) if spill.exists() else []


def test_a_failed_run_removes_its_spill_folder(tmp_path, capsys, monkeypatch):
    """An error part-way through (a bad propensity in the second part): the run's spill folder and lock go."""
    monkeypatch.setenv("DR_SCALE_CACHE", str(tmp_path / "cache"))
    logs = tmp_path / "logs"
    for i in range(2):
        cols = columns(40, i, 100 * i)
        if i == 1:
            cols["propensity"] = pa.array(np.where(np.arange(40) == 3, 0.0, 1 / K))
        folder = logs / f"part-{i:05d}.parquet"
        folder.parent.mkdir(exist_ok=True)
        pq.write_table(pa.table(cols), folder)
    for command in ("fit", "learn"):
        code, _, err = cli(capsys, command, logs, "--out", tmp_path / f"{command}.npz", "--no-progress",
                           "--n-features", D, "--n-actions", K)
        assert code == 2 and "propensity" in error_line(err)
        assert _spill_entries(tmp_path / "cache") == []


def test_a_dead_runs_spill_folder_is_purged_and_a_live_ones_kept(tmp_path):
    """The purge takes only folders whose lock is free and whose owner is gone."""
    from dr_scale.io.cache import purge_stale_spill, spill_workspace

    root = tmp_path / "spill"
    dead = root / "dr-scale-spill-dead"
    dead.mkdir(parents=True)
    (dead / "part.npy").write_bytes(b"x" * 100)
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    import socket

    (root / "dr-scale-spill-dead.lock").write_text(json.dumps({"host": socket.gethostname(),
                                                               "pid": int(child.stdout)}))
    unlocked_alive = root / "dr-scale-spill-alive"
    unlocked_alive.mkdir()
    (root / "dr-scale-spill-alive.lock").write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))
    no_lock = root / "dr-scale-spill-nolock"
    no_lock.mkdir()
    with spill_workspace(str(root)) as mine:
        assert not dead.exists() and unlocked_alive.exists() and no_lock.exists()
        assert purge_stale_spill(str(root)) == [] and Path(mine).is_dir()  # its own, locked: kept
    assert not Path(mine).exists() and not Path(mine + ".lock").exists()


def _sigint_by_default():
    """The child takes Ctrl-C as a foreground job does, even when the tests run as a background job (started with
    SIGINT ignored, which the child would inherit and keep)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _cached_env(cache: Path) -> dict:
    return {**_subprocess_env(), "DR_SCALE_CACHE": str(cache)}


@pytest.fixture(scope="module")
def long_log(tmp_path_factory) -> Path:
    """A log whose fit runs some seconds: 200,000 rows in 40 parts."""
    out = tmp_path_factory.mktemp("long") / "log"
    assert main(["generate", "bandit", "--rows", "200000", "--features", "4096", "--actions", "5",
                 "--rows-per-part", "5000", "--out", str(out), "--no-progress"]) == 0
    return out


def _start_fit_and_wait_for_spill(log: Path, tmp_path: Path, cache: Path, *extra) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "dr_scale.cli", "fit", str(log), "--out", str(tmp_path / "m.npz"),
                             "--folds", "5", "--no-progress", *extra], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=_cached_env(cache), preexec_fn=_sigint_by_default)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        folders = [cache / "spill" / n for n in _spill_entries(cache) if not n.endswith(".lock")]
        if any(any(f.iterdir()) for f in folders if f.is_dir()):
            return proc
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"the fit left no spill files to interrupt (exit {proc.poll()}): {proc.stderr.read().decode()}")


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT"])
def test_an_interrupted_fit_removes_its_spill_folder(tmp_path, long_log, how):
    cache = tmp_path / "cache"
    proc = _start_fit_and_wait_for_spill(long_log, tmp_path, cache)
    proc.send_signal(getattr(signal, how))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and b"Traceback" not in err, err.decode()
    assert _spill_entries(cache) == []


@pytest.mark.slow
def test_a_killed_fits_spill_folder_is_removed_by_the_next_run(tmp_path, long_log, small_log):
    cache = tmp_path / "cache"
    proc = _start_fit_and_wait_for_spill(long_log, tmp_path, cache)
    proc.kill()  # SIGKILL: nothing of the run's own runs
    proc.communicate(timeout=60)
    left = _spill_entries(cache)
    assert left and any(n.endswith(".lock") for n in left)  # the folder and its lock stay behind
    done = subprocess.run([sys.executable, "-m", "dr_scale.cli", "fit", str(small_log), "--out",
                           str(tmp_path / "small.npz"), "--no-progress"], capture_output=True, env=_cached_env(cache),
                          timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    assert _spill_entries(cache) == []


# -- (5) limits that fail fast with the reason ------------------------------------------------------------------
def _stray_log(tmp_path: Path) -> Path:
    """A log without metadata whose features hold one stray id of 10^7."""
    cols = columns(60)
    feats = cols["features"].to_pylist()
    feats[5] = feats[5] + [10_000_000]
    cols["features"] = pa.array(feats, pa.list_(pa.int32()))
    (tmp_path / "stray").mkdir()
    pq.write_table(pa.table(cols), tmp_path / "stray" / "part-00000.parquet")
    return tmp_path / "stray"


@pytest.mark.parametrize("case", ["folds>rows-fit", "folds>rows-evaluate", "folds>rows-learn", "workers",
                                  "stray-id-fit", "stray-id-evaluate"])
def test_limits_fail_fast_with_the_reason(tmp_path, capsys, monkeypatch, small_log, case):
    import dr_scale.commands.learn as learn_command
    import dr_scale.reward.fitting as fitting

    monkeypatch.setattr(fitting, "fit_reward_model", _no_work)
    monkeypatch.setattr(learn_command, "learn_policy", _no_work)
    stray = _stray_log(tmp_path)
    argv, expected = {
        "folds>rows-fit": (["fit", small_log, "--out", tmp_path / "m.npz", "--folds", "61"],
                           "--folds = 61: at most 20 cross-fitting folds"),
        "folds>rows-evaluate": (["evaluate", small_log, "--fit-reward-model", "--folds", "500"],
                                "--folds = 500: at most 20 cross-fitting folds"),
        "folds>rows-learn": (["learn", small_log, "--out", tmp_path / "p.npz", "--folds", "61"],
                             "--folds = 61: at most 20 cross-fitting folds"),
        "workers": (["fit", small_log, "--out", tmp_path / "m.npz", "--local-workers", "1000"],
                    "--local-workers = 1000 is more than 4 × this machine's"),
        "stray-id-fit": (["fit", stray, "--out", tmp_path / "m.npz"], "largest feature id is 10,000,000"),
        "stray-id-evaluate": (["evaluate", stray, "--fit-reward-model", "--policy", "constant:1"],
                              "largest feature id is 10,000,000"),
    }[case]
    code, _, err = cli(capsys, *argv, "--no-progress")
    assert code == 2 and expected in error_line(err), err
    assert "the work started" not in err


@pytest.mark.slow  # a ridge over 10^7 features: (K, 10^7) arrays in every conjugate-gradient step, ~9 s of CPU
def test_a_stray_id_is_accepted_when_n_features_says_so(tmp_path, capsys):
    code, out, err = cli(capsys, "fit", _stray_log(tmp_path), "--out", tmp_path / "m.npz", "--n-features",
                         "10000001", "--n-actions", K, "--no-progress")
    assert code == 0 and "10000001 features" in out, err


@pytest.mark.slow
def test_folds_up_to_a_tenth_of_the_rows_are_accepted(tmp_path, capsys, small_log):
    assert cli(capsys, "fit", small_log, "--out", tmp_path / "m.npz", "--folds", "6", "--no-progress")[0] == 0


# -- (6) fitting options beside a fitted model are an error, not ignored ------------------------------------------
@pytest.mark.parametrize("extra", [["--folds", "3"], ["--lam", "2"], ["--rtol", "1e-6"], ["--seed", "4"]],
                         ids=lambda e: e[0])
def test_fitting_options_beside_a_reward_model_are_refused(tmp_path, capsys, small_log, model, extra):
    code, _, err = cli(capsys, "evaluate", small_log, "--reward-model", model, *extra, "--no-progress")
    assert code == 2 and extra[0] in error_line(err) and "--fit-reward-model" in error_line(err), err


def test_learn_folds_beside_a_reward_model_is_refused(tmp_path, capsys, small_log, model):
    code, _, err = cli(capsys, "learn", small_log, "--reward-model", model, "--folds", "3", "--out",
                       tmp_path / "p.npz", "--no-progress")
    assert code == 2 and "--folds" in error_line(err) and "--reward-model" in error_line(err), err


# -- (6) a cross-fitted model from another log is refused -------------------------------------------------------
def _shifted(tmp_path: Path, logs: Path, shift: int) -> Path:
    """The same rows with their row ids shifted: another log to the model's fingerprint."""
    out = tmp_path / f"shifted{shift}"
    table = pq.read_table(logs)
    table = table.set_column(0, "row_id", pa.array(table["row_id"].to_numpy() + shift))
    write_log(table, str(out), n_parts=2, n_features=D, n_actions=K)
    return out


@pytest.mark.slow
def test_a_cross_fitted_model_from_another_log_is_refused(tmp_path, capsys, small_log):
    model = tmp_path / "cf.npz"
    assert cli(capsys, "fit", small_log, "--folds", "3", "--out", model, "--no-progress")[0] == 0
    code, _, err = cli(capsys, "evaluate", small_log, "--reward-model", model, "--policy", "constant:1",
                       "--no-progress")
    assert code == 0, err  # its own log: the fingerprints agree
    other = _shifted(tmp_path, small_log, 7)
    code, _, err = cli(capsys, "evaluate", other, "--reward-model", model, "--policy", "constant:1", "--no-progress")
    line = error_line(err)
    assert code == 2 and "cross-fitted on another log" in line and "--allow-other-log" in line, err
    code, out, err = cli(capsys, "evaluate", other, "--reward-model", model, "--policy", "constant:1",
                         "--allow-other-log", "--no-progress")
    assert code == 0 and "DR" in out, err


@pytest.mark.slow
def test_a_model_fitted_on_the_train_half_is_used_on_the_test_half(tmp_path, capsys, small_log):
    """No model saw the other half of its keyed split: no fingerprint refusal there, and one elsewhere."""
    model = tmp_path / "train.npz"
    assert cli(capsys, "fit", small_log, "--folds", "2", "--split", "train", "--out", model, "--no-progress")[0] == 0
    args = ["evaluate", small_log, "--reward-model", model, "--policy", "constant:1", "--no-progress"]
    code, out, err = cli(capsys, *args, "--split", "test")
    assert code == 0 and "DR" in out, err
    code, _, err = cli(capsys, *args, "--split", "test", "--test-fraction", "0.3")  # another split
    assert code == 2 and "cross-fitted on another log" in error_line(err), err
    code, _, err = cli(capsys, *args)  # the whole log: the train rows among them
    assert code == 2 and "cross-fitted on another log" in error_line(err), err


def test_the_api_refuses_a_cross_fitted_model_from_another_log(tmp_path, small_log):
    from dr_scale.core.errors import ParameterError
    from dr_scale.ope.evaluation import Evaluation, evaluate_log
    from dr_scale.reward.fitting import FitSettings, fit_reward_model

    model = fit_reward_model(str(small_log), FitSettings(folds=2))
    other = _shifted(tmp_path, small_log, 3)
    with pytest.raises(ParameterError, match="allow_other_log to use it anyway"):
        evaluate_log(str(other), Evaluation("constant:1", ["DR"], reward_model=model))
    assert np.isfinite(evaluate_log(str(other), Evaluation("constant:1", ["DR"], reward_model=model,
                                                           allow_other_log=True)).estimates["DR"].value)


# -- (7) probability on actions the log never took ------------------------------------------------------------------
@pytest.fixture
def log_without_action_3(tmp_path) -> Path:
    cols = columns(80)
    cols["action"] = pa.array(np.arange(80) % 3)  # actions 0, 1, 2 only; k = 4
    out = tmp_path / "no3"
    write_log(pa.table(cols), str(out), n_parts=2, n_features=D, n_actions=K)
    return out


def _probs_log(tmp_path: Path, share3: float) -> Path:
    """A log without action 3 and a target_probs column putting ``share3`` of each row's mass on action 3."""
    cols = columns(80)
    cols["action"] = pa.array(np.arange(80) % 3)
    rest = (1 - share3) / 3
    cols["target_probs"] = pa.array([[rest, rest, rest, share3]] * 80, pa.list_(pa.float64()))
    out = tmp_path / f"probs{share3}"
    write_log(pa.table(cols), str(out), n_parts=2, n_features=D, n_actions=K)
    return out


@pytest.mark.parametrize("share3", [0.25, 1e-3])
def test_mass_on_never_logged_actions_is_warned_with_its_share(tmp_path, capsys, model, share3):
    logs = _probs_log(tmp_path, share3)
    code, _, err = cli(capsys, "evaluate", logs, "--policy", "probs:target_probs", "--reward-model", model,
                       "--json", tmp_path / "r.json", "--no-progress")
    assert code == 0, err
    assert f"puts {share3:.1%} of its probability mass on actions the log never took (3)" in err
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["diagnostics"]["unlogged_actions"] == [3]
    assert doc["diagnostics"]["unlogged_action_share"] == pytest.approx(share3, rel=1e-12)
    assert any("never took" in w for w in doc["warnings"])


def test_a_policy_on_logged_actions_only_has_no_such_warning(tmp_path, capsys, model, small_log):
    code, _, err = cli(capsys, "evaluate", small_log, "--policy", "constant:1", "--reward-model", model,
                       "--no-progress")
    assert code == 0 and "never took" not in err and "0 matched rows" not in err


def test_a_constant_policy_on_a_never_logged_action_says_it_rests_on_no_rows(tmp_path, capsys, model,
                                                                             log_without_action_3):
    code, _, err = cli(capsys, "evaluate", log_without_action_3, "--policy", "constant:3", "--reward-model", model,
                       "--no-progress")
    assert code == 0
    assert "100.0% of its probability mass on actions the log never took (3)" in err and "0 matched rows" in err


@pytest.mark.slow
def test_report_status_is_not_ok_for_never_logged_actions(tmp_path, capsys, model, log_without_action_3):
    share_root = tmp_path / "share"
    (share_root).mkdir()
    log_without_action_3.rename(share_root / "date=2026-11-01")
    policies = tmp_path / "p.toml"
    policies.write_text(f'reward_model = "{model}"\n[[policy]]\nname = "three"\nspec = "constant:3"\n'
                        '[[policy]]\nname = "one"\nspec = "constant:1"\n')
    code, _, err = cli(capsys, "report", "--logs", share_root, "--policies", policies, "--out", tmp_path / "out",
                       "--no-progress")
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert code == 0 and report["status"] == "warning", err
    three, one = report["policies"]
    assert three["diagnostics"]["unlogged_action_share"] == 1.0 and any("never took" in w for w in three["warnings"])
    assert one["diagnostics"]["unlogged_action_share"] == 0.0 and not any("never took" in w for w in one["warnings"])


# -- (9) API and option cases of the issue -------------------------------------------------------------------------
def _model_and_rows():
    from dr_scale.reward.models import LinearRewardModel

    rng = np.random.default_rng(0)
    model = LinearRewardModel(rng.normal(size=(D, K)), np.zeros(K), rng.normal(size=(2, D, K)), np.zeros((2, K)), 0)
    X = sp.random(8, D, density=0.5, format="csr", random_state=1)
    return model, X, np.arange(8, dtype=np.int64)


@pytest.mark.parametrize("call, message", [
    (lambda m, X, rid: m.predict(X[:5], row_id=rid[:2]), "row_id has 2 id(s) for the 5 rows of X"),
    (lambda m, X, rid: m.predict(X, actions=[-1]), "actions must be in [0, 4)"),
    (lambda m, X, rid: m.predict(X, actions=[K]), "actions must be in [0, 4)"),
    (lambda m, X, rid: m.predict(X, actions=[0.5]), "integer actions"),
    (lambda m, X, rid: m.predict(sp.random(3, D + 2, density=0.5, format="csr"), row_id=rid[:3]), "columns"),
], ids=["row_id-length", "negative-action", "action-k", "float-action", "wide-X"])
def test_predict_refuses_arguments_that_would_give_a_wrong_number(call, message):
    from dr_scale.core.errors import ParameterError

    model, X, rid = _model_and_rows()
    with pytest.raises(ParameterError, match=re.escape(message)):
        call(model, X, rid)


def test_predict_with_valid_arguments_is_unchanged():
    model, X, rid = _model_and_rows()
    full = model.predict(X, row_id=rid)
    assert np.array_equal(model.predict(X, actions=np.array([2, 0]), row_id=rid), full[:, [2, 0]])
    assert model.predict(X, actions=np.array([], dtype=np.int64)).shape == (8, 0)


@pytest.mark.parametrize("action, reward, message", [
    (np.arange(5) % 3, np.ones(8), "action has 5 value(s) for the 8 rows of X"),
    (np.arange(8) % 3, np.ones(3), "reward has 3 value(s) for the 8 rows of X"),
    (np.arange(8) % 3 + 0.5, np.ones(8), "action must be integers"),
    (np.arange(8) % 3 - 1, np.ones(8), "action must be ≥ 0"),
    (np.arange(8) % 3, np.full(8, np.nan), "reward has a NaN"),
], ids=["action-length", "reward-length", "float-actions", "negative-actions", "nan-reward"])
def test_sklearn_reward_model_fit_checks_its_arrays(action, reward, message):
    from sklearn.linear_model import Ridge

    from dr_scale.core.errors import ParameterError
    from dr_scale.reward.sklearn_models import SklearnRewardModel, cross_fit

    X = sp.random(8, D, density=0.5, format="csr", random_state=1)
    with pytest.raises(ParameterError, match=re.escape(message)):
        SklearnRewardModel.fit(Ridge(), X, action, reward)
    with pytest.raises(ParameterError, match=re.escape(message)):
        cross_fit(Ridge(), X, action, reward, np.arange(8), folds=2)


def test_cross_fit_refuses_fractional_folds():
    from sklearn.linear_model import Ridge

    from dr_scale.core.errors import ParameterError
    from dr_scale.reward.sklearn_models import cross_fit

    X = sp.random(8, D, density=0.5, format="csr", random_state=1)
    with pytest.raises(ParameterError, match="folds"):
        cross_fit(Ridge(), X, np.arange(8) % 2, np.ones(8), np.arange(8), folds=2.7)


@pytest.mark.parametrize("extra, message", [
    (["--lam", "inf"], "λ must be a finite number"),
    (["--lam", "1e-320"], "below float64's smallest normal number"),
    (["--rtol", "1e-300"], "rtol must be in [2.22e-16, 1)"),
    (["--seed", "1180591620717411303424"], "--seed: should be less than 18446744073709551616"),
], ids=lambda v: v[0] if isinstance(v, list) else None)
def test_fit_options_beyond_float64_are_refused_with_the_reason(tmp_path, capsys, small_log, extra, message):
    code, _, err = cli(capsys, "fit", small_log, "--out", tmp_path / "m.npz", *extra, "--no-progress")
    assert code == 2 and message in error_line(err) and "unexpected" not in err, err
    assert not (tmp_path / "m.npz").exists()


@pytest.mark.parametrize("spec, message", [
    ("softmax:{huge}:1", "its scores x·coef + intercept overflow float64"),
    ("linear:{huge}", "its scores x·coef + intercept overflow float64"),
    ("softmax:{pol}:0", "the temperature T must be a positive finite number"),
    ("softmax:{pol}:-1", "the temperature T must be a positive finite number"),
    ("softmax:{pol}:nan", "the temperature T must be a positive finite number"),
    ("softmax:{pol}:inf", "the temperature T must be a positive finite number"),
], ids=["softmax-huge", "linear-huge", "T=0", "T=-1", "T=nan", "T=inf"])
def test_policy_scores_and_temperatures_are_checked_naming_the_policy(tmp_path, capsys, small_log, spec, message):
    np.savez(tmp_path / "huge.npz", coef=np.full((D, K), 1e308), intercept=np.zeros(K), metadata=np.array("{}"))
    linear_policy(tmp_path / "pol.npz")
    spec = spec.format(huge=tmp_path / "huge.npz", pol=tmp_path / "pol.npz")
    code, _, err = cli(capsys, "evaluate", small_log, "--policy", spec, "--no-progress")
    line = error_line(err)
    assert code == 2 and message in line and ("huge.npz" in line or "pol.npz" in line), err


@pytest.mark.parametrize("temperature", ["1e-320", "1e-300"])
def test_a_tiny_temperature_is_the_argmax_not_nan(tmp_path, capsys, small_log, temperature):
    linear_policy(tmp_path / "pol.npz")
    code, soft, err = cli(capsys, "evaluate", small_log, "--policy", f"softmax:{tmp_path / 'pol.npz'}:{temperature}",
                          "--estimators", "IPS", "--no-progress")
    assert code == 0, err
    code, hard, _ = cli(capsys, "evaluate", small_log, "--policy", f"linear:{tmp_path / 'pol.npz'}", "--estimators",
                        "IPS", "--no-progress")
    value = [line.split()[1] for line in soft.splitlines() if line.startswith("IPS")]
    assert value == [line.split()[1] for line in hard.splitlines() if line.startswith("IPS")]


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.3, 6.0])
def test_an_interrupted_local_cluster_run_prints_one_line(tmp_path, long_log, delay):
    """SIGINT while the command starts, or while its 2 local workers compute: exit 130, no traceback, no
    "Task exception was never retrieved"."""
    proc = subprocess.Popen([sys.executable, "-m", "dr_scale.cli", "fit", str(long_log), "--out",
                             str(tmp_path / "m.npz"), "--folds", "5", "--lam", "1", "--rtol", "1e-10",  # some seconds
                             "--local-workers", "2", "--no-progress"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_cached_env(tmp_path / "cache"),
                            preexec_fn=_sigint_by_default)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=180)
    text = err.decode()
    assert proc.returncode == 130, text
    assert "Traceback" not in text and "never retrieved" not in text, text
    assert len([line for line in text.splitlines() if "interrupted" in line]) == 1, text


def test_the_logged_view_folder_follows_the_same_overwrite_rule(tmp_path, capsys):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "keep.txt").write_text("x")
    argv = ["generate", "visits", "--rows", "200", "--features", "10", "--no-calibration", "--no-progress"]
    code, _, err = cli(capsys, *argv, "--out", tmp_path / "set", "--logged-view", notes, "--overwrite")
    assert code == 2 and "dr-scale did not write this folder" in error_line(err) and (notes / "keep.txt").exists()
    assert not (tmp_path / "set").exists()  # refused before the work
    view = tmp_path / "view"
    assert cli(capsys, *argv, "--out", tmp_path / "set", "--logged-view", view)[0] == 0
    assert (view / "_manifest.json").exists()
    assert cli(capsys, "evaluate", view, "--policy", "constant:1", "--no-progress")[0] == 0
    assert cli(capsys, *argv, "--out", tmp_path / "set", "--logged-view", view, "--overwrite")[0] == 0


# -- (10) rewards beyond the fit's range, features never seen, actions never logged ---------------------------------
def _scaled_log(tmp_path: Path, scale: float, name: str) -> Path:
    cols = columns(60)
    cols["reward"] = pa.array(cols["reward"].to_numpy() * scale)
    write_log(pa.table(cols), str(tmp_path / name), n_parts=2, n_features=D, n_actions=K)
    return tmp_path / name


@pytest.mark.parametrize("argv", [["fit", "--out", "OUT/m.npz"], ["learn", "--out", "OUT/p.npz"],
                                  ["learn", "--method", "ips", "--out", "OUT/p.npz"],
                                  ["evaluate", "--fit-reward-model"]], ids=lambda a: " ".join(a[:3]))
@pytest.mark.parametrize("scale", [1e300, 1e150, 1e101])
def test_rewards_beyond_the_fit_range_are_refused(tmp_path, capsys, argv, scale):
    """×1e300 made 0 CG passes and an intercept-only model; |r| > 1e100 is the log's error, naming file/column/row."""
    logs = _scaled_log(tmp_path, scale, "huge")
    argv = [a.replace("OUT", str(tmp_path)) for a in argv]
    code, _, err = cli(capsys, argv[0], logs, *argv[1:], "--no-progress")
    line = error_line(err)
    assert code == 2 and re.search(r"huge/part-0000[01]\.parquet: column 'reward': \|reward\| above 1e\+100, the "
                                   r"largest that fit and learn take .*\(e\.g\. row_id=\d+\)$", line), err
    assert "warning" not in err and not list(tmp_path.glob("*.npz"))


@pytest.mark.slow
def test_a_fit_on_scaled_rewards_is_the_scaled_fit(tmp_path):
    """Ridge is equivariant in the rewards: ×2³³⁰ (exact in float64, within the range) gives exactly 2³³⁰ × the fit
    on the rewards as they are — the fold models, λ and the CG passes alike."""
    from dr_scale.reward.fitting import FitSettings, fit_reward_model

    plain, scaled = _scaled_log(tmp_path, 1.0, "plain"), _scaled_log(tmp_path, 2.0 ** 330, "scaled")
    a, b = (fit_reward_model(str(logs), FitSettings(folds=3)) for logs in (plain, scaled))
    assert np.array_equal(b.coef, a.coef * 2.0 ** 330) and np.array_equal(b.intercept, a.intercept * 2.0 ** 330)
    assert np.array_equal(b.fold_coef, a.fold_coef * 2.0 ** 330)
    assert b.metadata["lam"] == a.metadata["lam"] and b.metadata["passes"] == a.metadata["passes"] > 0


def _log_without_features(tmp_path: Path, unseen=(2, 5)) -> Path:
    cols = columns(120)
    X = sp.random(120, D, density=0.5, format="csr", random_state=3).tolil()
    for j in unseen:
        X[:, j] = 0
    cols["features"] = csr_to_features(X.tocsr())
    write_log(pa.table(cols), str(tmp_path / "unseen"), n_parts=2, n_features=D, n_actions=K)
    return tmp_path / "unseen"


@pytest.mark.slow
@pytest.mark.parametrize("method", ["dr", "ips"])
@pytest.mark.parametrize("learner", ["dlm", "ridge"])
def test_features_never_seen_get_weight_zero(tmp_path, capsys, method, learner):
    """DLM kept its random start's weights on features the log never shows; now 0 (ridge: its centre, also 0)."""
    from dr_scale.policies import LinearPolicy

    logs = _log_without_features(tmp_path)
    code, _, err = cli(capsys, "learn", logs, "--method", method, "--learner", learner, "--out", tmp_path / "p.npz",
                       "--no-progress")
    policy = LinearPolicy.load(str(tmp_path / "p.npz"))
    assert code == 0 and not policy.coef[[2, 5]].any(), err
    assert policy.coef[[0, 1, 3, 4]].any()


def test_the_in_memory_dlm_gives_unseen_features_weight_zero():
    from dr_scale.learning.dlm import DirectLossMinimization

    X = sp.random(200, D, density=0.5, format="csr", random_state=4).tolil()
    X[:, 3] = 0
    X = X.tocsr()
    rewards = np.random.default_rng(0).random((200, K))
    policy = DirectLossMinimization(n_restarts=3, max_iter=20, random_state=0).fit(X, rewards).linear_policy()
    assert not policy.coef[3].any() and policy.coef[[0, 1, 2]].any()


def _log_where_action_3_would_win(tmp_path: Path) -> Path:
    """Actions 0–2 logged, k = 4; the reward is high only where feature 0 is on, so on the other rows the pooled
    mean reward (ρ̂ for the never-logged action 3) beats every logged action's prediction."""
    n = 600
    X = sp.random(n, D, density=0.4, format="csr", random_state=5)
    rng = np.random.default_rng(5)
    action = np.arange(n) % 3
    reward = 0.8 * (X[:, 0].toarray().ravel() > 0) + 0.05 * action + 0.1 * rng.random(n)
    cols = {"row_id": pa.array(np.arange(n, dtype=np.int64)), "features": csr_to_features(X),
            "action": pa.array(action), "reward": pa.array(reward), "propensity": pa.array(np.full(n, 1 / 3))}
    write_log(pa.table(cols), str(tmp_path / "no3"), n_parts=2, n_features=D, n_actions=K)
    return tmp_path / "no3"


@pytest.mark.slow
@pytest.mark.parametrize("learner", ["ridge", "dlm"])
def test_learn_excludes_never_logged_actions_unless_asked(tmp_path, capsys, learner):
    from dr_scale.policies import LinearPolicy

    logs = _log_where_action_3_would_win(tmp_path)
    args = ["learn", logs, "--learner", learner, "--no-progress"]
    code, _, err = cli(capsys, *args, "--out", tmp_path / "p.npz")
    assert code == 0, err
    line = next(w for w in err.splitlines() if "excluded from the policy" in w)
    rows = int(re.search(r"would have chosen them on (\d+) of 600 rows", line).group(1))
    assert line.startswith(f"dr-scale learn: warning: {logs}: action(s) 3 never logged") and rows > 0, line
    assert "--allow-unlogged-actions" in line
    policy = LinearPolicy.load(str(tmp_path / "p.npz"))
    assert policy.excluded_actions == (3,) and policy.metadata["unlogged_action_rows"] == rows
    evaluate = ["evaluate", logs, "--estimators", "IPS", "--allow-training-overlap", "--no-progress", "--json"]
    code, _, err = cli(capsys, *evaluate, tmp_path / "r.json", "--policy", f"linear:{tmp_path / 'p.npz'}")
    assert code == 0 and "never took" not in err, err
    assert json.loads((tmp_path / "r.json").read_text())["diagnostics"]["unlogged_action_share"] == 0.0
    code, _, err = cli(capsys, *args, "--out", tmp_path / "q.npz", "--allow-unlogged-actions")
    assert code == 0 and f"the policy chooses action(s) 3, which the log never took, on {rows:,} of 600 rows" in err
    assert LinearPolicy.load(str(tmp_path / "q.npz")).excluded_actions == ()
    code, _, err = cli(capsys, *evaluate, tmp_path / "r.json", "--policy", f"linear:{tmp_path / 'q.npz'}")
    share = json.loads((tmp_path / "r.json").read_text())["diagnostics"]["unlogged_action_share"]
    assert code == 0 and share == pytest.approx(rows / 600) and f"puts {rows / 600:.1%} of its probability" in err
    policies = tmp_path / "p.toml"
    policies.write_text(f'[[policy]]\nname = "kept"\nspec = "linear:{tmp_path / "q.npz"}"\n'
                        f'[[policy]]\nname = "excluded"\nspec = "linear:{tmp_path / "p.npz"}"\n')
    code, _, err = cli(capsys, "report", "--logs", logs, "--policies", policies, "--out", tmp_path / "o",
                       "--allow-training-overlap", "--no-progress")
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    kept, excluded = report["policies"]
    assert code == 0 and report["status"] == "warning", err
    assert kept["diagnostics"]["unlogged_action_share"] == pytest.approx(rows / 600)
    assert excluded["diagnostics"]["unlogged_action_share"] == 0.0


def test_an_excluded_action_is_never_chosen_even_by_softmax(tmp_path, capsys, small_log):
    from dr_scale.policies import LinearPolicy

    coef = np.zeros((D, K))
    LinearPolicy(coef, np.array([0.0, 0.0, 0.0, 5.0]), {}, "<test>", (3,)).save(str(tmp_path / "p.npz"))
    for spec in (f"linear:{tmp_path / 'p.npz'}", f"softmax:{tmp_path / 'p.npz'}:1"):
        code, _, err = cli(capsys, "evaluate", small_log, "--policy", spec, "--estimators", "IPS", "--json",
                           tmp_path / "r.json", "--no-progress")
        mass = json.loads((tmp_path / "r.json").read_text())["diagnostics"]
        assert code == 0, err
        assert "never took" not in err and mass.get("matched_rows", 1) > 0
    digests = {LinearPolicy(coef, np.zeros(K), excluded_actions=e).digest for e in ((), (3,), (2,))}
    assert len(digests) == 3  # another excluded set is another policy (report caches key on the digest)


@pytest.mark.parametrize("excluded", [(4,), (-1,), (0, 1, 2, 3), (0.5,)])
def test_a_bad_excluded_actions_array_names_the_file(tmp_path, capsys, small_log, excluded):
    np.savez(tmp_path / "p.npz", coef=np.zeros((D, K)), intercept=np.zeros(K), metadata=np.array("{}"),
             excluded_actions=np.array(excluded))
    code, _, err = cli(capsys, "evaluate", small_log, "--policy", f"linear:{tmp_path / 'p.npz'}", "--no-progress")
    assert code == 2 and f"policy {tmp_path / 'p.npz'}: 'excluded_actions' must be distinct actions in [0, 4)" \
        in error_line(err), err


@pytest.mark.slow
def test_learn_refuses_a_cross_fitted_model_from_another_log(tmp_path, capsys, small_log):
    """learn --reward-model used a cross-fitted model on another log without a word; now the rule of evaluate."""
    from dr_scale.core.errors import ParameterError
    from dr_scale.learning.learn import learn_policy

    model = tmp_path / "cf.npz"
    assert cli(capsys, "fit", small_log, "--folds", "3", "--out", model, "--no-progress")[0] == 0
    args = ["--reward-model", model, "--out", tmp_path / "p.npz", "--no-progress"]
    assert cli(capsys, "learn", small_log, *args)[0] == 0  # its own log
    other = _shifted(tmp_path, small_log, 7)
    code, _, err = cli(capsys, "learn", other, *args)
    line = error_line(err)
    assert code == 2 and f"the reward model {model} is cross-fitted on another log" in line, err
    assert "--allow-other-log" in line
    assert cli(capsys, "learn", other, *args, "--allow-other-log")[0] == 0
    assert cli(capsys, "learn", other, *args[:-3], "--method", "ips", *args[-3:])[0] == 0  # IPS uses no model
    with pytest.raises(ParameterError, match="pass allow_other_log to use it anyway"):
        learn_policy(str(other), reward_model=str(model))


@pytest.mark.slow
def test_learn_takes_a_model_fitted_on_the_train_half_on_the_test_half(tmp_path, capsys, small_log):
    model = tmp_path / "train.npz"
    assert cli(capsys, "fit", small_log, "--folds", "2", "--split", "train", "--out", model, "--no-progress")[0] == 0
    args = ["learn", small_log, "--reward-model", model, "--out", tmp_path / "p.npz", "--no-progress"]
    assert cli(capsys, *args, "--split", "test")[0] == 0
    code, _, err = cli(capsys, *args)  # the whole log, the train rows among them
    assert code == 2 and "cross-fitted on another log" in error_line(err), err


@pytest.mark.parametrize("call, message", [
    (lambda logs: __import__("dr_scale").fit_reward_model(logs, {"folds": 2}),
     "settings must be a FitSettings, e.g. FitSettings(folds=2), got dict"),
    (lambda logs: __import__("dr_scale").learn_policy(logs, {"method": "ips"}),
     "settings must be a LearnSettings, e.g. LearnSettings(method='ips'), got dict"),
    (lambda logs: __import__("dr_scale").learn_policy(logs, reward_model=3),
     "reward_model must be a reward model with predict(X) or an .npz path, got int 3"),
    (lambda logs: __import__("dr_scale").LearnSettings(allow_unlogged_actions="no"),
     "allow_unlogged_actions must be True or False, got 'no'"),
    (lambda logs: _model_and_rows()[0].predict([[0.0] * D]),
     "X must be a 2-d numpy array or scipy sparse matrix (n, d), got list"),
], ids=["fit-settings-dict", "learn-settings-dict", "learn-reward-model-int", "allow-unlogged-str", "predict-list"])
def test_api_arguments_of_the_wrong_kind_are_named(small_log, call, message):
    """These ended in a raw AttributeError (… has no attribute 'n_features' / 'method' / 'shape')."""
    from dr_scale.core.errors import ParameterError

    with pytest.raises(ParameterError, match=re.escape(message)):
        call(str(small_log))


def test_predict_reads_absent_features_as_zero_like_a_linear_policy():
    """X narrower than the model's d was a raw matmul ValueError; the absent features are 0, dense or sparse."""
    model, X, rid = _model_and_rows()
    narrow = X[:, :D - 2]
    padded = sp.csr_matrix((narrow.data, narrow.indices, narrow.indptr), shape=(X.shape[0], D))
    for rows in (narrow, narrow.toarray()):
        assert np.array_equal(model.predict(rows), model.predict(padded))
        assert np.array_equal(model.predict(rows, row_id=rid), model.predict(padded, row_id=rid))


def _log_with_vocabulary(tmp_path: Path, name: str, values: list[str], order: list[str]) -> Path:
    """The same rows, their actions numbered by ``order`` (a permutation of ``values``, the rows' action values)."""
    cols = columns(120, seed=6)
    items = [values[a] for a in cols["action"].to_numpy()]
    cols["action"] = pa.array([order.index(v) for v in items])
    out = tmp_path / name
    write_log(pa.table(cols), str(out), n_parts=2, n_features=D, n_actions=len(order))
    (out / "_dr_scale_spec.json").write_text(json.dumps({"action": {"values": order}}))
    return out


def test_a_policy_learned_on_another_vocabulary_names_the_same_actions(tmp_path, capsys):
    """A learned policy's ids named other actions on a log whose vocabulary is in another order (silently);
    it records its vocabulary and is reordered to the log's, or refused naming what differs."""
    values = ["news", "sports", "weather", "video"]
    a = _log_with_vocabulary(tmp_path, "a", values, values)
    b = _log_with_vocabulary(tmp_path, "b", values, ["video", "news", "weather", "sports"])
    other = ["news", "sports", "weather", "music"]
    c = _log_with_vocabulary(tmp_path, "c", other, other)
    assert cli(capsys, "learn", a, "--method", "ips", "--out", tmp_path / "p.npz", "--no-progress")[0] == 0
    results = []
    for logs in (a, b):
        for spec in (f"linear:{tmp_path / 'p.npz'}", f"softmax:{tmp_path / 'p.npz'}:0.5"):
            code, _, err = cli(capsys, "evaluate", logs, "--policy", spec, "--estimators", "IPS",
                               "--allow-training-overlap", "--json", tmp_path / "r.json", "--no-progress")
            assert code == 0, err
            results.append(json.loads((tmp_path / "r.json").read_text())["estimates"]["IPS"]["value"])
    assert results[0] == results[2] and results[1] == pytest.approx(results[3], rel=1e-12), results
    code, _, err = cli(capsys, "evaluate", c, "--policy", f"linear:{tmp_path / 'p.npz'}", "--no-progress",
                       "--allow-training-overlap")  # c holds a's rows (the same ids, actions, rewards, features)
    assert code == 2 and "was learned on a log with other actions: this log has no 'video'; the policy has no " \
        "'music'" in error_line(err), err


def test_a_reward_model_fitted_on_another_vocabulary_is_refused(tmp_path, capsys):
    values = ["news", "sports", "weather", "video"]
    a = _log_with_vocabulary(tmp_path, "a", values, values)
    b = _log_with_vocabulary(tmp_path, "b", values, ["video", "news", "weather", "sports"])
    model = tmp_path / "m.npz"
    assert cli(capsys, "fit", a, "--out", model, "--no-progress")[0] == 0
    assert cli(capsys, "evaluate", a, "--reward-model", model, "--policy", "constant:news", "--no-progress")[0] == 0
    message = f"the reward model {model} was fitted on a log whose actions are 'news', 'sports', 'weather', " \
              "'video'; this log's are 'video', 'news', 'weather', 'sports'"
    for argv in (["evaluate", b, "--reward-model", model, "--policy", "constant:news"],
                 ["learn", b, "--reward-model", model, "--out", tmp_path / "p.npz"]):
        code, _, err = cli(capsys, *argv, "--no-progress")
        assert code == 2 and message in error_line(err), err
    share = tmp_path / "share"
    share.mkdir()
    b.rename(share / "date=2026-11-01")
    (share / "date=2026-11-01" / "_dr_scale_spec.json").rename(share / "_dr_scale_spec.json")
    policies = tmp_path / "p.toml"
    policies.write_text(f'reward_model = "{model}"\n[[policy]]\nspec = "constant:news"\n')
    code, _, err = cli(capsys, "report", "--logs", share, "--policies", policies, "--out", tmp_path / "o",
                       "--no-progress")
    assert code == 2 and "was fitted on a log whose actions are" in error_line(err), err


@pytest.mark.parametrize("call, message", [
    (lambda logs: __import__("dr_scale").evaluate_dataframe({"a": [1]}, __import__("dr_scale").Evaluation(
        "constant:1", ["IPS"])), "ddf must be a dask DataFrame with the logged-data columns"),
    (lambda logs: __import__("dr_scale").evaluate_partitions([1], __import__("dr_scale").Evaluation(
        "constant:1", ["IPS"])), "parts must be a list of Partition (e.g. read_log's), got a list holding int"),
    (lambda logs: __import__("dr_scale").evaluate_log(logs, __import__("dr_scale").Evaluation(
        "constant:1", ["IPS"]), client="tcp://x:1"), "client must be a distributed.Client, or None"),
    (lambda logs: __import__("dr_scale").learn_policy(logs, client="x"), "client must be a distributed.Client"),
    (lambda logs: __import__("dr_scale").fit_reward_model(logs, client="x"), "client must be a distributed.Client"),
    (lambda logs: __import__("dr_scale").SoftmaxPolicy(None, 1.0), "linear must be a LinearPolicy"),
], ids=["dataframe-dict", "partitions-int", "evaluate-client-str", "learn-client-str", "fit-client-str",
        "softmax-none"])
def test_api_entry_points_name_an_argument_of_the_wrong_kind(small_log, call, message):
    """These ended in AttributeError ('to_delayed', 'action', 'compute', 'scheduler_info', 'n_actions')."""
    from dr_scale.core.errors import ParameterError

    with pytest.raises(ParameterError, match=re.escape(message)):
        call(str(small_log))
