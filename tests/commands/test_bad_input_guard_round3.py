"""Round 3 of the bad-input corpus, the guard's part: options that do not apply, estimator specs, alert
settings, fit budgets, outputs that would destroy inputs, and the leakage guard by content.

Every case runs the real command in-process (``dr_scale.cli.main``) on inputs built in ``tmp_path`` and holds
the corpus's rules (:func:`test_bad_input_corpus.check_rules`: exit 0, 2 or 3, no traceback, one error line
that is not the internal-error fallback) plus its own: the message names the option or the file and the
reason, a user's file is byte-for-byte what it was, and an in-sample estimate carries its label.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import error_line
from test_bad_input_corpus import D, K, check_rules, good_columns

from dr_scale.cli import main
from dr_scale.core.errors import UserError
from dr_scale.io.config import ConfigError, validate
from dr_scale.logs.sketch import SKETCH_SIZE, RowSketch, content_hashes, in_sample_fraction, overlap_counts
from dr_scale.logs.writing import write_log
from dr_scale.ope.estimators.spec import make_estimators, parse_estimator
from dr_scale.policies.linear import LinearPolicy
from dr_scale.report.alerts import AlertSettings, level_alerts
from dr_scale.reward.models import LinearRewardModel

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")
#: Cases that fit models or write reports (a few seconds each) are slow; the refusals run in the dev loop.
slow = pytest.mark.slow


def run(capsys, tmp_path: Path, *argv) -> tuple[int, str, str]:
    """The command, its status, stdout and stderr, checked against the corpus's rules."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    check_rules(code, captured.err, tmp_path)
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A 60-row log of 3 parts, a 3-day dated log, a reward model, a linear policy and a policies file."""
    root = tmp_path_factory.mktemp("guard-base")
    write_log(pa.table(good_columns()), str(root / "logs"), n_parts=3, n_features=D, n_actions=K)
    for day in (1, 2, 3):
        write_log(pa.table(good_columns(20, day)), str(root / "share" / f"date=2026-11-0{day}"), n_features=D,
                  n_actions=K)
    LinearRewardModel(np.full((D, K), 0.1), np.zeros(K)).save(str(root / "model.npz"))
    LinearPolicy(np.eye(D, K), np.zeros(K)).save(str(root / "policy.npz"))
    (root / "policies.toml").write_text('[[policy]]\nname = "u"\nspec = "uniform"\n')
    return root


# -- (1) options that do not apply: refused with the reason ------------------------------------------------
NOT_CLIPPING = ["IPS", "SNIPS", "DM", "DR", "SNDR", "SwitchDR", "DRos", "SubGaussianIPS", "SubGaussianDR",
                "IPSTuning", "DRTuning", "SwitchDRTuning", "RM", "IPS,SNIPS", "DM,DR,SNDR",
                "ClippedDR(max_weight=5)", "ClippedDR(max_weight=inf)", "DR,ClippedDR(max_weight=2)"]
NOT_SWITCHING = ["IPS", "SNIPS", "DM", "DR", "SNDR", "ClippedDR", "DRos", "SubGaussianDR", "SwitchDR(tau=3)",
                 "DR,SwitchDR(tau=0)"]


@pytest.mark.parametrize("estimators", NOT_CLIPPING)
def test_clip_without_a_bare_clipped_dr_is_refused(base, tmp_path, capsys, estimators):
    code, _, err = run(capsys, tmp_path, "evaluate", base / "logs", "--reward-model", base / "model.npz",
                       "--policy", "uniform", "--estimators", estimators, "--clip", "10", "--no-progress")
    assert code == 2 and "--clip sets the clip M of a bare ClippedDR" in error_line(err)
    if "(max_weight" in estimators:
        assert "sets its own" in error_line(err)


@pytest.mark.parametrize("estimators", NOT_SWITCHING)
def test_tau_without_a_bare_switch_dr_is_refused(base, tmp_path, capsys, estimators):
    code, _, err = run(capsys, tmp_path, "evaluate", base / "logs", "--reward-model", base / "model.npz",
                       "--policy", "uniform", "--estimators", estimators, "--tau", "4", "--no-progress")
    assert code == 2 and "--tau sets the threshold τ of a bare SwitchDR" in error_line(err)


@pytest.mark.parametrize("estimators,clip,tau", [("ClippedDR", 10, None), ("SwitchDR", None, 4),
                                                 ("ClippedDR,SwitchDR,DR", 3, 2)])
def test_clip_and_tau_set_the_bare_estimators(estimators, clip, tau):
    made = make_estimators(estimators.split(","), clip=clip, tau=tau)
    assert (made["ClippedDR"].max_weight == clip) if clip else made["SwitchDR"].tau == tau


DUPLICATES = ["DRos(lambda_=10,lambda_=20)", "DRos(lambda_=10, lambda_=10)", "ClippedDR(max_weight=5,max_weight=6)",
              "SwitchDR(tau=1,tau=2)", "IPS(lambda_=1,lambda_=2)", "SubGaussianIPS(lambda_=0.1,lambda_=0.2)",
              "SubGaussianDR(lambda_=0.1,lambda_=0.1)", "DRos(lambdas=[1, 2],lambdas=[3])",
              "ClippedDR( max_weight = 5 , max_weight=5 )", "DRTuning(lambdas=[1],lambdas=[2])"]


@pytest.mark.parametrize("spec", DUPLICATES)
def test_a_parameter_given_twice_is_refused(spec):
    with pytest.raises(UserError, match="is given twice; give each parameter once"):
        parse_estimator(spec)


def test_a_parameter_given_twice_is_refused_by_the_command(base, tmp_path, capsys):
    code, _, err = run(capsys, tmp_path, "evaluate", base / "logs", "--reward-model", base / "model.npz",
                       "--policy", "uniform", "--estimators", "DRos(lambda_=10,lambda_=20)", "--no-progress")
    assert code == 2 and "lambda_ is given twice" in error_line(err)


@pytest.mark.parametrize("floor", ["0.01", "0.05", "0.5"])
@pytest.mark.parametrize("command", ["evaluate", "learn", "report"])
def test_propensity_floor_without_estimated_propensities_is_refused(base, tmp_path, capsys, command, floor):
    argv = {"evaluate": ["evaluate", base / "logs", "--policy", "uniform"],
            "learn": ["learn", base / "logs", "--out", tmp_path / "p.npz"],
            "report": ["report", "--logs", base / "share", "--policies", base / "policies.toml", "--out",
                       tmp_path / "rep"]}[command]
    code, _, err = run(capsys, tmp_path, *argv, "--propensity-floor", floor, "--no-progress")
    assert code == 2 and "--propensity-floor floors estimated propensities" in error_line(err)
    assert not (tmp_path / "p.npz").exists() and not (tmp_path / "rep").exists()


@pytest.mark.parametrize("argv", [
    ["fit-propensity", "{logs}", "--out", "{tmp}/p.npz", "--model", "ridge"],
    ["fit-propensity", "{logs}", "--out", "{tmp}/p.npz", "--model", "logistic"],
    ["evaluate", "{logs}", "--policy", "uniform", "--estimate-propensity", "--model", "ridge"],
    ["evaluate", "{logs}", "--policy", "uniform", "--estimate-propensity", "--model", "logistic"],
    ["report", "--logs", "{share}", "--policies", "{base}/policies.toml", "--out", "{tmp}/rep",
     "--estimate-propensity", "--model", "ridge"],
])
def test_model_where_only_a_propensity_model_is_fitted_is_refused(base, tmp_path, capsys, argv):
    argv = [a.format(logs=base / "logs", share=base / "share", base=base, tmp=tmp_path) for a in argv]
    code, _, err = run(capsys, tmp_path, *argv, "--no-progress")
    assert code == 2 and "chooses the reward model; the model fitted here is the propensity model" in error_line(err)


@pytest.mark.parametrize("argv,expected", [
    (["fit", "{logs}", "--out", "{tmp}/m.npz", "--max-iter", "abc"], "argument --max-iter: should be a valid integer"),
    (["fit", "{logs}", "--out", "{tmp}/m.npz", "--max-iter", "0"], "argument --max-iter: should be greater than or"),
    (["fit", "{logs}", "--out", "{tmp}/m.npz", "--max-iter", "-3"], "argument --max-iter: should be greater than"),
    (["fit-propensity", "{logs}", "--out", "{tmp}/m.npz", "--max-iter", "1.5"], "argument --max-iter: should be a"),
    (["evaluate", "{logs}", "--policy", "uniform", "--max-iter", "5"],
     "--max-iter fit(s) a reward model or a propensity model: give it with --fit-reward-model"),
    (["evaluate", "{logs}", "--reward-model", "{base}/model.npz", "--policy", "uniform", "--max-iter", "5"],
     "--max-iter fit(s) a reward model or a propensity model"),
    (["report", "--logs", "{share}", "--policies", "{base}/policies.toml", "--out", "{tmp}/rep", "--max-iter", "3"],
     "--max-iter fit(s) the propensity model of --estimate-propensity"),
])
def test_a_pass_budget_that_does_not_apply_or_is_not_a_count_is_refused(base, tmp_path, capsys, argv, expected):
    """``--max-iter``, the pass budget of a fit: a positive count, and only where a model is fitted."""
    argv = [a.format(logs=base / "logs", share=base / "share", base=base, tmp=tmp_path) for a in argv]
    code, _, err = run(capsys, tmp_path, *argv, "--no-progress")
    assert code == 2 and expected in error_line(err), err
    assert not (tmp_path / "m.npz").exists() and not (tmp_path / "rep").exists()


def test_fit_propensity_help_lists_no_reward_model_option(capsys):
    assert main(["fit-propensity", "--help"]) == 0
    text = capsys.readouterr().out
    assert "--model" not in text and "fitting the propensity model" in text and "fitting the reward model" not in text


@pytest.mark.parametrize("extra,expected", [
    (["--embedding-categories", "3"], "--embedding-categories sets the world of items"),
    (["--embedding-categories", "50"], "--embedding-categories sets the world of items"),
    (["--target-top-k", "2"], "--target-top-k sets the world of items"),
    (["--target-top-k", "2", "--embedding-categories", "4"], "--embedding-categories sets the world of items"),
    (["--action-features", "4", "--hide-propensity"], "--hide-propensity sets the logging of the world without"),
    (["--action-features", "4", "--uniform-share", "0.1"], "--uniform-share sets the logging of the world without"),
    (["--action-features", "4", "--uniform-share", "0"], "--uniform-share sets the logging of the world without"),
])
def test_generate_options_of_the_other_world_are_refused(tmp_path, capsys, extra, expected):
    code, _, err = run(capsys, tmp_path, "generate", "bandit", "--rows", "100", "--features", "100", "--actions",
                       "5", "--out", tmp_path / "g", *extra, "--no-progress")
    assert code == 2 and expected in error_line(err) and not (tmp_path / "g").exists()


# -- report alert settings checked against each other -------------------------------------------------------
@pytest.mark.parametrize("history,minimum", [(1, 2), (3, 4), (14, 15), (7, 30), (2, 100)])
def test_min_history_days_above_history_days_is_refused(history, minimum):
    with pytest.raises(ConfigError, match=f"min_history_days = {minimum} is above history_days = {history}"):
        validate(AlertSettings, {"history_days": history, "min_history_days": minimum}, "policies.toml")


@pytest.mark.parametrize("history,minimum", [(1, 1), (14, 3), (5, 5)])
def test_min_history_days_up_to_history_days_is_taken(history, minimum):
    assert validate(AlertSettings, {"history_days": history, "min_history_days": minimum}, "p.toml").history_days


def test_the_report_names_the_alert_settings_that_contradict(base, tmp_path, capsys):
    policies = tmp_path / "pol.toml"
    policies.write_text('[alerts]\nhistory_days = 3\nmin_history_days = 5\n[[policy]]\nname = "u"\nspec = "uniform"\n')
    code, _, err = run(capsys, tmp_path, "report", "--logs", base / "share", "--policies", policies, "--out",
                       tmp_path / "rep", "--no-progress")
    assert code == 2 and "min_history_days = 5 is above history_days = 3" in error_line(err)


@pytest.mark.parametrize("z,estimated,alerted", [(7.5, True, False), (7.5, False, True), (-7.5, True, True),
                                                 (-7.5, False, True), (2.0, True, False), (math.inf, True, False)])
def test_estimated_propensities_are_not_blamed_for_a_mean_weight_above_one(z, estimated, alerted):
    """"The logged propensities are too small" is never said of estimated ones; π's mass on unlogged actions
    (w̄ below 1) still is."""
    metrics = {"mean_weight_z": z, "mean_weight": 1.03 if z > 0 else 0.9, "unlogged_share": 0.0, "pareto_k": 0.2,
               "top_share": 0.1}
    alerts = level_alerts(metrics, AlertSettings(), estimated)
    assert bool(alerts) == alerted
    assert not any("logged propensities" in a["message"] for a in alerts) or not estimated


# -- fit budgets: folds no more than the rows allow --------------------------------------------------------
@pytest.mark.parametrize("argv,expected", [
    (["fit", "{logs}", "--out", "{tmp}/m.npz", "--folds", "7"], "leaves 8.57 rows a fold"),
    (["fit", "{logs}", "--out", "{tmp}/m.npz", "--folds", "15"], "leaves 4 rows a fold"),
    (["fit", "{logs}", "--out", "{tmp}/m.npz", "--folds", "21"], "at most 20 cross-fitting folds"),
    (["fit", "{logs}", "--out", "{tmp}/m.npz", "--folds", "2000"], "at most 20 cross-fitting folds"),
    (["fit-propensity", "{logs}", "--out", "{tmp}/m.npz", "--folds", "10"], "leaves 6 rows a fold"),
    (["evaluate", "{logs}", "--policy", "uniform", "--fit-reward-model", "--folds", "2000"], "at most 20"),
    (["evaluate", "{logs}", "--policy", "uniform", "--fit-reward-model", "--folds", "8"], "leaves 7.5 rows a fold"),
    (["evaluate", "{logs}", "--policy", "uniform", "--estimate-propensity", "--folds", "12"], "leaves 5 rows"),
    (["learn", "{logs}", "--out", "{tmp}/p.npz", "--folds", "25"], "at most 20 cross-fitting folds"),
    (["learn", "{logs}", "--out", "{tmp}/p.npz", "--folds", "9"], "leaves 6.67 rows a fold"),
    (["report", "--logs", "{share}", "--policies", "{base}/policies.toml", "--out", "{tmp}/rep",
      "--estimate-propensity", "--folds", "7"], "leaves 8.57 rows a fold"),
])
def test_folds_that_leave_too_few_rows_a_fold_are_refused_before_the_work(base, tmp_path, capsys, argv, expected):
    argv = [a.format(logs=base / "logs", share=base / "share", base=base, tmp=tmp_path) for a in argv]
    code, _, err = run(capsys, tmp_path, *argv, "--no-progress")
    assert code == 2 and expected in error_line(err), err
    assert "--folds" in error_line(err) and not list(tmp_path.glob("*.npz")) and not (tmp_path / "rep").exists()


def test_lam_auto_on_rows_without_features_fits(tmp_path, capsys):
    cols = good_columns()
    cols["features"] = pa.array([[] for _ in range(len(cols["row_id"]))], pa.list_(pa.int32()))
    write_log(pa.table(cols), str(tmp_path / "nofeat"), n_features=D, n_actions=K)
    code, out, err = run(capsys, tmp_path, "fit", tmp_path / "nofeat", "--out", tmp_path / "m.npz", "--lam", "auto",
                         "--no-progress")
    assert code == 0 and (tmp_path / "m.npz").exists()


@pytest.mark.parametrize("metadata,expected", [
    ("[1, 2]", "a JSON list, not an object"), ("3", "a JSON int, not an object"), ('"text"', "a JSON str"),
    ("null", "a JSON NoneType"), ("true", "a JSON bool"), ("{not json", "unreadable metadata"),
    ("", "unreadable metadata"),
])
def test_a_linear_policy_with_malformed_metadata_is_refused(base, tmp_path, capsys, metadata, expected):
    arrays = dict(np.load(base / "policy.npz"))
    arrays["metadata"] = np.array(metadata)
    np.savez(tmp_path / "bad.npz", **arrays)
    code, _, err = run(capsys, tmp_path, "evaluate", base / "logs", "--policy", f"linear:{tmp_path / 'bad.npz'}",
                       "--no-progress")
    assert code == 2 and expected in error_line(err) and "bad.npz" in error_line(err)


# -- (3) outputs never destroy inputs ----------------------------------------------------------------------
def user_files(tmp_path: Path) -> dict[str, Path]:
    """Files of the user's, each with its content."""
    files = {"csv": tmp_path / "mine.csv", "npz": tmp_path / "mine.npz", "json": tmp_path / "notes.json",
             "txt": tmp_path / "notes.txt"}
    for name, path in files.items():
        path.write_bytes(f'{{"the user\'s": "{name}"}}\n'.encode())
    return files


FILE_WRITERS = {
    "fit": lambda b, out: ["fit", b / "logs", "--out", out],
    "fit-propensity": lambda b, out: ["fit-propensity", b / "logs", "--out", out],
    "learn": lambda b, out: ["learn", b / "logs", "--out", out],
    "evaluate --json": lambda b, out: ["evaluate", b / "logs", "--policy", "uniform", "--json", out],
}


@pytest.mark.parametrize("kind", ["csv", "npz", "json", "txt"])
@pytest.mark.parametrize("command", list(FILE_WRITERS))
def test_a_file_dr_scale_did_not_write_is_not_replaced(base, tmp_path, capsys, command, kind):
    files = user_files(tmp_path)
    before = files[kind].read_bytes()
    code, _, err = run(capsys, tmp_path, *FILE_WRITERS[command](base, files[kind]), "--no-progress")
    assert code == 2 and "exists and dr-scale did not write it" in error_line(err)
    assert files[kind].read_bytes() == before


@pytest.mark.parametrize("target", ["part", "folder", "new-inside", "model"])
@pytest.mark.parametrize("command", list(FILE_WRITERS))
def test_an_output_that_is_or_lies_in_an_input_is_refused(base, tmp_path, capsys, command, target):
    logs = tmp_path / "logs"
    shutil.copytree(base / "logs", logs)
    shutil.copy(base / "model.npz", tmp_path / "model.npz")
    part = sorted(logs.glob("*.parquet"))[0]
    out = {"part": part, "folder": logs / "x" / "..", "new-inside": logs / "model.npz",
           "model": tmp_path / "model.npz"}[target]
    before = {p: p.read_bytes() for p in [*logs.rglob("*"), tmp_path / "model.npz"] if p.is_file()}
    argv = FILE_WRITERS[command](tmp_path, out)
    if target == "model":
        argv += ["--reward-model", tmp_path / "model.npz"] if command in ("learn", "evaluate --json") else []
    code, _, err = run(capsys, tmp_path, *argv, "--no-progress")
    assert code == 2, err
    assert any(s in error_line(err) for s in ("is an input of this run", "lies inside the input", "is a folder",
                                              "exists and dr-scale did not write it"))
    assert {p: p.read_bytes() for p in before} == before and not (logs / "model.npz").exists()


@slow
@pytest.mark.parametrize("command", ["fit", "fit-propensity", "learn"])
def test_a_file_dr_scale_wrote_is_replaced_on_the_next_run(base, tmp_path, capsys, command):
    out = tmp_path / "out.npz"
    for _ in range(2):
        code, _, err = run(capsys, tmp_path, *FILE_WRITERS[command](base, out), "--no-progress")
        assert code == 0, err
    assert json.loads((tmp_path / "_dr_scale_outputs.json").read_text())["files"] == ["out.npz"]


@pytest.mark.parametrize("where", ["log", "log-part-folder", "around-log", "user-folder", "user-plots",
                                   "policies-file"])
def test_report_out_never_writes_into_an_input_or_a_users_folder(base, tmp_path, capsys, where):
    share = tmp_path / "around" / "share"
    shutil.copytree(base / "share", share)
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "mine.txt").write_text("mine")
    (tmp_path / "rep" / "plots").mkdir(parents=True)
    (tmp_path / "rep" / "plots" / "mine.png").write_bytes(b"png")
    out = {"log": share, "log-part-folder": share / "date=2026-11-01", "around-log": tmp_path / "around",
           "user-folder": tmp_path / "user", "user-plots": tmp_path / "rep",
           "policies-file": base / "policies.toml"}[where]
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    code, _, err = run(capsys, tmp_path, "report", "--logs", share, "--policies", base / "policies.toml", "--out",
                       out, "--no-progress")
    assert code == 2 and any(s in error_line(err) for s in ("is an input", "lies inside the input", "holds",
                                                            "is a file, not a folder"))
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


@slow
def test_report_rewrites_its_own_folder(base, tmp_path, capsys):
    args = ["report", "--logs", base / "share", "--policies", base / "policies.toml", "--out", tmp_path / "rep",
            "--no-progress"]
    assert run(capsys, tmp_path, *args)[0] == 0
    assert run(capsys, tmp_path, *args)[0] == 0
    (tmp_path / "rep" / "mine.txt").write_text("mine")
    code, _, err = run(capsys, tmp_path, *args)
    assert code == 2 and "holds mine.txt, which dr-scale did not write" in error_line(err)


@slow
@pytest.mark.parametrize("stray", ["notes.txt", "date=2026-11-01/notes.txt", "mine/x.csv", "date=2026-11-09/p.csv"])
def test_generate_overwrite_deletes_nothing_of_the_users(tmp_path, capsys, stray):
    args = ["generate", "bandit", "--rows", "200", "--features", "80", "--actions", "3", "--days", "2", "--out",
            tmp_path / "g", "--no-progress"]
    assert run(capsys, tmp_path, *args)[0] == 0
    (tmp_path / "g" / stray).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "g" / stray).write_text("the user's")
    code, _, err = run(capsys, tmp_path, *args, "--overwrite")
    assert code == 2 and "which dr-scale did not write" in error_line(err) and stray.split("/")[0] in error_line(err)
    assert (tmp_path / "g" / stray).read_text() == "the user's"
    (tmp_path / "g" / stray).unlink()
    if stray.count("/") and not stray.startswith("date=2026-11-01"):
        (tmp_path / "g" / stray).parent.rmdir()  # the user's own folder, emptied
    assert run(capsys, tmp_path, *args, "--overwrite")[0] == 0


@pytest.mark.parametrize("target", ["raw-folder", "spec-file", "raw-file"])
def test_import_out_is_not_its_raw_table_or_spec(tmp_path, capsys, target):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "t.csv").write_text("item,click\na,1\nb,0\n")
    spec = tmp_path / "spec.toml"
    spec.write_text('action = "item"\nreward = "click"\n')
    out = {"raw-folder": raw, "spec-file": spec, "raw-file": raw / "t.csv"}[target]
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    code, _, err = run(capsys, tmp_path, "import", raw, "--spec", spec, "--out", out, "--no-progress")
    assert code == 2 and any(s in error_line(err) for s in ("is an input of this run", "lies inside the input"))
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


# -- (2) the leakage guard by content ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def learned(tmp_path_factory) -> tuple[Path, Path]:
    """A 300-row log of 3 parts and a policy learned on it by IPS (the command)."""
    root = tmp_path_factory.mktemp("guard-learned")
    write_log(pa.table(good_columns(300, 5)), str(root / "log"), n_parts=3, n_features=D, n_actions=K)
    assert main(["learn", str(root / "log"), "--method", "ips", "--out", str(root / "p.npz"), "--no-progress"]) == 0
    return root, root / "p.npz"


def _copy(root: Path, dest: Path) -> Path:
    shutil.copytree(root / "log", dest / "copy")
    return dest / "copy"


def _moved(root: Path, dest: Path) -> Path:
    shutil.copytree(root / "log", dest / "tmp")
    (dest / "tmp").rename(dest / "renamed")
    return dest / "renamed"


def _rewritten(root: Path, dest: Path) -> Path:
    """The rows read and written again through pandas (another part layout, another folder)."""
    frame = pq.read_table(root / "log").to_pandas()
    write_log(pa.Table.from_pandas(frame.sample(frac=1, random_state=0), preserve_index=False), str(dest / "again"),
              n_parts=2, n_features=D, n_actions=K)
    return dest / "again"


def _one_part(root: Path, dest: Path) -> Path:
    (dest / "one").mkdir()
    shutil.copy(sorted((root / "log").glob("*.parquet"))[1], dest / "one" / "part.parquet")
    return dest / "one"


def _mixed(root: Path, dest: Path) -> Path:
    """Half the training rows and as many new ones."""
    frame = pq.read_table(root / "log").to_pandas().iloc[:150]
    fresh = pa.table(good_columns(150, 99)).to_pandas()
    fresh["row_id"] += 10_000
    import pandas as pd

    write_log(pa.Table.from_pandas(pd.concat([frame, fresh]), preserve_index=False), str(dest / "mixed"),
              n_features=D, n_actions=K)
    return dest / "mixed"


PLACES = {"cp -r": _copy, "mv": _moved, "written again": _rewritten, "one part": _one_part, "half": _mixed}
WRAPPERS = ["linear:{p}", "epsilon-greedy:0.1:linear:{p}", "epsilon-greedy:0.5:linear:{p}", "softmax:{p}:1",
            "softmax:{p}:0.1", "epsilon-greedy:0.2:softmax:{p}:2"]


#: Every place with the plain policy and every wrapper on a copy run in the dev loop; the rest of the product is slow.
GUARD_CASES = [pytest.param(place, wrapper, marks=() if place == "cp -r" or wrapper == WRAPPERS[0] else slow)
               for place in PLACES for wrapper in WRAPPERS]


@pytest.mark.slow
@pytest.mark.parametrize("place,wrapper", GUARD_CASES)
def test_training_rows_are_recognised_wherever_they_are(learned, tmp_path, capsys, place, wrapper):
    root, policy = learned
    logs = PLACES[place](root, tmp_path)
    spec = wrapper.format(p=policy)
    args = ["evaluate", logs, "--policy", spec, "--estimators", "IPS", "--no-progress"]
    code, _, err = run(capsys, tmp_path, *args)
    share = "50%" if place == "half" else "100%"
    assert code == 2 and f"was learned on {share} of the rows (matched by content)" in error_line(err), err
    code, out, _ = run(capsys, tmp_path, *args, "--allow-training-overlap", "--json", tmp_path / "e.json")
    assert code == 0 and f"IN-SAMPLE: {spec} (--policy) was learned on {share} of the rows" in out
    assert json.loads((tmp_path / "e.json").read_text())["in_sample"] == {
        f"{spec} (--policy)": f"{share} of the rows (matched by content)"}


@pytest.mark.parametrize("place", ["cp -r", "written again"])
def test_a_learned_baseline_is_recognised_too(learned, tmp_path, capsys, place):
    root, policy = learned
    logs = PLACES[place](root, tmp_path)
    code, _, err = run(capsys, tmp_path, "evaluate", logs, "--policy", "uniform", "--baseline",
                       f"epsilon-greedy:0.3:linear:{policy}", "--estimators", "IPS", "--no-progress")
    assert code == 2 and "(--baseline) was learned on 100% of the rows" in error_line(err)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_other_rows_with_the_same_row_ids_are_not_in_sample(learned, tmp_path, capsys, seed):
    """Another log that reuses row ids 0 … n−1 (as every generated log does) is not the training log."""
    _, policy = learned
    write_log(pa.table(good_columns(300, 100 + seed)), str(tmp_path / "other"), n_features=D, n_actions=K)
    code, out, err = run(capsys, tmp_path, "evaluate", tmp_path / "other", "--policy", f"linear:{policy}",
                         "--estimators", "IPS", "--no-progress")
    assert code == 0 and "IN-SAMPLE" not in out, err


@slow
def test_the_report_labels_a_copy_of_the_training_rows(learned, tmp_path, capsys):
    root, policy = learned
    share = tmp_path / "share"
    shutil.copytree(root / "log", share / "date=2026-11-01")
    policies = tmp_path / "policies.toml"
    policies.write_text(f'estimators = ["IPS"]\n[[policy]]\nname = "learned"\nspec = "epsilon-greedy:0.1:linear:'
                        f'{policy}"\n')
    args = ["report", "--logs", share, "--policies", policies, "--out", tmp_path / "rep", "--no-progress"]
    code, _, err = run(capsys, tmp_path, *args)
    assert code == 2 and "policy learned was learned on 100% of the rows (matched by content)" in error_line(err)
    assert run(capsys, tmp_path, *args, "--allow-training-overlap")[0] == 0
    report = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert report["policies"][0]["label"] == "learned (in-sample)"
    assert "learned (in-sample)" in (tmp_path / "rep" / "report.html").read_text()


# -- the sketch itself --------------------------------------------------------------------------------------
@pytest.mark.parametrize("n_train,n_eval,overlap", [(100, 100, 1.0), (100, 200, 0.5), (5000, 5000, 1.0),
                                                   (20_000, 10_000, 0.5), (20_000, 20_000, 0.0)])
def test_the_in_sample_fraction_is_exact_or_sampled_within_its_error(n_train, n_eval, overlap):
    """Exact below SKETCH_SIZE distinct training rows; above, a binomial proportion over the ≈ m·|E|/|T| checked
    rows of E: within 4 standard errors."""
    rng = np.random.default_rng(n_train + n_eval)
    train = rng.integers(0, 2**63, n_train, dtype=np.int64).astype(np.uint64)
    shared = int(overlap * n_eval)
    evaluated = np.concatenate([train[:shared], rng.integers(0, 2**63, n_eval - shared, dtype=np.int64)
                                .astype(np.uint64)])
    sketch = RowSketch.of_hashes(train[: n_train // 2]) + RowSketch.of_hashes(train[n_train // 2:])
    assert sketch.rows == n_train and sketch.hashes.size == min(n_train, SKETCH_SIZE)

    checked = evaluated[evaluated <= sketch.threshold]
    matched = int(np.isin(checked, sketch.hashes).sum())
    fraction = in_sample_fraction(np.array([n_eval, checked.size, matched]))
    true = shared / n_eval
    if n_train <= SKETCH_SIZE:
        assert fraction == true
    else:
        assert fraction is not None and abs(fraction - true) <= 4 * math.sqrt(max(true * (1 - true), 1e-12)
                                                                                / checked.size) + 1e-12


def test_content_hashes_ignore_where_and_in_what_order_the_rows_are(tmp_path):
    from dr_scale.logs.reading import read_log

    write_log(pa.table(good_columns(90, 3)), str(tmp_path / "a"), n_parts=3, n_features=D, n_actions=K)
    table = pq.read_table(tmp_path / "a").take(np.random.default_rng(0).permutation(90))
    write_log(table, str(tmp_path / "b"), n_parts=2, n_features=D, n_actions=K)
    sketches = [sum((RowSketch.of(p) for p in read_log(str(tmp_path / x))), RowSketch()) for x in "ab"]
    assert sketches[0] == sketches[1] and sketches[0].rows == 90
    counts = sum(overlap_counts(p, sketches[:1]) for p in read_log(str(tmp_path / "b")))
    assert counts.tolist() == [[90, 90, 90]]
    part = read_log(str(tmp_path / "a"))[0]
    other = SimpleNamespace(row_id=part.row_id, action=part.action, reward=part.reward + 1, X=part.X)
    assert not np.isin(content_hashes(other), sketches[0].hashes).any()


@pytest.mark.parametrize("record", [None, {}, {"rows": 3}, {"rows": 2, "hashes": "!!"},
                                    {"rows": 1, "hashes": "AAAAAAAAAAABAAAAAAAAAA=="}, [1]])
def test_a_damaged_sketch_record_is_no_sketch(record):
    assert RowSketch.from_dict(record) is None
