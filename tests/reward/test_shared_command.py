"""The shared reward model from the command line: fit --model shared writes it (kind "shared"), every loader of a
reward-model file reads it, evaluate/report/learn use it."""

from __future__ import annotations

import numpy as np
import pytest

from dr_scale import Evaluation, evaluate_log
from dr_scale.reward.files import load_reward_model
from dr_scale.reward.models import LinearRewardModel, LogisticRewardModel
from dr_scale.reward.shared import SharedRidgeRewardModel, fit_shared_from_log
from dr_scale.synthetic.item_world import generate_item_bandit
from tests.conftest import cli, error_line


@pytest.fixture(scope="module")
def item_log(tmp_path_factory):
    folder = tmp_path_factory.mktemp("items") / "log"
    generate_item_bandit(str(folder), rows=2000, rows_per_part=1000, seed=8, features=200, actions=500,
                         action_features=4, embedding_categories=10)
    return folder


@pytest.fixture(scope="module")
def shared_file(item_log, tmp_path_factory):
    out = tmp_path_factory.mktemp("model") / "shared.npz"
    from dr_scale.cli import main

    assert main(["fit", str(item_log), "--model", "shared-ridge", "--lam", "100", "--rtol", "1e-8", "--out", str(out),
                 "--no-progress"]) == 0
    return out


@pytest.mark.slow
def test_fit_writes_the_shared_kind_and_the_loader_dispatches(item_log, shared_file):
    with np.load(shared_file) as z:
        assert str(z["kind"]) == "shared"
    model = load_reward_model(str(shared_file))
    assert isinstance(model, SharedRidgeRewardModel) and model.n_actions == 500 and model.n_features == 200
    direct = fit_shared_from_log(str(item_log), lam=100.0)
    X = np.eye(200)[:5]
    assert np.array_equal(model.predict(X), direct.predict(X))
    with pytest.raises(Exception, match="holds a shared reward model .*, not a logistic reward model"):
        LogisticRewardModel.load(str(shared_file))
    with pytest.raises(Exception, match="holds a shared reward model .*, not a linear .ridge. reward model"):
        LinearRewardModel.load(str(shared_file))  # a linear model's loader reads linear files only


def test_evaluate_with_the_shared_model_file(item_log, shared_file, tmp_path, capsys):
    code, out, err = cli(capsys, "evaluate", item_log, "--policy", "sparse:target_topk", "--reward-model",
                         shared_file, "--estimators", "DM,DR,MIPS", "--json", tmp_path / "r.json", "--no-progress")
    assert code == 0, err
    import json

    got = json.loads((tmp_path / "r.json").read_text())["estimates"]
    model = SharedRidgeRewardModel.load(str(shared_file))
    expected = evaluate_log(str(item_log), Evaluation("sparse:target_topk", ["DM", "DR"], reward_model=model))
    for name in ("DM", "DR"):
        assert got[name]["value"] == pytest.approx(expected.estimates[name].value, rel=1e-12)


@pytest.mark.slow
def test_report_and_learn_read_the_shared_model(item_log, shared_file, tmp_path, capsys):
    policies = tmp_path / "policies.toml"
    policies.write_text(f'reward_model = "{shared_file}"\nestimators = ["DR", "MIPS"]\n'
                        '[[policy]]\nname = "target"\nspec = "sparse:target_topk"\n')
    code, _, err = cli(capsys, "report", "--logs", item_log, "--policies", policies, "--out", tmp_path / "rep",
                       "--no-progress")
    assert code in (0, 4), err
    code, out, err = cli(capsys, "learn", item_log, "--learner", "scorer", "--reward-model", shared_file,
                         "--out", tmp_path / "scorer.npz", "--no-progress")
    assert code == 0, err
    from dr_scale.policies import ItemScorerPolicy

    assert ItemScorerPolicy.load(str(tmp_path / "scorer.npz")).metadata["reward_model"]["lam"] == 100.0


@pytest.mark.slow
def test_fit_shared_refuses_bad_input_in_one_line(item_log, tmp_path, capsys):
    out = tmp_path / "m.npz"
    code, _, err = cli(capsys, "fit", item_log, "--model", "shared", "--folds", 0, "--out", out, "--no-progress")
    assert code == 2 and "--folds" in err and not out.exists()
    code, _, err = cli(capsys, "fit", item_log, "--model", "shared-logistic", "--out", out, "--no-progress")
    assert code == 0, err  # the item world's rewards are 0/1
    from dr_scale.synthetic.bandit import generate_bandit

    generate_bandit(str(tmp_path / "plain"), rows=100, features=100, actions=3)
    code, _, err = cli(capsys, "fit", tmp_path / "plain", "--model", "shared", "--out", tmp_path / "n.npz",
                       "--no-progress")
    assert code == 2 and "no action catalogue" in error_line(err) and not (tmp_path / "n.npz").exists()
    code, _, err = cli(capsys, "evaluate", item_log, "--fit-reward-model", "--model", "shared", "--no-progress")
    assert code == 2 and "--model" in err  # evaluate fits per-action models only


@pytest.mark.slow
def test_fit_shared_with_folds_and_lam_auto_cross_fits(item_log, tmp_path, capsys):
    out = tmp_path / "m.npz"
    code, printed, err = cli(capsys, "fit", item_log, "--model", "shared", "--folds", 2, "--out", out,
                             "--no-progress")
    assert code == 0, err
    assert "model: shared logistic (every reward is 0 or 1)" in printed and "(auto)" in printed
    model = load_reward_model(str(out))
    assert model.folds == 2 and model.metadata["lam"] in model.metadata["lambda_search"]["grid"]
    p = model.predict(np.eye(200)[:5])
    assert p.min() > 0 and p.max() < 1


def test_a_shared_model_on_a_log_of_another_catalogue_is_refused(shared_file, tmp_path, capsys):
    other = tmp_path / "other"
    generate_item_bandit(str(other), rows=500, seed=9, features=200, actions=500, action_features=4,
                         embedding_categories=10)
    code, _, err = cli(capsys, "evaluate", other, "--policy", "sparse:target_topk", "--reward-model", shared_file,
                       "--estimators", "DR", "--no-progress")
    assert code == 2 and "another action catalogue" in error_line(err) and "other values" in error_line(err)
    code, _, err = cli(capsys, "learn", other, "--learner", "scorer", "--reward-model", shared_file, "--out",
                       tmp_path / "p.npz", "--no-progress")
    assert code == 2 and "another action catalogue" in error_line(err) and not (tmp_path / "p.npz").exists()
    policies = tmp_path / "policies.toml"
    policies.write_text(f'reward_model = "{shared_file}"\nestimators = ["DR"]\n'
                        '[[policy]]\nname = "target"\nspec = "sparse:target_topk"\n')
    code, _, err = cli(capsys, "report", "--logs", other, "--policies", policies, "--out", tmp_path / "rep",
                       "--no-progress")
    assert code == 2 and "another action catalogue" in error_line(err)


@pytest.mark.slow
def test_evaluate_predicts_each_row_by_the_fold_model_that_did_not_see_it(item_log, tmp_path, capsys):
    out = tmp_path / "folded.npz"
    code, _, err = cli(capsys, "fit", item_log, "--model", "shared-ridge", "--folds", 3, "--lam", 10, "--out", out,
                       "--no-progress")
    assert code == 0, err
    model = SharedRidgeRewardModel.load(str(out))
    from dr_scale.logs.reading import read_log
    from dr_scale.policies import parse_policy

    policy = parse_policy("sparse:target_topk")
    by_fold, by_full = [], []
    for part in read_log(str(item_log), extra_columns=["target_topk"]):
        chosen = policy.distribution(part, model.n_actions)
        by_fold.append((chosen.probs * model.predict_pairs(part.X, chosen.actions, row_id=part.row_id)).sum(axis=1))
        by_full.append((chosen.probs * model.predict_pairs(part.X, chosen.actions)).sum(axis=1))
    result = evaluate_log(str(item_log), Evaluation("sparse:target_topk", ["DM"], reward_model=model))
    assert result.estimates["DM"].value == pytest.approx(np.concatenate(by_fold).mean(), rel=1e-12)
    assert abs(np.concatenate(by_fold).mean() - np.concatenate(by_full).mean()) > 1e-9
