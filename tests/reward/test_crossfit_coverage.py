"""Cross-fitted DR's 95% intervals cover the true value, and DR's rmse is below IPS's.

Every replicate is a log of N rows of one generated world (``dr_scale.synthetic.bandit``,
seed 0, D = 128 features, K = 4 actions): replicate r holds rows r·N … (r+1)·N − 1, so
the logs are independent draws of the same world. The target policy π is a good
deterministic candidate, argmax_a (b_a + x·W_a) (the linear part of the true score);
its true value on a log is V = (1/N) Σ_i E[r | x_i, π(x_i)] from ``expected_reward``.

ρ̂ is what ``dr-scale evaluate --fit-reward-model --folds 5 --lam 1`` fits: per action a and fold
j, ridge with an unpenalised intercept on the rows that logged a outside fold j,
min Σ (r_i − b − x_i·w)² + λ‖w‖² with λ = 1 (fixed here: the fitter's own default chooses
λ by the out-of-fold error on a keyed sample), fold(i) keyed by row id
(``reward_models.fold_of``); here solved in memory from per-(fold, action) sums, which
``test_the_in_memory_fit_is_the_products_fit`` checks against ``fit_reward_model`` on the
written log. DR and IPS and their normal 95% intervals come from the product's
:class:`~dr_scale.ope.evaluation.Evaluation`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import scipy.linalg
from threadpoolctl import threadpool_limits

from dr_scale.logs.reading import partition_from_table
from dr_scale.ope.estimators import make_estimators
from dr_scale.ope.evaluation import Evaluation, evaluate_partitions
from dr_scale.reward.fitting import FitSettings, fit_reward_model
from dr_scale.reward.models import LinearRewardModel, fold_of
from dr_scale.synthetic.bandit import generate_bandit, generate_rows, make_world

D, K, FOLDS, N, SEED = 128, 4, 5, 5000, 0
LAM = 1.0
#: Replicates of the test (``python benchmarks/statistical_checks.py`` runs 1000, the figures of
#: docs/generate-bandit.md).
REPLICATES = 300
#: Covered logs of 300 within [271, 296]: for an exact 95% interval P(Binomial(300, 0.95) < 271) = 2.8·10⁻⁴ and
#: P(> 296) = 1.6·10⁻⁴, a false alarm in under 0.05% of runs; an interval of coverage 0.90 falls below 271 with
#: probability 0.9 (R · 0.90 = 270 covered).
COVERED = (271, 296)


def replicate(r: int):
    """Log r as a Partition with π's actions in ``target_action``, and π's true value on it."""
    world = make_world(SEED, D, K)
    table, _ = generate_rows(world, SEED, r * N, N)
    part = partition_from_table(table, f"<replicate {r}>", D, K)
    target = (np.asarray(part.X @ world.weights[:, :K]) + world.offset).argmax(axis=1)
    expected = pc.list_flatten(table.column("expected_reward")).to_numpy().reshape(N, K)
    part.table = part.table.append_column("target_action", pa.array(target.astype(np.int32)))
    return part, float(expected[np.arange(N), target].mean())


def cross_fitted_ridge(part, lam: float = LAM) -> LinearRewardModel:
    """The K·FOLDS fold models (and the full-data ones) from per-(fold, action) sums.

    For the rows S of a fit (n rows, μ = Σ_S x/n, ȳ = Σ_S r/n), the centred normal equations
    (X_SᵀX_S − n μμᵀ + λI) w = X_Sᵀr − μ Σ_S r, b = ȳ − μ·w; a fit's sums are the action's
    totals minus its fold's.
    """
    fold = fold_of(part.row_id, FOLDS, 0)
    X = part.X.toarray()
    sums = np.zeros((FOLDS + 1, K, D + 1, D + 2))  # [fold or total, action]: [1 x]ᵀ[1 x r]
    Z = np.hstack([np.ones((N, 1)), X, part.reward[:, None]])
    for j in range(FOLDS):
        for a in range(K):
            rows = Z[(fold == j) & (part.action == a)]
            sums[j, a] = rows[:, :D + 1].T @ rows
    sums[FOLDS] = sums[:FOLDS].sum(axis=0)
    coef, intercept = np.zeros((FOLDS + 1, D, K)), np.zeros((FOLDS + 1, K))
    for j in range(FOLDS + 1):
        for a in range(K):
            s = sums[FOLDS, a] - (sums[j, a] if j < FOLDS else 0)
            n, sx, sy = s[0, 0], s[0, 1:D + 1], s[0, D + 1]
            if n == 0:
                continue
            gram = s[1:, 1:D + 1] - np.outer(sx, sx) / n + lam * np.eye(D)
            w = scipy.linalg.solve(gram, s[1:, D + 1] - sx * sy / n, assume_a="pos")
            coef[j, :, a], intercept[j, a] = w, (sy - sx @ w) / n
    return LinearRewardModel(coef[FOLDS], intercept[FOLDS], coef[:FOLDS], intercept[:FOLDS], 0)


def estimates(part, model) -> dict:
    evaluation = Evaluation("column:target_action", make_estimators(["IPS", "DR"]), reward_model=model,
                            n_actions=K, n_features=D)
    return evaluate_partitions([part], evaluation).estimates


@pytest.mark.slow
def test_the_in_memory_fit_is_the_products_fit(tmp_path):
    """Replicate 0 is the first N rows of ``generate bandit``'s log: ``fit_reward_model`` (λ = 1, 5 folds) agrees."""
    generate_bandit(str(tmp_path / "log"), rows=N, features=D, actions=K, seed=SEED)
    settings = FitSettings(lam=LAM, folds=FOLDS, rtol=1e-10, spill="memory", model="ridge")
    product = fit_reward_model(str(tmp_path / "log"), settings)
    part, _ = replicate(0)
    ours = cross_fitted_ridge(part)
    assert product.folds == FOLDS and product.metadata["lam"] == LAM
    np.testing.assert_allclose(ours.fold_coef, product.fold_coef, atol=1e-6)
    np.testing.assert_allclose(ours.fold_intercept, product.fold_intercept, atol=1e-6)
    assert estimates(part, ours)["DR"].value == pytest.approx(estimates(part, product)["DR"].value, abs=1e-8)


def coverage_and_errors(replicates: int = REPLICATES) -> tuple[dict, dict]:
    """Over ``replicates`` logs: the covered count of each of IPS's and DR's normal 95% intervals, and their
    squared errors."""
    covered = {"IPS": 0, "DR": 0}
    sq_error = {"IPS": np.zeros(replicates), "DR": np.zeros(replicates)}
    with threadpool_limits(1):  # small dense solves: more BLAS threads only contend on a shared machine
        for r in range(replicates):
            part, truth = replicate(r)
            for name, est in estimates(part, cross_fitted_ridge(part)).items():
                lo, hi = est.ci(0.05)
                covered[name] += lo <= truth <= hi
                sq_error[name][r] = (est.value - truth) ** 2
    rmse = {name: float(np.sqrt(e.mean())) for name, e in sq_error.items()}
    print(f"cross-fitted DR coverage {covered['DR'] / replicates:.3f} (IPS {covered['IPS'] / replicates:.3f}) "
          f"over {replicates} logs; rmse DR {rmse['DR']:.5f}, IPS {rmse['IPS']:.5f}")
    return covered, sq_error


@pytest.mark.slow
def test_cross_fitted_dr_covers_the_truth_and_is_no_worse_than_ips():
    """DR's interval covers V on a count of REPLICATES logs within COVERED, and DR's squared error is not above
    IPS's by more than 3 standard errors of the paired difference (1000 logs, the benchmark's, put it below)."""
    covered, sq_error = coverage_and_errors()
    assert COVERED[0] <= covered["DR"] <= COVERED[1]
    diff = sq_error["DR"] - sq_error["IPS"]
    assert diff.mean() <= 3 * diff.std(ddof=1) / np.sqrt(REPLICATES)
