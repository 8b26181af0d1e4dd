"""obp's estimators that do not read the logging propensity: the replay method (RM) and balanced IPW (BIPW).

Each equals Open Bandit Pipeline 0.5.7's ``estimate_policy_value`` on ``benchmarks/obp_equality.py``'s
configurations (tests/ope/test_shrinkage_estimators.py runs them all); here: states merged over any split equal
the whole's, every interval holds its estimate, the standard error matches the spread over seeded logs, RM is
unbiased under uniform logging, the specs parse in every command and the policies file.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import cli, error_line
from test_shrinkage_estimators import _assert_states_equal, assert_intervals_hold, obp_equality

from dr_scale.ope.estimators import SNIPS, BalancedIPW, Difference, OnPolicy, ReplayMethod, RowInputs, parse_estimator
from dr_scale.ope.moments import Moments
from dr_scale.report.policies_file import parse_policies


def _arrays(n, k, seed, deterministic_share=0.5):
    """A log whose target is one-hot on a share of the rows (RM counts those) and estimated weights ŵ = w e^ε."""
    rng = np.random.default_rng(seed)
    logging = rng.dirichlet(np.full(k, 2.0), size=n)
    action = (rng.random(n)[:, None] >= np.cumsum(logging, axis=1)).sum(axis=1).clip(max=k - 1)
    target = rng.dirichlet(np.ones(k), size=n)
    one_hot = rng.random(n) < deterministic_share
    target[one_hot] = np.eye(k)[rng.integers(0, k, one_hot.sum())]
    mu = rng.uniform(0.1, 0.9, size=(n, k))
    reward = (rng.random(n) < mu[np.arange(n), action]).astype(float)
    propensity = logging[np.arange(n), action]
    weight = target[np.arange(n), action] / propensity
    return dict(reward=reward, action=action, propensity=propensity, target_probs=target,
                estimated_importance_weights=weight * np.exp(rng.normal(0, 0.3, n)))


def _rows(log):
    rows = RowInputs.from_arrays(log["reward"], log["action"], log["propensity"], log["target_probs"])
    return RowInputs(rows.reward, rows.weight, target_prob=rows.target_prob,
                     importance_weight=log["estimated_importance_weights"])


def _pieces(rows, cuts):
    return [RowInputs(rows.reward[a:b], rows.weight[a:b], target_prob=rows.target_prob[a:b],
                      importance_weight=rows.importance_weight[a:b]) for a, b in zip(cuts, cuts[1:], strict=False)]


ESTIMATORS = [ReplayMethod(), BalancedIPW(), BalancedIPW(lambda_=3.0)]


# -- the formulas, and obp's ---------------------------------------------------------------------------------------
def test_replay_is_the_mean_reward_where_the_policy_takes_the_logged_action_for_sure():
    log = _arrays(2000, 4, seed=1)
    matched = log["target_probs"][np.arange(2000), log["action"]] == 1
    assert 100 < matched.sum() < 1900
    est = ReplayMethod().estimate(**{k: v for k, v in log.items() if k != "estimated_importance_weights"})
    assert est.value == pytest.approx(log["reward"][matched].mean(), rel=1e-12)
    # its delta-method standard error is that of the matched rows' mean, with the match count random
    p, r = matched.mean(), log["reward"][matched]
    assert est.stderr == pytest.approx(math.sqrt(r.var() / (p * 1999)), rel=1e-9)  # the covariance: 1 / (n − 1)


def test_replay_without_a_matching_row_is_undefined():
    log = _arrays(50, 3, seed=2, deterministic_share=0.0)  # a stochastic π never gives probability 1
    del log["estimated_importance_weights"]
    est = ReplayMethod().estimate(**log)
    assert math.isnan(est.value) and est.n == 50


def test_balanced_ipw_is_a_ratio_of_the_clipped_given_weights():
    log = _arrays(1500, 5, seed=3)
    w = log["estimated_importance_weights"]
    for lam in (math.inf, 3.0, 0.5):
        wc = np.minimum(w, lam)
        est = BalancedIPW(lambda_=lam).estimate(**log)
        assert est.value == pytest.approx((wc * log["reward"]).sum() / wc.sum(), rel=1e-12)
    # with the true weights it is SNIPS
    true = dict(log, estimated_importance_weights=_rows(log).weight)
    snips = SNIPS().estimate(**{k: v for k, v in log.items() if k != "estimated_importance_weights"})
    both = BalancedIPW().estimate(**true)
    assert both.value == pytest.approx(snips.value, rel=1e-12)
    assert both.stderr == pytest.approx(snips.stderr, rel=1e-9)
    assert both.ci(0.05, "el") == pytest.approx(snips.ci(0.05, "el"), rel=1e-9)


@pytest.mark.parametrize("bad, message", [
    (dict(estimated_importance_weights=[1.0, -1.0, 1.0]), r"estimated_importance_weights must be non-negative"),
    (dict(estimated_importance_weights=[1.0, 1.0]), r"estimated_importance_weights has 2 rows, reward has 3"),
    (dict(action=[0, 1, 5]), r"action"),
])
def test_balanced_ipw_refuses_bad_arrays_naming_them(bad, message):
    arrays = dict(reward=[1.0, 0.0, 1.0], action=[0, 1, 1], target_probs=[[1.0, 0.0]] * 3,
                  estimated_importance_weights=[1.0, 2.0, 1.0])
    with pytest.raises(ValueError, match=message):
        BalancedIPW().estimate(**{**arrays, **bad})


@pytest.mark.slow  # imports obp
def test_equal_to_obp_on_a_few_configurations():
    module = obp_equality()
    configs = module.configurations()[::8]
    rows = [row for config in configs for row in module.compare_without_propensities(
        config, module.make_arrays(**{key: config[key] for key in ("n", "k", "heavy", "gaussian", "deterministic",
                                                                      "seed")}))]
    assert len(rows) == 3 * len(configs)
    for row in rows:
        assert row["difference"] <= 1e-12, row


# -- one pass, any partitioning ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("estimator", ESTIMATORS, ids=repr)
def test_merged_states_equal_the_whole(estimator):
    rows = _rows(_arrays(3000, 5, seed=7))
    whole_state = estimator.state(rows)
    whole = estimator.result(whole_state)
    for cuts in ([0, 17, 1100, 1101, 2500, 3000], [0, 1, 2, 3, 1500, 3000], [0, 999, 2000, 3000]):
        states = [estimator.state(p) for p in _pieces(rows, cuts)]
        merged = Moments.empty(whole_state.m, 2)
        for i in np.random.default_rng(len(cuts)).permutation(len(states)):
            merged = states[i] + merged
        _assert_states_equal(merged, whole_state)
        result = estimator.result(merged)
        assert result.value == pytest.approx(whole.value, rel=1e-12)
        assert result.stderr == pytest.approx(whole.stderr, rel=1e-10)
        for method in ("normal", "el"):
            np.testing.assert_allclose(result.ci(0.05, method), whole.ci(0.05, method), rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("seed", range(4))
def test_every_interval_holds_its_estimate(seed):
    rows = _rows(_arrays([40, 300, 2000, 5000][seed], [2, 8][seed % 2], seed=seed))
    for estimator in ESTIMATORS:
        assert_intervals_hold(estimator, estimator.result(estimator.state(rows)))
        diff = Difference(estimator, OnPolicy())
        d = diff.result(diff.state(rows, rows))
        assert d.ci(0.05)[0] <= d.value <= d.ci(0.05)[1]


# -- statistics on a world with known truth ----------------------------------------------------------------------------
def _world(reps, n, k, seed):
    """R logs of one world of 50 contexts; the true value of a deterministic π."""
    rng = np.random.default_rng(seed)
    mu = rng.uniform(0.1, 0.9, size=(50, k))
    pi = rng.integers(0, k, 50)
    truth = mu[np.arange(50), pi].mean()
    for _ in range(reps):
        x = rng.integers(0, 50, n)
        a = rng.integers(0, k, n)  # uniform logging: RM's assumption
        r = (rng.random(n) < mu[x, a]).astype(float)
        yield truth, dict(reward=r, action=a, propensity=np.full(n, 1 / k), target_probs=np.eye(k)[pi[x]])


def test_replay_is_unbiased_under_uniform_logging_and_its_standard_error_matches_the_spread():
    """Over R logs: the mean of V̂ is within 3 of its standard errors of the truth, and the empirical variance of
    V̂ equals the mean squared standard error within 3 standard deviations of their difference (from the
    replicates' own fourth moments) — and one 25% too large or small would be detected."""
    reps = 400
    values, variances, truths = np.empty(reps), np.empty(reps), set()
    for i, (truth, log) in enumerate(_world(reps, 600, 4, seed=11)):
        e = ReplayMethod().estimate(**log)
        values[i], variances[i] = e.value, e.stderr ** 2
        truths.add(truth)
    (truth,) = truths
    assert abs(values.mean() - truth) <= 3 * values.std(ddof=1) / math.sqrt(reps)
    centred = values - values.mean()
    var_emp = centred @ centred / (reps - 1)
    sd_var_emp = math.sqrt(max(np.mean(centred ** 4) - var_emp ** 2 * (reps - 3) / (reps - 1), 0.0) / reps)
    sd = math.hypot(sd_var_emp, variances.std(ddof=1) / math.sqrt(reps))
    assert abs(var_emp - variances.mean()) <= 3 * sd, (var_emp, variances.mean(), sd)
    assert min(abs(var_emp - 1.25 ** 2 * variances.mean()), abs(var_emp - variances.mean() / 1.25 ** 2)) > 3 * sd


# -- specs in every command ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec, label, estimator", [
    ("RM", "RM", ReplayMethod()),
    ("BIPW", "BIPW", BalancedIPW()),
    ("BIPW(lambda_=inf)", "BIPW", BalancedIPW()),
    ("BIPW(lambda_=20)", "BIPW(lambda_=20.0)", BalancedIPW(lambda_=20.0)),
    ({"name": "BIPW", "lambda_": 5}, "BIPW(lambda_=5.0)", BalancedIPW(lambda_=5.0)),
])
def test_specs_and_labels_that_parse_back(spec, label, estimator):
    assert parse_estimator(spec) == (label, estimator)
    assert parse_estimator(label)[1] == estimator


@pytest.mark.parametrize("spec, message", [
    ("RM(lambda_=3)", r"'RM\(lambda_=3\)': RM has no parameter lambda_; it takes none"),
    ("BIPW(lambda_=-1)", r"'BIPW\(lambda_=-1\)': lambda_ should be greater than or equal to 0 .*write e.g. BIPW or "
                         r"BIPW\(lambda_=50\)"),
    ("BIPW(tau=1)", r"BIPW has no parameter tau; it takes lambda_"),
])
def test_bad_specs_name_the_spec_and_the_accepted_forms(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_estimator(spec)


def test_policies_file_takes_them():
    data = {"policy": [{"name": "c", "spec": "constant:0"}], "estimators": ["RM", {"name": "BIPW", "lambda_": 20}]}
    assert parse_policies(data, "p.toml").estimators == ["RM", "BIPW(lambda_=20.0)"]


def test_evaluate_command_with_the_replay_method(tmp_path, capsys):
    out = tmp_path / "r.json"
    code, printed, _ = cli(capsys, "evaluate", "--estimators", "RM,SNIPS", "--baseline", "logging", "--interval",
                           "el", "--json", out, "--no-progress")
    assert code == 0
    data = json.loads(out.read_text())
    assert list(data["estimates"]) == ["RM", "SNIPS"]
    rm = data["estimates"]["RM"]
    assert rm["ci"][0] <= rm["value"] <= rm["ci"][1] and rm["stderr"] > 0
    assert set(data["difference"]) - {"interval"} == {"RM", "SNIPS"}
    code, _, err = cli(capsys, "evaluate", "--estimators", "RM(lambda_=1)", "--no-progress")
    assert code == 2 and "RM has no parameter lambda_" in error_line(err)


# -- BIPW's weights as a log column ------------------------------------------------------------------------------------
def _log_with_weights(example, tmp_path, n_parts):
    """The example log in ``n_parts`` parts with a column importance_weight: the target's weights times e^ε."""
    import pyarrow as pa

    from dr_scale.logs.writing import write_log
    from dr_scale.synthetic.example import N_ACTIONS, N_FEATURES

    table, _, _ = example
    action, target = table.column("action").to_numpy(), table.column("target_action").to_numpy()
    w = (action == target) / table.column("propensity").to_numpy()
    w = w * np.exp(np.random.default_rng(3).normal(0, 0.3, w.size))
    table = table.append_column("importance_weight", pa.array(w))
    url = str(tmp_path / f"log{n_parts}")
    write_log(table, url, n_parts=n_parts, n_features=N_FEATURES, n_actions=N_ACTIONS)
    return url, table, w


def test_bipw_and_rm_on_a_log_in_parts_equal_the_arrays(example, tmp_path):
    from dr_scale.ope.evaluation import Evaluation, evaluate_log
    from dr_scale.synthetic.example import N_ACTIONS

    estimators = {"RM": ReplayMethod(), "BIPW": BalancedIPW(), "BIPW(lambda_=20.0)": BalancedIPW(lambda_=20.0)}
    results = []
    for n_parts in (1, 7):
        url, table, w = _log_with_weights(example, tmp_path, n_parts)
        results.append(evaluate_log(url, Evaluation("column:target_action", estimators, baseline="logging")))
    arrays = dict(reward=table.column("reward").to_numpy(), action=table.column("action").to_numpy(),
                  propensity=table.column("propensity").to_numpy(),
                  target_probs=np.eye(N_ACTIONS)[table.column("target_action").to_numpy()])
    for label, estimator in estimators.items():
        given = {"estimated_importance_weights": w} if label.startswith("BIPW") else {}
        expected = estimator.estimate(**arrays, **given)
        for result in results:
            e = result.estimates[label]
            assert e.value == pytest.approx(expected.value, rel=1e-12), label
            assert e.stderr == pytest.approx(expected.stderr, rel=1e-10), label
            assert e.ci(0.05, "el") == pytest.approx(expected.ci(0.05, "el"), rel=1e-10), label


def test_bipw_on_a_log_without_its_column_or_with_a_policy_baseline_is_refused(example, tmp_path, capsys):
    url, _, _ = _log_with_weights(example, tmp_path, 2)
    code, _, err = cli(capsys, "evaluate", url, "--policy", "column:target_action", "--estimators", "BIPW,RM",
                       "--no-progress")
    assert code == 0, err
    code, _, err = cli(capsys, "evaluate", url, "--policy", "column:target_action", "--estimators", "BIPW",
                       "--baseline", "constant:0", "--no-progress")
    assert code == 2 and "compare with the baseline 'logging'" in error_line(err)
    from dr_scale.logs.writing import write_log
    from dr_scale.synthetic.example import N_ACTIONS, N_FEATURES

    write_log(example[0], str(tmp_path / "bare"), n_features=N_FEATURES, n_actions=N_ACTIONS)
    code, _, err = cli(capsys, "evaluate", tmp_path / "bare", "--policy", "column:target_action", "--estimators",
                       "BIPW", "--no-progress")
    assert code == 2 and "column 'importance_weight': missing column" in error_line(err)
