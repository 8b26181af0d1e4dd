"""The slate world: its true values by enumeration, its log, and `generate slates` + `evaluate` over a slate log."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pyarrow as pa
import pytest

from dr_scale.logs.writing import write_log
from dr_scale.ope.estimators import SlateRewardInteractionIPS, SlateStandardIPS
from dr_scale.ope.estimators.slate import SlateInputs
from dr_scale.policies.slates import SlateProbabilities, save_slate_policy
from dr_scale.synthetic.slates import SlateWorld, slate_table
from tests.conftest import cli, error_line

SMALL = SlateWorld(users=3, items=5, slots=3, interaction=0.7, seed=2)


@pytest.mark.parametrize("name", ["logging", "factored", "plackett-luce", "top-k"])
def test_true_value_is_the_sum_over_every_slate(name):
    policy = SMALL.policies()[name]
    slates = np.array(list(itertools.product(range(SMALL.items), repeat=SMALL.slots)))
    total = 0.0
    for user in range(SMALL.users):
        users = np.full(len(slates), user)
        probability = policy.probabilities(slates, users).slate
        assert probability.sum() == pytest.approx(1.0, abs=1e-12)  # a distribution over slates
        total += probability @ SMALL.expected_reward(users, slates)
    value, stderr = SMALL.truth(policy)
    assert stderr == 0.0
    assert value == pytest.approx(total / SMALL.users, rel=1e-12)


def test_the_log_follows_the_world():
    draw = SMALL.sample(0, 20_000)
    np.testing.assert_allclose(draw["propensity"], SMALL.logging.probabilities(draw["slates"], draw["users"]).marginal)
    totals = draw["clicks"].sum(axis=1)
    truth, _ = SMALL.truth(SMALL.logging)
    assert abs(totals.mean() - truth) < 4 * totals.std() / np.sqrt(totals.size)  # CLT, 4 standard errors
    # γ = 0.7: a click ends the browsing 70% of the time, so later clicks are rarer after one
    after = draw["clicks"][:, 1][draw["clicks"][:, 0] == 1].mean()
    without = draw["clicks"][:, 1][draw["clicks"][:, 0] == 0].mean()
    assert after < without
    assert SMALL.sample(100, 50)["clicks"].tolist() == [row.tolist() for row in draw["clicks"][100:150]]  # keyed


def test_rips_and_standard_ips_cover_the_truth_on_a_generated_log():
    draw = SMALL.sample(0, 20_000)
    target = SMALL.policies()["plackett-luce"]
    rows = SlateInputs.from_probabilities(draw["clicks"], target.probabilities(draw["slates"], draw["users"]),
                                          SlateProbabilities.factored(draw["propensity"]))
    truth, _ = SMALL.truth(target)
    for estimator in (SlateStandardIPS(), SlateRewardInteractionIPS()):
        est = estimator.estimate(rows=rows)
        assert abs(est.value - truth) < 4 * est.stderr  # unbiased under the cascade: 4 standard errors


def test_generate_and_evaluate_a_slate_log(tmp_path, capsys):
    out = tmp_path / "slates"
    code, stdout, _ = cli(capsys, "generate", "slates", "--impressions", 1500, "--items", 10, "--slots", 3,
                          "--impressions-per-part", 500, "--out", out)
    assert code == 0
    truth = json.loads((out / "_manifest.json").read_text())["truth"]
    assert f"true value, factored       {truth['factored']['value']:.6f}" in stdout
    code, stdout, _ = cli(capsys, "evaluate", out, "--policy", f"slate:{out}/_policy_logging.npz", "--estimators",
                          "SlateIPS,SlateRIPS,SlatePI", "--no-progress", "--json", tmp_path / "r.json")
    assert code == 0
    result = json.loads((tmp_path / "r.json").read_text())["estimates"]
    assert result["SlateIPS"]["impressions"] == 1500
    # π = μ: every weight is 1 and every estimator is the on-policy mean
    for name in ("SlateIPS", "SlateRIPS", "SlatePI"):
        assert result[name]["value"] == pytest.approx(result["logging"]["value"], rel=1e-12)


def test_an_impression_split_over_two_parts_is_refused(tmp_path, capsys):
    policy = tmp_path / "p.npz"
    save_slate_policy(SMALL.logging, str(policy))
    write_log(slate_table(SMALL, 0, 5), str(tmp_path / "cut"), n_parts=2)  # 15 rows: impression 2 cut in two
    code, _, err = cli(capsys, "evaluate", tmp_path / "cut", "--policy", f"slate:{policy}", "--estimators",
                       "SlateIPS", "--no-progress")
    assert code == 2
    assert "impression 2 does not show slots 0 … 2 once each" in error_line(err)
    table = slate_table(SMALL, 0, 5)
    again = table.set_column(0, "row_id", pa.array(table.column("row_id").to_numpy() + 100))
    write_log(pa.concat_tables([table, again]), str(tmp_path / "twice"), n_parts=2)  # impressions 0-4 in both parts
    code, _, err = cli(capsys, "evaluate", tmp_path / "twice", "--policy", f"slate:{policy}", "--estimators",
                       "SlateIPS", "--no-progress")
    assert code == 2
    assert "column 'impression': impression 0 has rows in two parts" in error_line(err)
    code, _, err = cli(capsys, "evaluate", tmp_path / "log", "--policy", f"slate:{policy}", "--estimators",
                       "SlateIPS,DR", "--no-progress")
    assert code == 2 and "DR estimate(s) single decisions" in error_line(err)


def test_a_log_without_slots_or_a_missing_policy_file_is_one_line(tmp_path, capsys):
    write_log(slate_table(SMALL, 0, 5).drop_columns(["slot", "impression"]), str(tmp_path / "flat"))
    policy = tmp_path / "p.npz"
    save_slate_policy(SMALL.logging, str(policy))
    code, _, err = cli(capsys, "evaluate", tmp_path / "flat", "--policy", f"slate:{policy}", "--estimators",
                       "SlateRIPS", "--no-progress")
    assert code == 2 and "column 'slot': a slate estimator needs the `slot` and `impression` columns" in err
    code, _, err = cli(capsys, "evaluate", tmp_path / "flat", "--policy", f"slate:{tmp_path}/none.npz",
                       "--estimators", "SlateRIPS", "--no-progress")
    assert code == 2 and "not a slate policy file" in error_line(err)
