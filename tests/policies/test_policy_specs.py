"""Policy specs teams compare: uniform, epsilon-greedy, logging, constant and topk by the action's value."""

import json
import shutil

import numpy as np
import pytest

from dr_scale.core.errors import UserError
from dr_scale.logs.listing import SPEC_FILE, action_vocabulary
from dr_scale.logs.reading import read_log
from dr_scale.logs.writing import write_log
from dr_scale.ope.estimators import make_estimators
from dr_scale.ope.evaluation import Evaluation, evaluate_log
from dr_scale.policies import (
    ConstantPolicy,
    EpsilonGreedyPolicy,
    LoggingPolicy,
    TopKPolicy,
    UniformPolicy,
    parse_policy,
)
from dr_scale.reward.models import LinearRewardModel
from dr_scale.synthetic.example import N_ACTIONS, example_paths

LOGS, MODEL = example_paths()
ACTIONS = ["news", "sports", "weather"]  # N_ACTIONS = 3


@pytest.fixture(scope="module")
def arrays():
    parts = read_log(LOGS, extra_columns=["target_action"])
    return {name: np.concatenate([getattr(p, name) for p in parts]) for name in ("action", "reward", "propensity")}


@pytest.fixture
def named_log(tmp_path):
    """The bundled log (date partitions) with an action vocabulary at its root."""
    shutil.copytree(LOGS, tmp_path / "logs")
    (tmp_path / "logs" / SPEC_FILE).write_text(json.dumps({"action": {"values": ACTIONS}}))
    return str(tmp_path / "logs")


def ips(spec, url=LOGS, **kwargs):
    return evaluate_log(url, Evaluation(spec, make_estimators(["IPS", "SNIPS"]), **kwargs)).estimates["IPS"].value


def test_parse_the_new_specs():
    assert isinstance(parse_policy("uniform"), UniformPolicy)
    assert isinstance(parse_policy("logging"), LoggingPolicy)
    eg = parse_policy("epsilon-greedy:0.1:constant:2")
    assert isinstance(eg, EpsilonGreedyPolicy) and eg.epsilon == 0.1 and eg.policy == ConstantPolicy(2, "2")
    assert str(eg) == "epsilon-greedy:0.1:constant:2"
    assert parse_policy("topk:news,#2").items == ("news", "#2")
    assert str(parse_policy("constant:3")) == "constant:3"


@pytest.mark.parametrize("spec, words", [
    ("epsilon-greedy:1.5:uniform", "ε must be a number in [0, 1]"),
    ("epsilon-greedy:x:uniform", "ε of epsilon-greedy:EPS:POLICY must be a number"),
    ("epsilon-greedy:0.1:logging", "the logging policy's probabilities"),
    ("topk:a,a", "listed twice"),
    ("constant:-1", "bad policy"),
])
def test_bad_specs_are_one_clear_error(spec, words):
    with pytest.raises(UserError, match=words.replace("[", r"\[").replace("]", r"\]")):
        parse_policy(spec)


def test_uniform_and_epsilon_greedy_are_their_formulas(arrays):
    r, a, p = arrays["reward"], arrays["action"], arrays["propensity"]
    assert ips("uniform") == pytest.approx(np.mean(r / (N_ACTIONS * p)), rel=1e-12)
    eps = 0.3  # π_ε(a|x) = ε/k + (1 − ε) 1{a = 2}
    expected = np.mean(r * (eps / N_ACTIONS + (1 - eps) * (a == 2)) / p)
    assert ips("epsilon-greedy:0.3:constant:2") == pytest.approx(expected, rel=1e-12)
    assert ips("epsilon-greedy:0:constant:2") == pytest.approx(ips("constant:2"), rel=1e-12)
    assert ips("epsilon-greedy:1:constant:2") == pytest.approx(ips("uniform"), rel=1e-12)


def test_uniform_needs_the_number_of_actions(tmp_path, example):
    table, _, _ = example
    write_log(table.slice(0, 200), str(tmp_path / "nok"))  # no n_actions metadata
    with pytest.raises(UserError, match="policy uniform needs the number of actions k"):
        ips("uniform", str(tmp_path / "nok"))
    assert np.isfinite(ips("uniform", str(tmp_path / "nok"), n_actions=N_ACTIONS))


def test_the_logging_policy_is_valued_at_the_mean_reward(arrays):
    """π = π₀: weights 1, so IPS, SNIPS and DR equal the mean logged reward."""
    model = LinearRewardModel.load(MODEL)
    result = evaluate_log(LOGS, Evaluation("logging", make_estimators(["IPS", "SNIPS", "DR", "DM"]),
                                           reward_model=model))
    mean = arrays["reward"].mean()
    for name in ("IPS", "SNIPS", "DR"):
        assert result.estimates[name].value == pytest.approx(mean, rel=1e-12, abs=1e-15), name
    assert result.weights.max_w == 1 and result.weights.ess == pytest.approx(len(arrays["reward"]))
    parts = read_log(LOGS)  # DM: the model at the logged actions, (1/n) Σ_i ρ̂_{a_i}(x_i)
    at_logged = np.concatenate([model.predict(q.X)[np.arange(len(q)), q.action] for q in parts])
    assert result.estimates["DM"].value == pytest.approx(at_logged.mean(), rel=1e-12)


def test_constant_and_topk_by_the_actions_own_value(named_log, arrays):
    assert action_vocabulary(named_log) == ACTIONS
    assert action_vocabulary(named_log + "/date=2026-11-0*/part-00000.parquet") == ACTIONS
    assert ips("constant:sports", named_log) == ips("constant:#1", named_log) == ips("constant:1", LOGS)
    r, a, p = arrays["reward"], arrays["action"], arrays["propensity"]
    expected = np.mean(r * np.isin(a, [0, 2]) / (2 * p))  # uniform over {news, weather}
    assert ips("topk:news,weather", named_log) == pytest.approx(expected, rel=1e-12)
    assert ips("topk:#0,#2", named_log) == pytest.approx(expected, rel=1e-12)
    assert ips("topk:0,2", LOGS) == pytest.approx(expected, rel=1e-12)  # ids, on a log without a vocabulary
    result = evaluate_log(named_log, Evaluation("constant:weather"))
    assert result.policy == "constant:weather (#2)"


def test_an_unknown_value_or_a_value_without_a_vocabulary_is_an_error(named_log):
    with pytest.raises(UserError, match=r"'music' is not one of the log's 3 actions \(news, sports, weather\)"):
        ips("constant:music", named_log)
    with pytest.raises(UserError, match=r"'1' is not one of the log's 3 actions.*#N"):
        ips("constant:1", named_log)  # on a log with a vocabulary, an action is named by value (or #id)
    with pytest.raises(UserError, match=f"names an action by value, but the log has no action vocabulary "
                                        f"\\({SPEC_FILE}"):
        ips("topk:news,sports", LOGS)


def test_a_vocabulary_that_disagrees_with_the_metadata_or_repeats_a_value(named_log, tmp_path):
    (tmp_path / "logs" / SPEC_FILE).write_text(json.dumps({"action": {"values": ["a", "b"]}}))
    with pytest.raises(UserError, match="metadata says 3 actions, its vocabulary"):
        ips("constant:a", named_log)
    (tmp_path / "logs" / SPEC_FILE).write_text(json.dumps({"action": {"values": ["a", "b", "a"]}}))
    with pytest.raises(UserError, match="'action.values' names 'a' twice"):
        action_vocabulary(named_log)


def test_topk_of_one_action_is_the_constant_policy():
    assert TopKPolicy(("#1",)).resolve(None).ids == (1,)
    assert ips("topk:#1") == ips("constant:1")
