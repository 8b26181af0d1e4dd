"""The cross-fitting driver: one metadata record, one λ spelling, one ConvergenceWarning for every fitter it drives,
and model files read back by their kind."""

from __future__ import annotations

import warnings
from pathlib import Path

import grimp
import numpy as np
import pytest

import dr_scale
from dr_scale.core.errors import ParameterError
from dr_scale.crossfit.settings import FitSettings
from dr_scale.ope.balancing import fit_balancing_model_on_log
from dr_scale.propensity.fitting import fit_propensity_model
from dr_scale.reward.fitting import fit_reward_model
from dr_scale.synthetic.bandit import generate_bandit

RECORD = {"lam", "folds", "seed", "rtol", "n_features", "n_actions", "passes", "fingerprint", "stage_passes"}


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    url = str(tmp_path_factory.mktemp("engine") / "log")
    generate_bandit(url, rows=1500, features=100, actions=3)
    return url


@pytest.mark.slow
@pytest.mark.parametrize("fit", [fit_reward_model, fit_propensity_model])
def test_every_fitter_writes_the_one_record(log, fit):
    model = fit(log, FitSettings(folds=2, lam_grid=(1.0, 10.0)))
    assert RECORD <= model.metadata.keys() and "lambda" not in model.metadata
    search = model.metadata["lambda_search"]
    assert model.metadata["lam"] == search["grid"][search["chosen"]] and model.fold_seed == 0


@pytest.mark.slow
def test_the_balancing_weights_are_driven_by_the_same_engine(log):
    model = fit_balancing_model_on_log(log, "uniform", lam=10.0)
    assert model.folds == 2 and model.converged and model.metadata["lam"] == 10.0


def test_a_fit_stopped_at_max_iter_warns_one_convergence_warning(log):
    with pytest.warns(dr_scale.ConvergenceWarning, match="did not reach rtol"):
        fit_reward_model(log, FitSettings(lam=1e-3, model="logistic", rtol=1e-12, max_iter=1))


def test_the_pass_budget_ends_in_a_line_naming_the_options(log, capsys):
    """``fit --max-iter 1``: the model is written, and one warning line counts the fits that did not converge and
    names the options that change it."""
    from dr_scale.cli import main

    assert main(["fit", log, "--out", str(Path(log).parent / "m.npz"), "--lam", "0.001", "--rtol", "1e-12",
                 "--max-iter", "1", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert ("dr-scale fit: warning: ρ̂: 3 of 3 fit(s) did not reach rtol 1e-12 within the pass budget of 1 passes; "
            "the model is used as its last pass left it — give a larger budget (`max_iter`, --max-iter) or rtol "
            "(--rtol)") in err


@pytest.mark.slow
def test_a_large_fit_is_announced_with_its_parameter_count(log, monkeypatch):
    """Above ``LARGE_FIT`` parameters a warning gives the count: (K + 1)·k fits × (used features + 1)."""
    from dr_scale.crossfit import limits

    monkeypatch.setattr(limits, "LARGE_FIT", 100)
    with pytest.warns(UserWarning, match="parameters") as caught:
        model = fit_reward_model(log, FitSettings(folds=2, lam=1.0, model="ridge"))
    used = model.metadata["used_features"]
    assert str(caught[0].message).startswith(f"ρ̂: {9 * (used + 1):,} parameters (9 fits × {used + 1} coefficients)")
    monkeypatch.setattr(limits, "LARGE_FIT", 9 * (used + 1))  # not above: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit_reward_model(log, FitSettings(folds=2, lam=1.0, model="ridge"))


def test_the_python_fitters_are_bounded_like_the_commands(log, monkeypatch):
    """The folds the rows allow and the memory a fit needs bound ``fit_reward_model`` and ``fit_propensity_model``
    as they bound the commands: a ParameterError naming the parameter, before the work."""
    from dr_scale.crossfit import limits

    with pytest.raises(ParameterError, match="folds = 21: at most 20 cross-fitting folds"):
        fit_reward_model(log, FitSettings(folds=21, lam=1.0))
    monkeypatch.setattr(limits, "COPIES", 10**12)  # as if each parameter needed terabytes
    with pytest.raises(ParameterError, match=r"π̂₀: [\d,]+ parameters \(3 fits × \d+ coefficients, the features"):
        fit_propensity_model(log, FitSettings(folds=2, lam=1.0))


def test_lambda_and_rtol_follow_one_rule():
    for bad in ({"lam": 1e-320}, {"lam": float("inf")}, {"rtol": 1e-17}, {"rtol": 1.0}):
        with pytest.raises(ParameterError):
            FitSettings(**bad)


def test_reward_models_have_no_import_cycle():
    graph = grimp.build_graph("dr_scale")
    modules = sorted(m for m in graph.modules if m.startswith("dr_scale.reward."))
    cycles = [(a, b) for i, a in enumerate(modules) for b in modules[i + 1:]
              if graph.chain_exists(a, b) and graph.chain_exists(b, a)]
    assert cycles == []


def test_reward_files_load_by_their_kind(log, tmp_path):
    model = fit_reward_model(log, FitSettings(lam=1.0, model="ridge"))
    model.save(str(tmp_path / "rho.npz"))
    again = dr_scale.load_reward_model(str(tmp_path / "rho.npz"))
    assert type(again) is type(model) and np.array_equal(again.coef, model.coef)
