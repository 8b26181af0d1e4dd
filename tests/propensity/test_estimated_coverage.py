"""DR with estimated propensities: its 95% intervals cover the true value, and its rmse is near DR's with the true
propensities.

Every replicate is a log of N rows of one generated world (``dr_scale.synthetic.bandit``, seed 0, D = 80 features,
K = 3 actions, uniform share ε = 0: the logging policy is a pure softmax of a linear score, which the multinomial
logistic model can represent) with its propensity column hidden (``generate bandit --hide-propensity``):
replicate r holds rows r·N … (r+1)·N − 1, independent draws of the same world. The target policy π is
argmax_a (b_a + x·W_a) (the true score); its true value is V = E_x E[r | x, π(x)], the mean over
POPULATION rows of other ids (Monte-Carlo error ≈ 0.0003, 2% of a replicate's standard error). The interval
is for V: against the value on the replicate's own contexts, (1/N) Σ_i E[r | x_i, π(x_i)], it would over-cover,
its variance counting the contexts' sampling that the latter conditions on.

Per replicate, what ``dr-scale evaluate --estimate-propensity --fit-reward-model --folds 5 --lam 1`` does: π̂₀
(:func:`dr_scale.propensity.fitting.fit_on_parts`) and ρ̂ (:func:`dr_scale.reward.fitting.fit_on_parts`), both
cross-fitted over the same 5 keyed folds with λ = 1 (fixed here; the commands' default chooses λ by the out-of-fold
loss), on the replicate's rows in memory (the passes of the out-of-core fitters over one part); DR with p̂ =
max(π̂₀(a_i | x_i), 10⁻³) from the fold model that did not see row i, and its normal 95% interval
(:class:`~dr_scale.ope.evaluation.Evaluation`): the DML variance (docs/propensities.md). Beside it, DR with the
true propensities and the same ρ̂.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest

from dr_scale.crossfit.parts import LogPart, group
from dr_scale.crossfit.settings import FitSettings
from dr_scale.logs.reading import partition_from_table
from dr_scale.ope.evaluation import Evaluation, evaluate_partitions
from dr_scale.outofcore.passes import PartSet
from dr_scale.outofcore.passes import given as given_part
from dr_scale.propensity import fitting as propensity_fitting
from dr_scale.reward import fitting as reward_fitting
from dr_scale.synthetic.bandit import WorldSettings, generate_rows, make_world

D, K, N, FOLDS, SEED, LAM = 80, 3, 3000, 5, 0, 10.0
#: Replicates of the tests (``python benchmarks/statistical_checks.py`` runs 200, the figures of docs/propensities.md).
REPLICATES = 12
#: Covered logs of REPLICATES at least: P(Binomial(12, 0.95) < 8) = 1.8·10⁻⁴, the false-alarm probability of an
#: exact interval.
MIN_COVERED = 8
#: Σ_r z_r², z_r = (V̂_r − V)/se_r, at most χ²₁₂'s 0.999 quantile: an exact interval's z_r are independent N(0, 1),
#: so a false alarm has probability 10⁻³; a standard error half the true one makes the sum ≈ 4 · 12 = 48.
CHI2_BOUND = 32.91
#: DR's rmse with estimated propensities at most this multiple of DR's with the true ones.
RMSE_RATIO = 1.2


#: The world: a pure-softmax logger (ε = 0) and, without the interaction term (m_a = 0), a reward
#: E[r | x, a] = σ(b_a + x·W_a) that the logistic reward model can represent.
SETTINGS = WorldSettings(min_propensity=0.0, interaction_sd=0.0)
#: The reward model: ``fit --model logistic`` (consistent here, so that DR is orthogonal in p as well as ρ).
REWARD_MODEL = "logistic"


def world():
    return make_world(SEED, D, K, SETTINGS)


def replicate(r: int) -> dict:
    """Replicate r's DR estimates (estimated and true propensities) and π's true value."""
    w = world()
    table, _ = generate_rows(w, SEED, r * N, N)
    truth_p = table.column("propensity").to_numpy()
    hidden = partition_from_table(table.drop_columns(["propensity"]), f"<replicate {r}>", D, K)
    target = (np.asarray(hidden.X @ w.weights[:, :K]) + w.offset).argmax(axis=1)
    hidden.table = hidden.table.append_column("target_action", pa.array(target.astype(np.int32)))
    rows = LogPart(hidden.row_id, hidden.X.indptr, hidden.X.indices, None, hidden.action, hidden.reward,
                   np.ones(N))
    parts = PartSet.build(given_part, [(group(rows, FOLDS, K, SEED),)], None)
    settings = FitSettings(folds=FOLDS, lam=LAM, seed=SEED)
    pi0 = propensity_fitting.fit_on_parts(parts, N, D, K, settings)
    rho = reward_fitting.fit_on_parts(parts, N, D, K, replace(settings, model=REWARD_MODEL))
    estimated = evaluate_partitions([hidden], Evaluation("column:target_action", ["DR"], reward_model=rho,
                                                         n_actions=K, propensity_model=pi0)).estimates["DR"]
    shown = partition_from_table(table.append_column("target_action", pa.array(target.astype(np.int32))),
                                 f"<replicate {r}>", D, K)
    true = evaluate_partitions([shown], Evaluation("column:target_action", ["DR"], reward_model=rho,
                                                   n_actions=K)).estimates["DR"]
    p_hat = pi0.predict_proba(hidden.X, row_id=hidden.row_id)
    return {"truth": population_value(), "estimated": estimated, "true": true,
            "correlation": float(np.corrcoef(p_hat[np.arange(N), hidden.action], truth_p)[0, 1])}


#: Rows of the population value's Monte-Carlo mean, from ids far above every replicate's.
POPULATION, POPULATION_FIRST = 400_000, 1 << 40


@functools.lru_cache(maxsize=1)
def population_value() -> float:
    """V = E_x E[r | x, π(x)] by the mean over POPULATION rows of the world."""
    w = world()
    total = 0.0
    for first in range(0, POPULATION, 100_000):
        X = w.contexts(POPULATION_FIRST + first, 100_000, SEED)
        expected, _ = w.scores(X)
        target = (np.asarray(X @ w.weights[:, :K]) + w.offset).argmax(axis=1)
        total += expected[np.arange(X.shape[0]), target].sum()
    return total / POPULATION


@functools.cache
def replicates(count: int = REPLICATES) -> list[dict]:
    return [replicate(r) for r in range(count)]


def covered(reps: list[dict], key: str) -> int:
    """The replicates whose normal 95% interval of ``key`` ("estimated" or "true") holds V."""
    return sum(e[key].ci(0.05)[0] <= e["truth"] <= e[key].ci(0.05)[1] for e in reps)


def rmse(reps: list[dict], key: str) -> float:
    """√(mean_r (V̂_r − V)²) of ``key``'s DR."""
    return float(np.sqrt(np.mean([(e[key].value - e["truth"]) ** 2 for e in reps])))


@pytest.mark.slow
def test_one_replicate_estimates_near_the_truth():
    one = replicate(0)
    assert one["correlation"] > 0.9
    for key in ("estimated", "true"):
        assert abs(one[key].value - one["truth"]) < 4 * one[key].stderr


@pytest.mark.slow
def test_dr_with_estimated_propensities_covers_the_truth():
    """At least MIN_COVERED of REPLICATES intervals hold V, and Σ z_r² ≤ CHI2_BOUND (see both)."""
    reps = replicates()
    z2 = sum(((e["estimated"].value - e["truth"]) / e["estimated"].stderr) ** 2 for e in reps)
    print(f"covered with estimated propensities {covered(reps, 'estimated')}/{REPLICATES}, with the true ones "
          f"{covered(reps, 'true')}/{REPLICATES}; sum of z² {z2:.1f}")
    assert covered(reps, "estimated") >= MIN_COVERED
    assert z2 <= CHI2_BOUND


@pytest.mark.slow
def test_dr_rmse_with_estimated_propensities_near_the_true_ones():
    """mean_r (e_r² − RMSE_RATIO² t_r²) ≤ 3 standard errors, e_r and t_r the errors with estimated and true
    propensities: the paired test of rmse(estimated) ≤ RMSE_RATIO · rmse(true) at its sampling spread."""
    reps = replicates()
    diff = np.array([(e["estimated"].value - e["truth"]) ** 2 - RMSE_RATIO ** 2 * (e["true"].value - e["truth"]) ** 2
                     for e in reps])
    print(f"DR rmse with estimated propensities {rmse(reps, 'estimated'):.5f}, with the true ones "
          f"{rmse(reps, 'true'):.5f}")
    assert diff.mean() <= 3 * diff.std(ddof=1) / np.sqrt(REPLICATES)


#: The large log of the correlation target: a pure-softmax logger over 10 actions; the tests' rows
#: (``python benchmarks/statistical_checks.py`` runs 1M, the figure of docs/propensities.md).
BIG_ROWS, BIG_D, BIG_K = 100_000, 1024, 10


def big_correlation(folder, rows: int = BIG_ROWS) -> float:
    """corr(π̂₀(a_i | x_i), π₀(a_i | x_i)) over a generated log of ``rows`` rows: the full-data model (the fold
    models are fitted on 80% of the rows in the same passes, six times the work)."""
    from dr_scale.logs.reading import read_log
    from dr_scale.propensity.fitting import fit_propensity_model
    from dr_scale.synthetic.bandit import generate_bandit

    logs = str(folder / "big")
    generate_bandit(logs, rows=rows, features=BIG_D, actions=BIG_K, seed=SEED, uniform_share=0.0,
                    hide_propensity=True, rows_per_part=250_000)
    model = fit_propensity_model(logs, FitSettings(lam=LAM, seed=SEED))
    w = make_world(SEED, BIG_D, BIG_K, WorldSettings(min_propensity=0.0))
    estimated, true = [], []
    for part in read_log(logs):
        rows = np.arange(len(part))
        estimated.append(model.predict_proba(part.X)[rows, part.action])
        true.append(w.scores(part.X)[1][rows, part.action])
    return float(np.corrcoef(np.concatenate(estimated), np.concatenate(true))[0, 1])


@pytest.mark.slow
def test_estimated_propensities_correlate_with_the_true_ones_on_a_large_log(tmp_path):
    """The model class and the fitter on BIG_ROWS rows: correlation ≥ 0.97 (0.9814 measured at 100k rows, 0.9972
    at 1M; a fitter that misses the score's direction lands far below)."""
    correlation = big_correlation(tmp_path)
    print(f"correlation of estimated and true propensities at {BIG_ROWS:,} rows: {correlation:.4f}")
    assert correlation >= 0.97
