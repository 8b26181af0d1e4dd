"""The Open Bandit Dataset sample (tests/fixtures/obd: 10,000 rows of a uniform-random logger over 80 items, p = 1/80)
imported without its propensity column, its logging policy estimated, against the logged propensities.

The logger ignored the context, so the best any estimator can do is the actions' frequencies; with 125 rows per
action they scatter around 1/80 with a relative sd of √((1 − 1/80)/125) = 8.9% (10% on a fold model's 8,000
training rows). The estimated propensities are checked against that: each action's mean p̂ within 5% of its
frequency in the log, and within 3.5 of those sds of 1/80 (docs/propensities.md has the figures). IPS with the
estimated propensities is checked against IPS with the logged ones within 3 sds of their paired per-row
difference.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from conftest import cli

from dr_scale.crossfit.settings import FitSettings
from dr_scale.logs.importing import import_log
from dr_scale.logs.reading import read_log
from dr_scale.ope.evaluation import Evaluation, evaluate_log
from dr_scale.propensity.fitting import fit_propensity_model

OBD = Path(__file__).parents[1] / "fixtures" / "obd"
K, D = 80, 1 << 18
#: The penalty ``lam="auto"`` chooses on this log (out-of-fold log loss over the grid), fixed here to spare the search.
LAM = 1000.0

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def obd(tmp_path_factory):
    root = tmp_path_factory.mktemp("obd-hidden")
    spec = (OBD / "obd.toml").read_text()
    (root / "hidden.toml").write_text("\n".join(line for line in spec.splitlines()
                                                 if not line.startswith("propensity")))
    (root / "item_context.csv").write_bytes((OBD / "item_context.csv").read_bytes())
    hidden, shown = root / "hidden", root / "shown"
    import_log(str(OBD / "all.csv.gz"), str(root / "hidden.toml"), str(hidden))
    import_log(str(OBD / "all.csv.gz"), str(OBD / "obd.toml"), str(shown))
    model = fit_propensity_model(str(hidden), FitSettings(folds=5, lam=LAM))
    model_path = root / "pi0.npz"
    model.save(str(model_path))
    return hidden, shown, model, model_path


def test_estimated_propensities_are_the_action_frequencies_near_one_in_80(obd):
    hidden, _, model, _ = obd
    parts = read_log(str(hidden), n_features=D, n_actions=K)
    assert not any(p.has_propensity for p in parts)
    P = np.vstack([model.predict_proba(p.X, row_id=p.row_id) for p in parts])
    action = np.concatenate([p.action for p in parts])
    n = action.size
    frequency = np.bincount(action, minlength=K) / n
    mean = P.mean(axis=0)
    np.testing.assert_allclose(mean, frequency, rtol=0.05)
    sd = math.sqrt((1 / K) * (1 - 1 / K) / (0.8 * n)) * K  # relative sd of a frequency on a fold's training rows
    assert np.abs(mean * K - 1).max() <= 3.5 * sd


def test_ips_with_estimated_propensities_near_ips_with_the_logged_ones(obd):
    hidden, shown, model, _ = obd
    estimated = evaluate_log(str(hidden), Evaluation("uniform", ["IPS"], propensity_model=model))
    logged = evaluate_log(str(shown), Evaluation("uniform", ["IPS"]))
    parts = read_log(str(shown), n_features=D, n_actions=K)
    r = np.concatenate([p.reward for p in parts])
    p = np.concatenate([p.propensity for p in parts])
    p_hat = np.concatenate([model.predict_proba(q.X, row_id=q.row_id)[np.arange(len(q)), q.action]
                            for q in read_log(str(hidden), n_features=D, n_actions=K)])
    difference = r * (1 / K) * (1 / np.maximum(p_hat, 1e-3) - 1 / p)  # the paired per-row terms' difference
    sd = difference.std(ddof=1) / math.sqrt(r.size)
    gap = estimated.estimates["IPS"].value - logged.estimates["IPS"].value
    assert gap == pytest.approx(difference.mean(), abs=1e-12)
    print(f"IPS estimated {estimated.estimates['IPS'].value:.6g}, logged {logged.estimates['IPS'].value:.6g} "
          f"({100 * gap / logged.estimates['IPS'].value:+.2f}%, {gap / sd:+.2f} sd)")
    assert abs(gap) <= 3 * sd
    diagnostics = estimated.propensity
    assert diagnostics.floored == 0 and diagnostics.support_share() == 0
    ll = diagnostics.log_losses()
    assert ll["model"] >= ll["uniform"] - 0.01  # the features do not predict the logged item: said so
    assert any("do not predict the logged action" in w for w in estimated.warnings())


def test_evaluate_with_the_model_prints_and_writes_the_diagnostics(obd, capsys):
    hidden, shown, _, model_path = obd
    out = model_path.parent / "r.json"
    code, stdout, _ = cli(capsys, "evaluate", shown, "--policy", "uniform", "--propensity-model", model_path,
                          "--estimators", "IPS", "--json", out, "--no-progress")
    assert code == 0
    assert "the log's own propensity column is not used" in stdout and "logged vs estimated" in stdout
    import json

    document = json.loads(out.read_text())
    comparison = document["propensity_diagnostics"]["logged_vs_estimated"]
    assert comparison["rows"] == 10_000 and 0.7 < comparison["ratio_quantiles"]["0.01"] < 1
    assert (model_path.parent / "r-reliability.png").stat().st_size > 1000
