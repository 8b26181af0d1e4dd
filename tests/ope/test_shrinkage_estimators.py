"""obp's clipping, shrinkage and sub-Gaussian estimators and their tuning: IPS(lambda_), DR(lambda_), DRos,
SubGaussianIPS, SubGaussianDR, IPSTuning, DRTuning.

Each equals Open Bandit Pipeline 0.5.7's ``estimate_policy_value`` on the same arrays, and a tuned one chooses
obp's λ (``benchmarks/obp_equality.py``'s configurations); states merged over any split equal the whole's; every
interval holds its estimate; a fixed λ's standard error matches the spread of the estimates over seeded logs.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import cli, error_line

from dr_scale.ope.estimators import (
    CLIPPING_LAMBDAS,
    IPS,
    SUBGAUSSIAN_LAMBDAS,
    Difference,
    DirectMethod,
    DoublyRobust,
    DRos,
    DRTuning,
    IPSTuning,
    OnPolicy,
    RowInputs,
    SubGaussianDR,
    SubGaussianIPS,
    SwitchDRTuning,
    make_estimators,
    parse_estimator,
)
from dr_scale.ope.moments import Moments
from dr_scale.report.policies_file import parse_policies

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


def obp_equality():
    """benchmarks/obp_equality.py (which installs the stand-in torch and seaborn modules obp imports)."""
    if importlib.util.find_spec("obp") is None:
        pytest.skip("Open Bandit Pipeline is not installed (pip install --no-deps --ignore-requires-python obp==0.5.7)")
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import obp_equality as module
    finally:
        sys.path.pop(0)
    return module


def _arrays(n, k, seed, gaussian=False, deterministic=False, concentration=0.3):
    rng = np.random.default_rng(seed)
    logging = np.maximum(rng.dirichlet(np.full(k, concentration), size=n), 1e-5)
    logging /= logging.sum(axis=1, keepdims=True)
    action = (rng.random(n)[:, None] >= np.cumsum(logging, axis=1)).sum(axis=1).clip(max=k - 1)
    target = np.eye(k)[rng.integers(0, k, n)] if deterministic else rng.dirichlet(np.ones(k), size=n)
    mu = rng.uniform(0.1, 0.9, size=(n, k))
    mean = mu[np.arange(n), action]
    reward = rng.normal(mean, 1.0) if gaussian else (rng.random(n) < mean).astype(float)
    reward_hat = np.clip(mu + rng.normal(0, 0.2, size=(n, k)), 0, 1)
    return dict(reward=reward, action=action, propensity=logging[np.arange(n), action], target_probs=target,
                reward_hat=reward_hat)


FIXED = [IPS(lambda_=20), DoublyRobust(lambda_=20), DRos(lambda_=10), SubGaussianIPS(lambda_=0.1),
         SubGaussianDR(lambda_=0.1)]
TUNED = [IPSTuning(), DRTuning(), DRos(), SubGaussianIPS(), SubGaussianDR(), IPSTuning(tuning_method="mse"),
         DRos(tuning_method="mse"), SubGaussianDR(tuning_method="mse", use_bias_upper_bound=False), SwitchDRTuning()]


# -- equal to obp 0.5.7 ----------------------------------------------------------------------------------------------
def _assert_equal_to_obp(configs):
    module = obp_equality()
    rows = [row for config in configs for row in module.compare(config)]
    # 5 fixed λ and 6 tuned estimators × (slope, mse, mse without the bound), RM, BIPW, BIPW(lambda_)
    assert len(rows) == 26 * len(configs)
    for row in rows:
        assert row["difference"] <= 1e-12, row
        assert row["ours_lambda"] == row["obp_lambda"], row
        # obp's value is NaN only where its formula is 0/0: DRos at λ = 0 with rows π never takes (there the
        # benchmark compares with DM, the λ = 0 limit dr-scale gives); RM's 0/0 (no row with π(a_i|x_i) = 1) is
        # obp's 0 and dr-scale's NaN
        if row["obp_undefined"]:
            assert (row["label"] == "DRos(lambda_=0)" and row["config"]["deterministic"]
                    or row["label"] == "RM" and row["obp"] == 0.0 and math.isnan(row["ours"])), row
    return rows


@pytest.mark.slow  # importing obp (scikit-learn, pandas …) takes seconds
def test_equal_to_obp_on_a_few_configurations():
    configs = [c for c in obp_equality().configurations() if c["n"] <= 300][::4]
    assert len(configs) >= 8
    _assert_equal_to_obp(configs)


@pytest.mark.slow
def test_equal_to_obp_on_every_configuration():
    configs = obp_equality().configurations()
    assert len(configs) >= 50
    assert {c["n"] for c in configs} >= {40, 20000} and {c["heavy"] for c in configs} == {False, True}
    rows = _assert_equal_to_obp(configs)
    # the tuning is not trivial: several λ are chosen, and finite clips at least once
    chosen = {(r["label"].split("(")[0], r["ours_lambda"]) for r in rows if r["ours_lambda"] is not None}
    assert len({lam for name, lam in chosen if name == "DRos"}) >= 3
    assert any(name == "IPSTuning" and lam < math.inf for name, lam in chosen)


def test_obp_default_candidates_are_the_documented_lists():
    assert DRos().candidates == CLIPPING_LAMBDAS  # increasing, as obp's DoublyRobustWithShrinkageTuning sorts them
    assert IPSTuning().candidates == tuple(sorted(CLIPPING_LAMBDAS, reverse=True))  # obp: decreasing for clipping
    assert SubGaussianDR().candidates == SUBGAUSSIAN_LAMBDAS


# -- limits ----------------------------------------------------------------------------------------------------------
def test_limits_are_the_plain_estimators():
    log = _arrays(500, 4, seed=3)
    dr, ips, dm = DoublyRobust().estimate(**log), IPS().estimate(**log), DirectMethod().estimate(**log)
    for est, same in ((DRos(lambda_=math.inf), dr), (SubGaussianDR(lambda_=0.0), dr), (DoublyRobust(lambda_=1e9), dr),
                      (SubGaussianIPS(lambda_=0.0), ips), (IPS(lambda_=1e9), ips), (DRos(lambda_=0.0), dm)):
        e = est.estimate(**log)
        assert e.value == pytest.approx(same.value, rel=1e-12, abs=1e-15), est
        assert e.stderr == pytest.approx(same.stderr, rel=1e-9), est
    # A row π never takes has ŵ = 0 where obp's formulas are 0/0 (DRos at λ = 0, sub-Gaussian at λ = 1).
    log["target_probs"] = np.eye(4)[(log["action"] + 1) % 4]  # π never takes a logged action
    assert DRos(lambda_=0.0).estimate(**log).value == pytest.approx(DirectMethod().estimate(**log).value, rel=1e-12)
    assert SubGaussianIPS(lambda_=1.0).estimate(**log).value == 0.0


def test_clipping_is_min_of_weight_and_lambda():
    log = _arrays(800, 3, seed=4)
    rows = RowInputs.from_arrays(**log)
    for lam in (0.0, 0.5, 3.0, 40.0):
        expected = np.mean(np.minimum(rows.weight, lam) * rows.reward)
        assert IPS(lambda_=lam).estimate(**log).value == pytest.approx(expected, rel=1e-12, abs=1e-15)
        clipped = rows.reward_hat_pi + np.minimum(rows.weight, lam) * (rows.reward - rows.reward_hat_logged)
        assert DoublyRobust(lambda_=lam).estimate(**log).value == pytest.approx(clipped.mean(), rel=1e-12)


# -- one pass, any partitioning ----------------------------------------------------------------------------------------
def _pieces(rows, cuts):
    return [RowInputs(*(f[a:b] for f in (rows.reward, rows.weight, rows.reward_hat_pi, rows.reward_hat_logged)))
            for a, b in zip(cuts, cuts[1:], strict=False)]


def _assert_states_equal(a: Moments, b: Moments):
    assert a.n == b.n
    np.testing.assert_allclose(a.mean, b.mean, rtol=1e-12, atol=1e-15)
    scale = np.sqrt(np.outer(np.diag(b.comoment), np.diag(b.comoment)))  # |comoment| ≤ this (Cauchy–Schwarz)
    np.testing.assert_array_less(np.abs(a.comoment - b.comoment), 1e-12 * scale + 1e-300)
    np.testing.assert_array_equal(a.low, b.low)
    np.testing.assert_array_equal(a.high, b.high)


@pytest.mark.parametrize("estimator", FIXED + TUNED, ids=lambda e: getattr(e, "label", repr(e)))
def test_merged_states_equal_the_whole(estimator):
    rows = RowInputs.from_arrays(**_arrays(3000, 5, seed=7, gaussian=True))
    whole_state = estimator.state(rows)
    whole = estimator.result(whole_state)
    for cuts in ([0, 17, 1100, 1101, 2500, 3000], [0, 1, 2, 3, 1500, 3000], [0, 999, 2000, 3000]):
        states = [estimator.state(p) for p in _pieces(rows, cuts)]
        order = np.random.default_rng(len(cuts)).permutation(len(states))
        merged = Moments.empty(whole_state.m, 2)
        for i in order:
            merged = states[i] + merged
        tree = states  # a balanced tree, as Dask's reduction merges
        while len(tree) > 1:
            tree = [sum(tree[i:i + 2][1:], tree[i]) for i in range(0, len(tree), 2)]
        for state in (merged, tree[0]):
            _assert_states_equal(state, whole_state)
            result = estimator.result(state)
            assert result.chosen == whole.chosen
            assert result.value == pytest.approx(whole.value, rel=1e-12, abs=1e-15)
            assert result.stderr == pytest.approx(whole.stderr, rel=1e-10)
            for method in ("normal", "el"):
                np.testing.assert_allclose(result.ci(0.05, method), whole.ci(0.05, method), rtol=1e-10, atol=1e-13)


def test_tied_candidates_stay_tied_after_merging():
    """Clips above the largest weight give the same terms as no clip: their statistics are equal bit for bit, so
    the tuning breaks the tie as obp does (the first candidate in obp's order), whatever the partitioning."""
    log = _arrays(2000, 4, seed=8, concentration=5.0)  # light tails: every weight below 100
    rows = RowInputs.from_arrays(**log)
    assert rows.weight.max() < 100
    estimator = IPSTuning(tuning_method="mse", use_bias_upper_bound=False)
    states = [estimator.state(p) for p in _pieces(rows, [0, 300, 1400, 2000])]
    merged = states[2] + (states[0] + states[1])
    g = len(estimator.candidates)
    big = [j for j, lam in enumerate(estimator.candidates) if lam >= 100]  # ∞, 10⁴, 5000, 1000, 500, 100
    for state in (merged, estimator.state(rows)):
        for j in big:
            assert state.mean[j] == state.mean[2 * g + 1]  # the unclipped term
            assert state.comoment[j, j] == state.comoment[2 * g + 1, 2 * g + 1]
            assert state.mean[g + j] == state.mean[2 * g + 2]  # the modified weight and w
            assert state.comoment[g + j, g + j] == state.comoment[2 * g + 2, 2 * g + 2]
    assert estimator.result(merged).chosen == estimator.result(estimator.state(rows)).chosen
    # the paired difference's state keeps the same ties, so it chooses the same λ as the estimate
    for tuned in (estimator, IPSTuning(), DRos(tuning_method="mse")):
        diff = Difference(tuned, OnPolicy())
        assert diff.result(diff.state(rows, rows)).chosen == tuned.result(tuned.state(rows)).chosen


# -- intervals and standard errors -------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(6))
def test_every_interval_holds_its_estimate(seed):
    log = _arrays([40, 300, 2000][seed % 3], [2, 8][seed % 2], seed=seed, gaussian=seed >= 3,
                  deterministic=seed % 2 == 0)
    for estimator in FIXED + TUNED:
        assert_intervals_hold(estimator, estimator.estimate(**log))


def assert_intervals_hold(estimator, est):
    """Every interval and confidence sequence of ``est`` (both methods, three levels) contains its value."""
    for method in ("normal", "el"):
        for alpha in (0.01, 0.05, 0.3):
            lo, hi = est.ci(alpha, method)
            assert lo <= est.value <= hi, (estimator, method, alpha, lo, est.value, hi)
        lo, hi = est.cs(0.05, method=method)
        assert lo <= est.value <= hi, (estimator, method)


@pytest.mark.parametrize("estimator", FIXED, ids=lambda e: e.label)
def test_standard_error_matches_the_spread_over_seeded_logs(estimator):
    """Over R logs of one world, the empirical variance of V̂ equals the mean squared standard error within
    3 standard deviations of their difference, each from the replicates' own fourth moments — and a standard
    error 25% too large or too small would be detected."""
    reps, n, k = 400, 800, 5
    rng = np.random.default_rng(11)
    logging = np.maximum(rng.dirichlet(np.full(k, 0.5), size=50), 1e-4)  # 50 contexts; weights up to ~10⁴
    logging /= logging.sum(axis=1, keepdims=True)
    target = rng.dirichlet(np.ones(k), size=50)
    mu = rng.uniform(0.1, 0.9, size=(50, k))
    mu_hat = np.clip(mu + rng.normal(0, 0.2, size=mu.shape), 0, 1)
    values, variances = np.empty(reps), np.empty(reps)
    for i in range(reps):
        x = rng.integers(0, 50, n)
        a = (rng.random(n)[:, None] >= np.cumsum(logging[x], axis=1)).sum(axis=1).clip(max=k - 1)
        r = (rng.random(n) < mu[x, a]).astype(float)
        e = estimator.estimate(reward=r, action=a, propensity=logging[x, a], target_probs=target[x],
                               reward_hat=mu_hat[x])
        values[i], variances[i] = e.value, e.stderr ** 2
    centred = values - values.mean()
    var_emp = centred @ centred / (reps - 1)
    m4 = np.mean(centred ** 4)
    sd_var_emp = math.sqrt(max(m4 - var_emp ** 2 * (reps - 3) / (reps - 1), 0.0) / reps)
    sd_mean_se2 = variances.std(ddof=1) / math.sqrt(reps)
    sd = math.hypot(sd_var_emp, sd_mean_se2)
    assert abs(var_emp - variances.mean()) <= 3 * sd, (var_emp, variances.mean(), sd)
    assert min(abs(var_emp - 1.25 ** 2 * variances.mean()), abs(var_emp - variances.mean() / 1.25 ** 2)) > 3 * sd


# -- specs in every command --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec, label, estimator", [
    ("IPS(lambda_=50)", "IPS(lambda_=50.0)", IPS(lambda_=50.0)),
    ("DR(lambda_=inf)", "DR", DoublyRobust()),
    ("DRos", "DRos", DRos()),
    ("DRos(lambda_=10)", "DRos(lambda_=10.0)", DRos(lambda_=10.0)),
    ("SubGaussianDR(lambda_=0.1)", "SubGaussianDR(lambda_=0.1)", SubGaussianDR(lambda_=0.1)),
    ("DRos(lambdas=[100, 10, inf], tuning_method=mse)", "DRos(lambdas=[10.0, 100.0, inf], tuning_method=mse)",
     DRos(lambdas=(10.0, 100.0, math.inf), tuning_method="mse")),
    ({"name": "IPSTuning", "lambdas": [5, 50], "use_bias_upper_bound": False, "tuning_method": "mse"},
     "IPSTuning(lambdas=[50.0, 5.0], tuning_method=mse, use_bias_upper_bound=False)",
     IPSTuning(lambdas=(50.0, 5.0), tuning_method="mse", use_bias_upper_bound=False)),
    ("IPS(lambda_=None)", "IPS(lambda_=None)", IPS(lambda_=None)),
])
def test_specs_and_labels_that_parse_back(spec, label, estimator):
    assert parse_estimator(spec) == (label, estimator)
    assert parse_estimator(label)[1] == estimator


@pytest.mark.parametrize("spec, message", [
    ("DRos(lambda_=-1)", r"estimator 'DRos\(lambda_=-1\)': lambda_ should be greater than or equal to 0 .*"
                         r"write e.g. DRos, DRos\(lambda_=10\) or DRos\(lambdas=\[10, 100, inf\], tuning_method=mse\)"),
    ("SubGaussianIPS(lambda_=2)", r"'SubGaussianIPS\(lambda_=2\)': lambda_ should be less than or equal to 1"),
    ("DRos(tuning_method=fast)", r"'DRos\(tuning_method=fast\)': tuning_method should be slope or mse"),
    ("DRos(lambda_=5, tuning_method=mse)", r"tuning_method tunes lambda_"),
    ("IPS(tau=3)", r"'IPS\(tau=3\)': IPS has no parameter tau; it takes lambda_, .*write e.g. IPS, IPS\(lambda_=50\)"),
    ("IPSTuning(lambda_=3)", r"IPSTuning chooses lambda_; for a fixed one write IPS\(lambda_=3\)"),
    ("DRos(lambdas=[])", r"lambdas should hold at least one"),
    ("DRos(delta=1.5)", r"delta should be less than 1"),
    ("DRos(use_bias_upper_bound=maybe)", r"use_bias_upper_bound should be true or false"),
    ("DRos(10)", r"'DRos\(10\)': write parameters as name=value, e.g. DRos\(lambda_=10\)"),
    ("Shrunk(lambda_=1)", r"unknown estimator 'Shrunk' in 'Shrunk\(lambda_=1\)'; choose from .*DRos"),
])
def test_bad_specs_name_the_spec_and_the_accepted_forms(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_estimator(spec)


@pytest.mark.parametrize("cls", [SubGaussianIPS, SubGaussianDR])
def test_an_infinite_lambda_outside_the_rule_is_refused_by_the_constructor_too(cls):
    with pytest.raises(ValueError, match="lambda_ should be a finite number"):
        cls(lambda_=math.inf)


def test_policies_file_takes_the_new_estimators():
    data = {"policy": [{"name": "c", "spec": "constant:0"}], "reward_model": "m.npz",
            "estimators": ["DRos", "IPS(lambda_=50)", {"name": "SubGaussianDR", "lambda_": 0.1},
                           {"name": "DRTuning", "lambdas": [10, 100], "tuning_method": "mse"}]}
    pf = parse_policies(data, "p.toml")
    assert pf.estimators == ["DRos", "IPS(lambda_=50.0)", "SubGaussianDR(lambda_=0.1)",
                             "DRTuning(lambdas=[100.0, 10.0], tuning_method=mse)"]
    assert list(make_estimators(pf.estimators)) == pf.estimators  # the labels parse back (the report does so)
    with pytest.raises(ValueError, match="p.toml: estimators: estimator 'DRos.*lambda_ should be"):
        parse_policies({**data, "estimators": [{"name": "DRos", "lambda_": -3}]}, "p.toml")


def test_evaluate_command_with_the_new_estimators(tmp_path, capsys):
    out = tmp_path / "r.json"
    specs = "DR,DRos,DRos(lambda_=10),IPS(lambda_=50),SubGaussianDR(lambda_=0.1),IPSTuning(tuning_method=mse)"
    code, printed, _ = cli(capsys, "evaluate", "--estimators", specs, "--baseline", "logging", "--interval", "el",
                           "--json", out, "--no-progress")
    assert code == 0
    data = json.loads(out.read_text())
    assert list(data["estimates"]) == ["DR", "DRos", "DRos(lambda_=10.0)", "IPS(lambda_=50.0)",
                                       "SubGaussianDR(lambda_=0.1)", "IPSTuning(tuning_method=mse)"]
    assert set(data["estimates"]["DRos"]["chosen"]) == {"lambda_"}
    assert "lambda_=" in printed
    for name, e in data["estimates"].items():
        assert e["ci"][0] <= e["value"] <= e["ci"][1], name
    differences = data["difference"]
    assert set(differences) - {"interval"} == set(data["estimates"])
    assert differences["DRos"]["chosen"] == data["estimates"]["DRos"]["chosen"]
    code, _, err = cli(capsys, "evaluate", "--estimators", "DR,DRos(lambda_=x)", "--no-progress")
    assert code == 2
    assert "DRos(lambda_=x)" in error_line(err) and "DRos(lambda_=10)" in error_line(err)


@pytest.mark.slow  # two reports over the bundled example
def test_report_with_tuned_estimators_from_its_state_cache(tmp_path):
    """A report's per-day states of a tuned λ, cached and merged on the next run, give the same λ and value."""
    import io

    from dr_scale.report.make import compute_report
    from dr_scale.synthetic.example import example_paths

    logs, model = example_paths()
    data = {"policy": [{"name": "c", "spec": "column:target_action"}], "reward_model": model,
            "estimators": ["DRos", "IPS(lambda_=20)", {"name": "SubGaussianDR", "tuning_method": "mse"}]}
    pf = parse_policies(data, str(tmp_path / "p.toml"))

    def report():
        return compute_report(logs, pf, str(tmp_path / "cache"), window="2d", log=io.StringIO())

    first, again = report(), report()
    assert {p["source"] for p in again["partitions"]} == {"cache"}
    estimates = first["policies"][0]["estimates"]
    assert set(estimates) == {"DRos", "IPS(lambda_=20.0)", "SubGaussianDR(tuning_method=mse)"}
    assert set(estimates["DRos"]["chosen"]) == {"lambda_"}
    for name, e in again["policies"][0]["estimates"].items():
        assert e["value"] == pytest.approx(estimates[name]["value"], rel=1e-12), name
        assert e.get("chosen") == estimates[name].get("chosen"), name


@pytest.mark.slow  # writes the example in 1 and 7 parts and evaluates it three times
def test_parquet_parts_and_dask_equal_the_numpy_path(tmp_path, example):
    """The log in 1 and 7 Parquet parts, and as a Dask DataFrame, gives the numpy path's values, standard
    errors and chosen λ (a deterministic target: the per-row quantities come from its actions)."""
    import dask.dataframe as dd

    from dr_scale.logs.writing import write_log
    from dr_scale.ope.evaluation import Evaluation, evaluate_dataframe, evaluate_log
    from dr_scale.synthetic.example import N_ACTIONS, N_FEATURES

    table, model, _ = example
    estimators = {e.label: e for e in FIXED + TUNED}
    results = []
    for n_parts in (1, 7):
        url = str(tmp_path / f"log{n_parts}")
        write_log(table, url, n_parts=n_parts, n_features=N_FEATURES, n_actions=N_ACTIONS)
        results.append(evaluate_log(url, Evaluation("column:target_action", estimators, reward_model=model)))
    results.append(evaluate_dataframe(dd.read_parquet(str(tmp_path / "log7")),
                                      Evaluation("column:target_action", estimators, reward_model=model)))
    from dr_scale.logs.reading import partition_from_table

    part = partition_from_table(table, "<memory>", N_FEATURES, N_ACTIONS)
    arrays = dict(reward=part.reward, action=part.action, propensity=part.propensity,
                  target_probs=np.eye(N_ACTIONS)[table.column("target_action").to_numpy()],
                  reward_hat=model.predict(part.X))
    for label, estimator in estimators.items():
        expected = estimator.estimate(**arrays)
        for result in results:
            e = result.estimates[label]
            assert e.value == pytest.approx(expected.value, rel=1e-12, abs=1e-15), label
            assert e.stderr == pytest.approx(expected.stderr, rel=1e-10), label
            assert e.chosen == expected.chosen, label
