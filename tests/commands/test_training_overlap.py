"""The leakage guard: a policy learned on days 1–5 is not evaluated or reported on them without saying so."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dr_scale.cli import main

pytestmark = pytest.mark.slow  # learn and three reports: ~15 s


@pytest.fixture(scope="module")
def learned(tmp_path_factory):
    """A 7-day generated log and a policy learned on its first five days (through the commands)."""
    root = tmp_path_factory.mktemp("overlap")
    log, policy = root / "log", root / "pol.npz"
    assert main(["generate", "bandit", "--rows", "7000", "--features", "100", "--actions", "4", "--days", "7",
                 "--out", str(log)]) == 0
    assert main(["learn", f"{log}/date=2026-11-0[1-5]", "--out", str(policy), "--no-progress"]) == 0
    return root, log, policy


DAYS = "days 2026-11-01, 2026-11-02, 2026-11-03, 2026-11-04, 2026-11-05"


def test_learn_records_what_it_read(learned):
    _, log, policy = learned
    with np.load(policy) as z:
        training = json.loads(str(z["metadata"]))["training"]
    assert training["dates"] == [f"2026-11-0{i}" for i in range(1, 6)]
    assert [p["date"] for p in training["partitions"]] == training["dates"]
    assert len(training["fingerprint"]) == 64 and training["split"] == {"seed": 0, "reward_model_folds": 2}
    assert training["log_filter"] == {}


def test_evaluate_refuses_the_training_days_names_them_and_labels_when_allowed(learned, capsys):
    root, log, policy = learned
    args = ["evaluate", str(log), "--policy", f"linear:{policy}", "--estimators", "IPS,SNIPS", "--no-progress"]
    out = root / "e.json"
    assert main([*args, "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"was learned on {DAYS} (" in err and "% of the rows read, by content) of the log read here" in err
    assert "--allow-training-overlap" in err
    assert not out.exists()
    assert main([*args, "--allow-training-overlap", "--json", str(out)]) == 0
    assert f"IN-SAMPLE: linear:{policy} (--policy) was learned on {DAYS}" in capsys.readouterr().out
    (name, days), = json.loads(out.read_text())["in_sample"].items()
    assert name == f"linear:{policy} (--policy)" and days.startswith(f"{DAYS} (")
    share = float(days.split("(")[1].split("%")[0]) / 100  # 5 of 7 equal days, measured on the sketch's sample:
    checked = 4096 * 7 / 5  # the rows read below the sketch's largest hash, about m·|E|/|T|
    assert abs(share - 5 / 7) < 4 * (5 / 7 * 2 / 7 / checked) ** 0.5 + 0.0005  # 4 s.e., and the printed rounding
    held_out = ["evaluate", f"{log}/date=2026-11-0[67]", "--policy", f"linear:{policy}", "--estimators", "IPS",
                "--no-progress", "--json", str(out)]
    assert main(held_out) == 0 and json.loads(out.read_text())["in_sample"] == {}


def test_report_refuses_the_training_days_and_labels_them_when_allowed(learned, capsys):
    root, log, policy = learned
    policies = root / "policies.toml"
    policies.write_text(f'estimators = ["IPS", "SNIPS"]\nn_actions = 4\n[[policy]]\nname = "learned"\n'
                        f'spec = "linear:{policy}"\n[[policy]]\nname = "always-3"\nspec = "constant:3"\n')
    args = ["report", "--logs", str(log), "--policies", str(policies), "--out", str(root / "rep"), "--window", "7d",
            "--no-progress"]
    assert main(args) == 2
    assert f"policy learned was learned on {DAYS}" in capsys.readouterr().err
    assert not (root / "rep" / "report.json").exists()
    assert main([*args, "--allow-training-overlap"]) == 0
    report = json.loads((root / "rep" / "report.json").read_text())
    learned_section, constant = report["policies"]
    assert learned_section["in_sample"] and learned_section["label"] == "learned (in-sample)"
    assert learned_section["warnings"][0].startswith(f"in-sample: this policy was learned on {DAYS}")
    assert not constant["in_sample"]
    assert [c["in_sample"] for c in report["comparisons"]] == [c["policy"] == "learned" or c["baseline"] == "learned"
                                                              for c in report["comparisons"]]
    for page in ("report.md", "report.html"):
        assert "learned (in-sample)" in (root / "rep" / page).read_text()
    # The held-out days alone: no overlap, no label.
    assert main([*args[:-3], "--window", "2d", "--no-progress"]) == 0
    assert not json.loads((root / "rep" / "report.json").read_text())["policies"][0]["in_sample"]


def test_the_report_job_takes_allow_training_overlap(learned, tmp_path):
    from dr_scale.report.make import run_job

    root, log, policy = learned
    policies = tmp_path / "policies.toml"
    policies.write_text(f'estimators = ["IPS"]\nn_actions = 4\n[[policy]]\nname = "learned"\n'
                        f'spec = "linear:{policy}"\n')
    job = {"job": "report", "logs": str(log), "policies": str(policies), "out": str(tmp_path / "rep")}
    with pytest.raises(ValueError, match="was learned on days 2026-11-01"):
        run_job(job)
    assert run_job({**job, "allow_training_overlap": True}) == 0


def test_the_other_half_of_a_keyed_split_is_not_in_sample(learned, capsys):
    """Learned on the train half of every day, the policy is out of sample on the test half of the same days
    (disjoint rows), and in-sample on the train half."""
    root, log, _ = learned
    policy = root / "train-half.npz"
    assert main(["learn", str(log), "--split", "train", "--out", str(policy), "--no-progress"]) == 0
    with np.load(policy) as z:
        assert json.loads(str(z["metadata"]))["training"]["log_filter"]["split"] == "train"
    args = ["evaluate", str(log), "--policy", f"linear:{policy}", "--estimators", "IPS", "--no-progress"]
    assert main([*args, "--split", "test"]) == 0
    assert "IN-SAMPLE" not in capsys.readouterr().out
    assert main([*args, "--split", "train"]) == 2
    assert "was learned on days 2026-11-01" in capsys.readouterr().err
    assert main([*args, "--split", "test", "--test-fraction", "0.3"]) == 2  # another split: rows may overlap
    capsys.readouterr()
