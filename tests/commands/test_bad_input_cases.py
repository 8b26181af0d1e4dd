"""Bad and messy input through the real command, each case with its message.

Grouped by what goes wrong: (1) the process always exits, (2) extreme propensities,
(3) silent NaN, (4) operational errors, (5) wrong meanings, (6) partial writes,
(7) ``write_log``'s contract. CLI cases run ``dr_scale.cli.main`` in-process unless the
process itself is the subject (exit, interrupt), which runs ``dr-scale`` as a subprocess. The command-line options
of ``evaluate``, each with its message, are rows of test_bad_input_corpus.py's table (``EVALUATE_MESSAGES``).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from conftest import cli, error_line

from dr_scale.cli import main
from dr_scale.core.errors import UserError
from dr_scale.logs.contract import LogDataError
from dr_scale.logs.sparse import csr_to_features
from dr_scale.logs.writing import write_log
from dr_scale.reward.models import LinearRewardModel

D, K = 6, 3
DR_SCALE = str(Path(sys.executable).parent / "dr-scale")


def columns(n: int = 90, seed: int = 0, start: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    X = sp.random(n, D, density=0.5, format="csr", random_state=seed)
    return {"row_id": np.arange(start, start + n, dtype=np.int64), "features": csr_to_features(X),
            "action": rng.integers(0, K, n), "reward": rng.random(n), "propensity": np.full(n, 1 / K),
            "target_action": rng.integers(0, K, n)}


def write_raw(path: Path, cols: dict, n_actions: int | None = K) -> Path:
    """Write a part file as is (around write_log's checks), with the log's metadata."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table(cols)
    if n_actions:
        table = table.replace_schema_metadata({b"dr_scale.n_features": str(D).encode(),
                                               b"dr_scale.n_actions": str(n_actions).encode()})
    pq.write_table(table, path)
    return path


def log_with(tmp_path: Path, column: str, make, name: str = "log", parts: int = 3) -> Path:
    """A log of ``parts`` parts whose second part's ``column`` is ``make(values)``."""
    folder = tmp_path / name
    for i in range(parts):
        cols = columns(30, i, 1000 * i)
        if i == 1:
            cols[column] = make(cols[column])
        write_raw(folder / f"part-{i:05d}.parquet", cols)
    return folder


@pytest.fixture
def model(tmp_path) -> Path:
    path = tmp_path / "model.npz"
    LinearRewardModel(np.full((D, K), 0.2), np.zeros(K)).save(str(path))
    return path


# -- (1) the process always exits ---------------------------------------------------------
def _run_once(logs: str, env: dict) -> int:
    try:
        return subprocess.run([DR_SCALE, "evaluate", logs, "--no-progress"], capture_output=True, timeout=120,
                              env=env).returncode
    except subprocess.TimeoutExpired:
        return -1  # a hang


#: Runs of the test; ``python benchmarks/statistical_checks.py`` runs 50. At the rate of the hang it guards
#: against (a pyarrow read in flight at exit: about one run in 20 on a 2-core machine), 8 runs catch it with
#: probability 1 − 0.95⁸ = 34%, 50 runs with 92%.
EXIT_RUNS = 8


def exit_codes(folder: Path, runs: int = EXIT_RUNS) -> list[int]:
    """``dr-scale evaluate`` ``runs`` times, four at a time, on a log of 8 parts with propensity 0 in part 3: the
    exit codes (−1 for a run that did not end in 120 s)."""
    for i in range(8):
        cols = columns(5000, i, 10_000 * i)
        if i == 3:
            cols["propensity"] = np.where(np.arange(5000) == 5, 0.0, cols["propensity"])
        write_raw(folder / f"part-{i:05d}.parquet", cols)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parents[2]),
                                                                     os.environ.get("PYTHONPATH")]))}
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        return list(pool.map(lambda _: _run_once(str(folder), env), range(runs)))


@pytest.mark.slow
def test_a_data_error_in_a_multi_part_log_always_exits_2(tmp_path):
    """8 parts, propensity 0 in part 3, EXIT_RUNS runs: every one exits 2 (none hangs in exit() or aborts with
    134)."""
    codes = exit_codes(tmp_path / "logs")
    assert codes == [2] * EXIT_RUNS, {c: codes.count(c) for c in set(codes)}


def test_the_error_is_one_line_and_debug_adds_the_traceback(tmp_path, capsys, model):
    logs = log_with(tmp_path, "propensity", lambda p: np.where(np.arange(p.size) == 4, 0.0, p))
    code, _, err = cli(capsys, "evaluate", logs, "--reward-model", model, "--no-progress")
    assert code == 2 and error_line(err) == (f"dr-scale evaluate: error: {logs}/part-00001.parquet: column "
                                             "'propensity': propensity outside (0, 1] (e.g. row_id=1004)")
    assert main(["evaluate", str(logs), "--reward-model", str(model), "--no-progress", "--debug"]) == 2
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.parametrize("error", [ValueError("cannot convert float NaN to integer"), KeyError("n_actions"),
                                   TypeError("'NoneType' object is not subscriptable")])
def test_an_internal_error_asks_to_be_reported(tmp_path, capsys, model, monkeypatch, error):
    """An error no code raised on purpose for the user (a bare ValueError, KeyError, TypeError inside the work) is a
    bug of dr-scale: its line says so and asks for a report, and --debug prints where it was raised."""
    import dr_scale.commands.evaluate

    def fails(*args, **kwargs):
        raise error

    monkeypatch.setattr(dr_scale.commands.evaluate, "evaluate_log", fails)
    logs = log_with(tmp_path, "reward", lambda r: r)
    code, _, err = cli(capsys, "evaluate", logs, "--reward-model", model, "--no-progress")
    line = error_line(err)
    assert code == 2 and line.startswith(f"dr-scale evaluate: error: unexpected {type(error).__name__}: "), err
    assert line.endswith("(an internal error of dr-scale: rerun with --debug for the traceback, and please report it)")
    assert main(["evaluate", str(logs), "--reward-model", str(model), "--no-progress", "--debug"]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_a_user_error_raised_on_purpose_is_one_line_without_the_hint(tmp_path, capsys, model, monkeypatch):
    """A UserError is the user's: one line, its parameters written as the command's flags."""
    import dr_scale.commands.evaluate
    from dr_scale.core.errors import ParameterError

    def refuses(*args, **kwargs):
        raise ParameterError("`n_actions` = 2 is less than the log's 3 actions")

    monkeypatch.setattr(dr_scale.commands.evaluate, "evaluate_log", refuses)
    logs = log_with(tmp_path, "reward", lambda r: r)
    code, _, err = cli(capsys, "evaluate", logs, "--reward-model", model, "--no-progress")
    assert code == 2 and error_line(err) == "dr-scale evaluate: error: --n-actions = 2 is less than the log's 3 actions"


# -- (2) extreme propensities -------------------------------------------------------------
@pytest.mark.parametrize("make, row", [
    (lambda p: np.full(p.size, 1e-12), 1000),
    (lambda p: np.where(np.arange(p.size) == 3, 5e-324, p), 1003),
    (lambda p: np.where(np.arange(p.size) == 3, 1e-300, p), 1003),
])
@pytest.mark.parametrize("command", ["evaluate", "report"])
def test_propensities_below_the_floor_are_refused(tmp_path, capsys, model, make, row, command):
    logs = log_with(tmp_path, "propensity", make)
    message = f"column 'propensity': propensity below the floor 1e-09 (a weight above 1e+09); fix the logging " \
              f"probabilities (e.g. row_id={row})"
    if command == "evaluate":
        code, _, err = cli(capsys, "evaluate", logs, "--reward-model", model, "--json", tmp_path / "r.json",
                           "--no-progress")
        assert code == 2 and message in error_line(err)
        assert not (tmp_path / "r.json").exists()
    else:
        policies = tmp_path / "p.toml"
        policies.write_text(f'reward_model = "{model}"\n[[policy]]\nspec = "constant:1"\n')
        code, _, err = cli(capsys, "report", "--logs", logs, "--policies", policies, "--out", tmp_path / "out",
                           "--no-progress")
        assert code == 3 and message in err


def test_evaluate_warns_of_poor_overlap_like_report(tmp_path, capsys):
    cols = columns(400, 1)
    cols["propensity"] = np.where(np.arange(400) % 50 == 0, 0.001, 0.9)  # a few rows carry huge weights
    write_raw(tmp_path / "log.parquet", cols)
    out = tmp_path / "r.json"
    code, stdout, err = cli(capsys, "evaluate", tmp_path / "log.parquet", "--policy", "constant:1", "--json", out,
                            "--no-progress")
    assert code == 0
    assert "dr-scale evaluate: warning: poor overlap: ESS/n = " in err
    assert "of rows have a propensity below 0.01" in err
    assert any(w.startswith("poor overlap") for w in json.loads(out.read_text())["warnings"])


def test_json_is_strict_and_undefined_numbers_are_null(tmp_path, capsys):
    """π never takes a logged action: SNIPS is 0/0. The table says "—", the JSON null, never NaN."""
    cols = columns(50, 2)
    cols["action"] = np.zeros(50, dtype=np.int64)
    write_raw(tmp_path / "log.parquet", cols)
    out = tmp_path / "r.json"
    code, stdout, _ = cli(capsys, "evaluate", tmp_path / "log.parquet", "--policy", "constant:2", "--json", out,
                          "--no-progress")
    assert code == 0 and "nan" not in stdout.lower() and "—" in stdout

    def refuse(token):
        raise ValueError(token)

    result = json.loads(out.read_text(), parse_constant=refuse)
    ips = result["estimates"]["IPS"]  # 0 raw; shown projected into the rewards' range [min r, max r]
    assert result["estimates"]["SNIPS"]["value"] is None and ips["raw_value"] == 0.0
    assert ips["value"] == min(cols["reward"]) and ips["projected"] is True


# -- (3) silent NaN -----------------------------------------------------------------------
def _values(make):
    def mutate(features):
        lengths = [len(f) for f in features.to_pylist()]
        return [[make(i, j) for j in range(n)] for i, n in enumerate(lengths)]
    return mutate


@pytest.mark.parametrize("make, reason", [
    (lambda i, j: float("nan") if i == 2 else 1.0, "NaN or infinite feature value"),
    (lambda i, j: None if i == 2 else 1.0, "null inside a list"),
])
def test_nan_or_null_inside_values_is_refused(tmp_path, capsys, model, make, reason):
    folder = tmp_path / "log"
    for i in range(2):
        cols = columns(30, i, 1000 * i)
        if i == 1:
            cols["values"] = pa.array(_values(make)(cols["features"]), pa.list_(pa.float32()))
        write_raw(folder / f"part-{i:05d}.parquet", cols)
    code, _, err = cli(capsys, "evaluate", folder, "--reward-model", model, "--no-progress")
    first_with_features = 1000 + next(i for i, f in enumerate(columns(30, 1, 1000)["features"].to_pylist())
                                      if i >= 2 and f)
    assert code == 2
    assert f"part-00001.parquet: column 'values': {reason} (e.g. row_id={first_with_features})" in error_line(err)


def test_a_log_without_rows_is_refused(tmp_path, capsys):
    write_raw(tmp_path / "log" / "part-00000.parquet", {k: v[:0] for k, v in columns(3).items()})
    code, _, err = cli(capsys, "evaluate", tmp_path / "log", "--policy", "constant:0", "--no-progress")
    assert code == 2 and "the log has no rows; nothing to evaluate" in error_line(err)


def test_an_empty_part_among_others_adds_nothing(tmp_path, capsys, model):
    """An empty part is not an error (it has no rows to be wrong); only a log with no rows at all is."""
    for i, n in enumerate((30, 0, 30)):
        write_raw(tmp_path / "log" / f"part-{i:05d}.parquet", columns(n, i, 1000 * i))
    code, _, _ = cli(capsys, "evaluate", tmp_path / "log", "--reward-model", model, "--json", tmp_path / "r.json",
                     "--no-progress")
    assert code == 0 and json.loads((tmp_path / "r.json").read_text())["diagnostics"]["n"] == 60


def test_nan_in_a_reward_model_is_refused(tmp_path, capsys):
    coef = np.zeros((D, K))
    coef[2, 1] = np.nan
    np.savez(tmp_path / "m.npz", coef=coef, intercept=np.zeros(K))
    write_raw(tmp_path / "log.parquet", columns(20))
    code, _, err = cli(capsys, "evaluate", tmp_path / "log.parquet", "--reward-model", tmp_path / "m.npz",
                       "--no-progress")
    assert code == 2 and f"reward model {tmp_path}/m.npz: 'coef' has NaN or infinite entries (e.g. at index (2, 1))" \
        in error_line(err)


def test_a_negative_rtol_in_a_job_is_refused(tmp_path, capsys):
    job = tmp_path / "visits.toml"
    job.write_text('job = "visits"\nrtol = -1\n')
    code, _, err = cli(capsys, "run", job, "--no-progress")
    assert code == 2 and error_line(err) == (f"dr-scale run: error: {job}: rtol: should be greater than 0 "
                                             "(got -1)")


# -- (4) operational errors ---------------------------------------------------------------
@pytest.mark.slow
def test_unreachable_s3_endpoint(tmp_path, capsys):
    opts = tmp_path / "opts.json"
    opts.write_text(json.dumps({"key": "k", "secret": "s", "client_kwargs": {
        "endpoint_url": "http://127.0.0.1:9"}, "config_kwargs": {"retries": {"max_attempts": 1}}}))
    code, _, err = cli(capsys, "evaluate", "s3://bucket/logs", "--policy", "constant:0", "--storage-options", opts,
                       "--no-progress")
    assert code == 2 and "cannot reach the object store" in error_line(err) and "endpoint_url" in err


def test_s3_without_credentials(tmp_path, capsys, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "DR_SCALE_STORAGE_OPTIONS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    opts = tmp_path / "opts.json"
    opts.write_text(json.dumps({"client_kwargs": {"endpoint_url": "http://127.0.0.1:9"}}))
    code, _, err = cli(capsys, "evaluate", "s3://bucket/logs", "--policy", "constant:0", "--storage-options", opts,
                       "--no-progress")
    assert code == 2 and "no credentials for the object store" in error_line(err)


def test_outputs_naming_a_file_or_a_read_only_place(tmp_path, capsys, model):
    write_raw(tmp_path / "share" / "date=2026-11-01" / "part-00000.parquet", columns(20))
    policies = tmp_path / "p.toml"
    policies.write_text('[[policy]]\nspec = "constant:1"\n')
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    report = ["report", "--logs", tmp_path / "share", "--policies", policies, "--no-progress"]
    code, _, err = cli(capsys, *report, "--out", a_file)
    assert code == 2 and error_line(err).endswith(f"{a_file}: is a file, not a folder; give a folder for this output")
    code, _, err = cli(capsys, *report, "--out", tmp_path / "o", "--cache", a_file)
    assert code == 2 and f"{a_file}: is a file, not a folder" in error_line(err)
    code, _, err = cli(capsys, *report, "--out", "/proc/dr-scale-report")
    assert code == 2 and "/proc" in error_line(err)
    log = tmp_path / "share" / "date=2026-11-01" / "part-00000.parquet"
    code, _, err = cli(capsys, "evaluate", log, "--policy", "constant:0", "--json", a_file / "r.json", "--no-progress")
    assert code == 2 and f"{a_file} is a file, not a folder" in error_line(err)
    before = sorted(os.listdir(tmp_path))
    code, _, err = cli(capsys, "evaluate", log, "--policy", "constant:0", "--json", tmp_path, "--no-progress")
    assert code == 2 and error_line(err).endswith(f"{tmp_path}: is a folder; give a file name for this output")
    assert sorted(os.listdir(tmp_path)) == before  # no hidden temporary file dropped into it


def test_a_job_path_that_is_a_folder(tmp_path, capsys):
    code, _, err = cli(capsys, "run", tmp_path)
    assert code == 2 and error_line(err) == f"dr-scale run: error: {tmp_path}: is a folder; give a .toml or .yaml file"


@pytest.mark.parametrize("arrays, message", [
    ({"coef": np.zeros((D, K)), "intercept": np.zeros(K + 1)}, "'intercept' has shape (4,), expected (3,)"),
    ({"intercept": np.zeros(K)}, "expected arrays 'coef' (d × k) and 'intercept' (k), found intercept"),
    ({"coef": np.array(2.0), "intercept": np.zeros(K)}, "'coef' has shape (), expected (d, k)"),
])
def test_malformed_model_files(tmp_path, capsys, arrays, message):
    np.savez(tmp_path / "m.npz", **arrays)
    write_raw(tmp_path / "log.parquet", columns(20))
    code, _, err = cli(capsys, "evaluate", tmp_path / "log.parquet", "--reward-model", tmp_path / "m.npz",
                       "--no-progress")
    assert code == 2 and f"reward model {tmp_path}/m.npz: {message}" in error_line(err)


@pytest.mark.parametrize("write, message", [
    (lambda path: path.write_text('reward_model = "rho.npz"\n'),
     "not an .npz file (a zip archive of arrays); it begins with b'reward_model = \"rho.npz\"' (text)"),
    (lambda path: path.write_bytes(bytes(range(200, 224))),
     "not an .npz file (a zip archive of arrays); it begins with b'\\xc8\\xc9"),
    (lambda path: path.write_bytes(b"PK\x03\x04 and then no zip"), "not a readable .npz file (BadZipFile: "),
    (lambda path: np.save(path.open("wb"), np.zeros(3)), "a single array, not an .npz of named arrays"),
])
def test_a_model_file_that_is_no_npz_says_what_it_is(tmp_path, capsys, write, message):
    """A text file, binary bytes, a broken zip or one .npy array given as a model: the file and what it begins with,
    never numpy's advice to load it as a pickle."""
    write(tmp_path / "m.npz")
    write_raw(tmp_path / "log.parquet", columns(20))
    code, _, err = cli(capsys, "evaluate", tmp_path / "log.parquet", "--reward-model", tmp_path / "m.npz",
                       "--no-progress")
    assert code == 2 and f"reward model {tmp_path}/m.npz: {message}" in error_line(err)
    assert "pickle" not in err


def _share(tmp_path: Path) -> tuple[Path, Path]:
    for day in (1, 2):
        write_raw(tmp_path / "share" / f"date=2026-11-0{day}" / "part-00000.parquet", columns(20, day))
    policies = tmp_path / "p.toml"
    policies.write_text('[[policy]]\nname = "one"\nspec = "constant:1"\n')
    return tmp_path / "share", policies


def report_job(tmp_path: Path, capsys, share: Path, policies: Path, extra: str) -> tuple[Path, int, str]:
    """Run a report job file with the given share and policies plus ``extra`` TOML lines."""
    job = tmp_path / "job.toml"
    job.write_text(f'job = "report"\nlogs = "{share}"\npolicies = "{policies}"\nout = "{tmp_path / "o"}"\n{extra}')
    code, _, err = cli(capsys, "run", job, "--no-progress")
    return job, code, err


def test_a_huge_window_is_refused(tmp_path, capsys):
    share, policies = _share(tmp_path)
    code, _, err = cli(capsys, "report", "--logs", share, "--policies", policies, "--out", tmp_path / "o",
                       "--window", "99999999999d", "--no-progress")
    assert code == 2 and "--window '99999999999d': at most 36525 days" in error_line(err)


@pytest.mark.parametrize("text, message", [
    ('job = "visits"\nfractions = 0.05\n', "fractions: should be a valid list (got 0.05)"),
    ('job = "visits"\nrepetitions = 0\n', "repetitions: should be greater than or equal to 1 (got 0)"),
    ('job = "report"\nlogs = "x"\npolicies = "y"\nout = "z"\nstorage_options = [1]\n', "storage_options"),
])
def test_bad_job_values(tmp_path, capsys, text, message):
    job = tmp_path / "job.toml"
    job.write_text(text)
    code, _, err = cli(capsys, "run", job, "--no-progress")
    assert code == 2 and error_line(err).startswith(f"dr-scale run: error: {job}: ") and message in err


@pytest.mark.slow
def test_storage_options_as_a_table_in_a_report_job(tmp_path, capsys):
    share, policies = _share(tmp_path)
    _, code, _ = report_job(tmp_path, capsys, share, policies, "[storage_options]\nauto_mkdir = true\n")
    assert code == 0 and (tmp_path / "o" / "report.json").exists()


def test_bad_yaml_names_the_file(tmp_path, capsys):
    share, _ = _share(tmp_path)
    policies = tmp_path / "p.yaml"
    policies.write_text("policy: [\n  - spec: x\n")
    code, _, err = cli(capsys, "report", "--logs", share, "--policies", policies, "--out", tmp_path / "o",
                       "--no-progress")
    assert code == 2 and error_line(err).startswith(f"dr-scale report: error: {policies}: not valid YAML")


# -- (5) wrong meanings -------------------------------------------------------------------
def test_skip_bad_partitions_as_a_string_is_refused(tmp_path, capsys):
    share, policies = _share(tmp_path)
    job, code, err = report_job(tmp_path, capsys, share, policies, 'skip_bad_partitions = "false"\n')
    assert code == 2 and f"{job}: skip_bad_partitions: should be a valid boolean (got 'false')" in error_line(err)


def test_until_without_a_window_is_refused(tmp_path, capsys):
    share, policies = _share(tmp_path)
    code, _, err = cli(capsys, "report", "--logs", share, "--policies", policies, "--out", tmp_path / "o",
                       "--until", "2026-11-01", "--no-progress")
    assert code == 2 and "until needs a window" in error_line(err)


def test_min_ess_ratio_out_of_range_is_refused(tmp_path, capsys):
    share, _ = _share(tmp_path)
    policies = tmp_path / "p.toml"
    policies.write_text('min_ess_ratio = -1\n[[policy]]\nspec = "constant:1"\n')
    code, _, err = cli(capsys, "report", "--logs", share, "--policies", policies, "--out", tmp_path / "o",
                       "--no-progress")
    assert code == 2 and f"{policies}: min_ess_ratio: should be greater than or equal to 0 (got -1)" \
        in error_line(err)


def test_a_float_column_is_not_truncated_to_actions(tmp_path, capsys):
    cols = columns(20)
    cols["score"] = np.linspace(0, 2.9, 20)
    write_raw(tmp_path / "log.parquet", cols)
    code, _, err = cli(capsys, "evaluate", tmp_path / "log.parquet", "--policy", "column:score", "--no-progress")
    assert code == 2 and "column 'score': wrong type double: column: policies read integer actions" in error_line(err)


def test_without_a_policy_a_log_lacking_target_action_asks_for_one(tmp_path, capsys):
    """The default policy (column:target_action) on a log without that column: the message says no --policy was
    given, not only that a column the user never named is missing; a --policy then evaluates."""
    cols = {k: v for k, v in columns().items() if k != "target_action"}
    part = write_raw(tmp_path / "log" / "part-0.parquet", cols)
    code, _, err = cli(capsys, "evaluate", part.parent, "--no-progress")
    assert code == 2
    err = error_line(err)
    assert "no --policy given: the default, column:target_action, reads the log's 'target_action' column" in err
    assert f"{part} lacks" in err and "--policy uniform" in err
    assert cli(capsys, "evaluate", part.parent, "--policy", "uniform", "--no-progress")[0] == 0


def test_a_model_with_other_actions_blames_the_model(tmp_path, capsys):
    np.savez(tmp_path / "m2.npz", coef=np.zeros((D, 2)), intercept=np.zeros(2))
    write_raw(tmp_path / "log.parquet", columns(20))
    code, _, err = cli(capsys, "evaluate", tmp_path / "log.parquet", "--reward-model", tmp_path / "m2.npz",
                       "--no-progress")
    assert code == 2 and error_line(err).endswith(
        f"the reward model {tmp_path}/m2.npz has k = 2 actions, but the log's metadata ({tmp_path}/log.parquet) says "
        "k = 3; use a model fitted for this log")
    write_raw(tmp_path / "plain.parquet", columns(20), n_actions=None)  # no metadata: the row tells
    code, _, err = cli(capsys, "evaluate", tmp_path / "plain.parquet", "--reward-model", tmp_path / "m2.npz",
                       "--no-progress")
    assert code == 2 and f"k = 2 comes from the reward model {tmp_path}/m2.npz" in error_line(err)


@pytest.mark.parametrize("fits", ["--fit-reward-model", "--estimate-propensity"])
@pytest.mark.parametrize("options,message", [
    (["--policy", "uniform", "--estimators", "DR,SNIPZ"], "unknown estimator 'SNIPZ'"),
    (["--policy", f"constant:{K}"], f"policy constant:{K}: action #{K} is not one of the log's {K} actions"),
    (["--policy", f"topk:0,{K + 4}"], f"policy topk:0,{K + 4}: action #{K + 4} is not one of the log's {K} actions"),
    (["--policy", "uniform", "--baseline", f"epsilon-greedy:0.1:constant:{K}"], f"action #{K} is not one of the log's"),
])
def test_a_misspelt_estimator_or_action_is_refused_before_a_model_is_fitted(tmp_path, capsys, monkeypatch, fits,
                                                                            options, message):
    """``evaluate`` checks its estimators and the actions its policies name (against the log's k) before it fits ρ̂
    or π̂₀ (minutes on a large log), not after."""
    import dr_scale.commands.evaluate as command

    def fitted(*args, **kwargs):
        raise AssertionError("a model was fitted before the estimators and policies were checked")

    monkeypatch.setattr(command, "fit_from_args", fitted)
    monkeypatch.setattr(command, "fit_propensity_from_args", fitted)
    logs = log_with(tmp_path, "reward", lambda r: r)
    code, out, err = cli(capsys, "evaluate", logs, *options, fits, "--no-progress")
    assert code == 2 and out == ""
    assert message in error_line(err)


def test_a_report_refuses_an_action_the_log_lacks_before_it_fits_propensities(tmp_path, capsys, monkeypatch):
    """``report --estimate-propensity`` checks the actions its policies name before the fit, and writes nothing."""
    import dr_scale.commands.fit_propensity as fitting

    def fitted(*args, **kwargs):
        raise AssertionError("the propensity model was fitted before the policies were checked")

    monkeypatch.setattr(fitting, "fit_propensity_from_args", fitted)
    logs = log_with(tmp_path, "reward", lambda r: r)
    policies = tmp_path / "policies.toml"
    policies.write_text(f'estimators = ["IPS"]\n[[policy]]\nname = "last"\nspec = "constant:{K}"\n')
    code, out, err = cli(capsys, "report", "--logs", logs, "--policies", policies, "--out", tmp_path / "report",
                         "--estimate-propensity", "--no-progress")
    assert code == 2 and out == ""
    assert f"policy constant:{K}: action #{K} is not one of the log's {K} actions" in error_line(err)
    assert not (tmp_path / "report").exists()


def test_estimators_as_a_string_is_refused(tmp_path, capsys, model):
    share, _ = _share(tmp_path)
    policies = tmp_path / "p.toml"
    policies.write_text(f'reward_model = "{model}"\nestimators = "DR"\n[[policy]]\nspec = "constant:1"\n')
    code, _, err = cli(capsys, "report", "--logs", share, "--policies", policies, "--out", tmp_path / "o",
                       "--no-progress")
    assert code == 2 and f"{policies}: estimators: should be a valid list (got 'DR')" in error_line(err)


@pytest.mark.parametrize("name, text, message", [
    ("job.toml", 'job = "visits"\nrows = \n', "not valid TOML"),
    ("bad.toml", "[[policy]\n", "not valid TOML"),
    ("bad.yaml", "a: [\n", "not valid YAML"),
])
def test_parse_errors_name_the_file(tmp_path, capsys, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    if name == "job.toml":
        code, _, err = cli(capsys, "run", path)
    else:
        share, _ = _share(tmp_path)
        code, _, err = cli(capsys, "report", "--logs", share, "--policies", path, "--out", tmp_path / "o")
    assert code == 2 and f"error: {path}: {message}" in error_line(err)


# -- (6) partial writes -------------------------------------------------------------------
def _report_files_consistent(out: Path) -> dict:
    report = json.loads((out / "report.json").read_text())
    for name, digest in report["files"].items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest, name
    assert not [p for p in out.rglob("*") if ".tmp-" in p.name]
    return report


@pytest.mark.slow
def test_an_interrupt_during_publication_takes_effect_after_it(tmp_path, monkeypatch):
    """Ctrl-C (a real SIGINT) during the renames: every rename completes, the message says so, exit 130."""
    share, policies = _share(tmp_path)
    out = tmp_path / "o"
    argv = ["report", "--logs", str(share), "--policies", str(policies), "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    first = _report_files_consistent(out)
    import fsspec.implementations.local as local

    real_mv, calls = local.LocalFileSystem.mv, []

    def mv(self, path1, path2, **kwargs):
        calls.append(path2)
        if len(calls) == 2:
            signal.raise_signal(signal.SIGINT)
        return real_mv(self, path1, path2, **kwargs)

    monkeypatch.setattr(local.LocalFileSystem, "mv", mv)
    (share / "date=2026-11-02" / "part-00000.parquet").unlink()
    write_raw(share / "date=2026-11-02" / "part-00000.parquet", columns(25, 9))
    import io
    from contextlib import redirect_stderr

    err = io.StringIO()
    with redirect_stderr(err):
        assert main(argv) == 130
    assert "interrupted; the interrupt came while publishing; all" in err.getvalue()
    assert "files were written completely before it took effect" in err.getvalue()
    second = _report_files_consistent(out)
    assert second["rows"] == 45 != first["rows"]


@pytest.mark.slow
def test_an_interrupt_before_publication_leaves_the_previous_report(tmp_path, monkeypatch, capsys):
    share, policies = _share(tmp_path)
    out = tmp_path / "o"
    argv = ["report", "--logs", str(share), "--policies", str(policies), "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    import dr_scale.report.render as render

    def interrupted(report):
        raise KeyboardInterrupt

    monkeypatch.setattr(render, "render", interrupted)
    capsys.readouterr()
    assert main(argv) == 130
    assert "interrupted; nothing was half-written" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


@pytest.mark.slow
def test_a_killed_publication_is_cleaned_by_the_next_run(tmp_path):
    """A kill between renames leaves temporaries (simulated here); report.json, the commit marker, tells the
    new files from the old by checksum, and the next run removes the temporaries."""
    share, policies = _share(tmp_path)
    out = tmp_path / "o"
    argv = ["report", "--logs", str(share), "--policies", str(policies), "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    (out / f".report.html.tmp-{'a' * 32}").write_text("half")
    (out / "plots" / f".weights-x.png.tmp-{'b' * 32}").write_bytes(b"half")
    (out / "report.md").write_text("a newer report.md beside the old report.json")
    report = json.loads((out / "report.json").read_text())
    assert hashlib.sha256((out / "report.md").read_bytes()).hexdigest() != report["files"]["report.md"]
    assert main(argv) == 0
    _report_files_consistent(out)


def _sigint_by_default():
    """The child takes Ctrl-C as a terminal's foreground job does, even when the tests run as a background
    job (a shell starts those with SIGINT ignored, and Python keeps an ignored SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_sigint_to_the_command_exits_130_with_a_true_message(tmp_path, sig):
    """A real Ctrl-C (or SIGTERM) to a ``dr-scale report`` process while it computes: exit 130, no temporary file."""
    share, _ = _share(tmp_path)
    policies = tmp_path / "slow.toml"
    policies.write_text('[[policy]]\nspec = "callable:slow_policy_for_tests:slow"\n')
    started = tmp_path / "computing"
    (tmp_path / "slow_policy_for_tests.py").write_text(
        f"import pathlib, time\nimport numpy as np\n\ndef slow(X, row_id):\n"
        f"    pathlib.Path({str(started)!r}).touch()\n    time.sleep(30)\n    return np.zeros(X.shape[0], dtype=int)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(__file__).parents[2]),
                                                        os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([DR_SCALE, "report", "--logs", str(share), "--policies", str(policies), "--out",
                             str(tmp_path / "o"), "--no-progress"], stderr=subprocess.PIPE, env=env,
                            preexec_fn=_sigint_by_default)
    import time

    deadline = time.monotonic() + 120
    while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)  # the signal arrives while the report computes, however slowly the machine starts it
    assert started.exists(), proc.stderr.read() if proc.poll() is not None else "the policy was never called"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert b"interrupted; nothing was half-written" in err
    assert not [p for p in tmp_path.rglob("*") if ".tmp-" in p.name]


# -- (7) write_log's contract ----------------------------------------------------------------
@pytest.mark.parametrize("kwargs, error, message", [
    ({"n_parts": 0}, UserError, "n_parts = 0: give an integer from 1 to the number of rows (5)"),
    ({"n_parts": 10}, UserError, "n_parts = 10: give an integer from 1 to the number of rows (5)"),
    ({"n_parts": 2.5}, UserError, "n_parts = 2.5"),
    ({"n_actions": 0}, UserError, "n_actions = 0: give a positive integer"),
])
def test_write_log_refuses_bad_arguments(tmp_path, kwargs, error, message):
    table = pa.table(columns(5))
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        write_log(table, str(tmp_path / "log"), **kwargs)
    assert not (tmp_path / "log").exists()


@pytest.mark.parametrize("mutate, message", [
    (lambda c: {**c, "target_action": np.where(np.arange(5) == 2, 7, c["target_action"])},
     "column 'target_action': target action out of range [0, 3) (e.g. row_id=2)"),
    (lambda c: {k: v for k, v in c.items() if k != "features"}, "column 'features': missing column"),
    (lambda c: {k: v[:0] for k, v in c.items()}, "no rows to write"),
    (lambda c: {**c, "target_probs": pa.array([[0.5, 0.6, 0.0]] * 5)},
     "column 'target_probs': target probabilities are not a distribution (e.g. row_id=0)"),
    (lambda c: {**c, "target_probs": pa.array([[1.0]] * 5)}, "column 'target_probs': expected 3 probabilities"),
])
def test_write_log_enforces_the_contract(tmp_path, mutate, message):
    with pytest.raises(LogDataError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        write_log(pa.table(mutate(columns(5))), str(tmp_path / "log"), n_features=D, n_actions=K)
    assert not (tmp_path / "log").exists()


def test_write_log_one_file_holds_one_part(tmp_path):
    with pytest.raises(UserError, match="a .parquet file holds one part"):
        write_log(pa.table(columns(5)), str(tmp_path / "one.parquet"), n_parts=2)
