"""The classification experiments end to end through ``dr-scale run … --set …`` (reduced protocol)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from dr_scale.cli import main
from dr_scale.experiments.classification.reports import PAPER_TABLE2, PAPER_TABLE3

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
needs_data = pytest.mark.skipif(not (SHARED / "datasets" / "MANIFEST.json").exists(),
                                reason=f"the shared UCI data sets are not at {SHARED / 'datasets'}")
SMALL = ['datasets=["ecoli", "glass"]', f"data_dir={SHARED / 'datasets'}",
         'dlm={"n_restarts": 2, "max_iter": 30, "n_iter_no_change": 10}']


def _run(job: str, output: Path, *overrides: str) -> int:
    args = ["run", str(REPO / "pipelines" / job), "--no-progress", "--set", f"output={output}"]
    for item in (*SMALL, *overrides):
        args += ["--set", item]
    return main(args)


@pytest.mark.slow
@needs_data
def test_policy_evaluation_reduced_protocol_and_resume(tmp_path, capsys):
    assert _run("classification_eval.toml", tmp_path, "repetitions=40", "block=20") == 0
    first = capsys.readouterr()
    assert "0 task(s) already done, 4 to run" in first.err
    summary = pd.read_csv(tmp_path / "table2_summary.csv")
    assert set(summary["dataset"]) == {"ecoli", "glass"} and set(summary["repetitions"]) == {40}
    for name, group in summary.groupby("dataset"):
        by = group.set_index("estimator")
        # the measured spread of IPS and DR agrees with the exact one (chi-square, 39 dof: ratio in [0.6, 1.45])
        # and IPS and DR are unbiased: within 4 Monte-Carlo standard errors of the truth
        for est in ("IPS", "DR"):
            assert 0.6 < by.loc[est, "sd"] / by.loc[est, "sd_theory"] < 1.45, (name, est)
            assert abs(by.loc[est, "bias"]) < 4 * by.loc[est, "bias_se"], (name, est)
        assert by.loc["DM", "sd"] == pytest.approx(0, abs=1e-12)  # DM does not depend on the logged actions
    report = json.loads((tmp_path / "table2.json").read_text())
    assert set(report["checks"]) == {"dm_bias_far_above", "ips_dr_unbiased", "dr_rmse_le_ips"}
    assert report["meta"]["tasks_run"] == 4
    markdown = (tmp_path / "table2.md").read_text()
    assert "| bias (DM) |" in markdown and "(0.129)" in markdown  # the paper's ecoli DM bias beside ours
    assert (tmp_path / "table2.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # resume: nothing recomputed, identical numbers; more repetitions only add tasks
    assert _run("classification_eval.toml", tmp_path, "repetitions=40", "block=20") == 0
    assert "4 task(s) already done, 0 to run" in capsys.readouterr().err
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "table2_summary.csv"), summary)
    assert _run("classification_eval.toml", tmp_path, "repetitions=60", "block=20") == 0
    assert "4 task(s) already done, 2 to run" in capsys.readouterr().err


@pytest.mark.slow
@needs_data
def test_policy_optimization_reduced_protocol(tmp_path, capsys):
    assert _run("classification_opt.toml", tmp_path, "repetitions=2") == 0
    assert "0 task(s) already done, 4 to run" in capsys.readouterr().err
    table = pd.read_csv(tmp_path / "table3.csv")
    assert len(table) == 2 * 5
    assert table["measured"].between(0, 1).all()
    assert set(table["row"]) == set(PAPER_TABLE3)
    wide = table.pivot(index="dataset", columns="row", values="measured")
    assert (wide["DR (FT)"] < wide["IPS (FT)"]).all()  # the paper's clearest effect, visible with 2 repetitions
    assert (tmp_path / "table3.png").exists() and (tmp_path / "table3.md").exists()


def test_unknown_dataset_is_a_clear_error(tmp_path, capsys):
    assert main(["run", str(REPO / "pipelines" / "classification_opt.toml"), "--set", f"output={tmp_path}",
                 "--set", 'datasets=["iris"]']) == 2
    assert "unknown data set(s) iris" in capsys.readouterr().err


@pytest.mark.skipif(not list((SHARED / "paper").glob("*.tex")), reason="the paper's LaTeX source is not available")
def test_paper_tables_are_transcribed_from_the_source():
    tex = next((SHARED / "paper").glob("*.tex")).read_text()
    for label, table in (("tbl:class-eval", PAPER_TABLE2), ("tbl:class-opt", PAPER_TABLE3)):
        block = tex[:tex.index(f"\\label{{{label}}}")]
        block = block[block.rindex("\\begin{tabular}"):]
        for row, values in table.items():
            line = next(ln for ln in block.splitlines() if ln.strip().startswith(row))
            numbers = [float(x) for x in re.findall(r"\$([0-9.]+)\$", line)]
            assert numbers == list(values.values()), row
