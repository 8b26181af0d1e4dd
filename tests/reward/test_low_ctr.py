"""Binary rewards at a low click rate: DR with the logistic ρ̂ against DR with the ridge ρ̂.

Every replicate is a log of N rows of one generated low-CTR world (``dr_scale.synthetic.bandit`` with the
action offsets b_a centred at −6 instead of −1.5: mean reward ≈ 0.005, seed 0, D = 256 features, K = 4 actions);
replicate r holds rows r·N … (r+1)·N − 1, independent draws of the same world. The target policy π is
argmax_a (b_a + x·W_a), the true score's linear part; its true value on a log is V = (1/N) Σ_i E[r | x_i, π(x_i)]
from ``expected_reward``. ρ̂ is what ``dr-scale evaluate --fit-reward-model --folds 2 --model ridge|logistic``
fits (each with its own default λ rule), and DR with its normal and EL 95% intervals comes from the product's
:class:`~dr_scale.ope.evaluation.Evaluation`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dr_scale.logs.reading import partition_from_table
from dr_scale.logs.writing import write_log
from dr_scale.ope.estimators import make_estimators
from dr_scale.ope.evaluation import Evaluation, evaluate_partitions
from dr_scale.reward.fitting import FitSettings, fit_reward_model
from dr_scale.synthetic.bandit import WorldSettings, generate_rows, make_world

D, K, N, SEED, FOLDS = 256, 4, 20_000, 0, 2
#: Independent logs of the test (``python benchmarks/statistical_checks.py`` runs 40, the figures of
#: docs/reward-models.md).
REPLICATES = 6
#: Σ_r z_r², z_r = (V̂_r − V_r)/se_r of the logistic DR, at most χ²₆'s 0.999 quantile: an exact interval's z_r are
#: independent N(0, 1) (against the log's own contexts' value, smaller), so a false alarm has probability ≤ 10⁻³.
CHI2_BOUND = 22.46
WORLD = WorldSettings(base=-6.0)


def replicate(r: int, folder):
    world = make_world(SEED, D, K, WORLD)
    table, _ = generate_rows(world, SEED, r * N, N)
    url = str(folder / f"log-{r}")
    write_log(table.drop(["expected_reward"]), url, n_features=D, n_actions=K)
    part = partition_from_table(table, url, D, K)
    target = (np.asarray(part.X @ world.weights[:, :K]) + world.offset).argmax(axis=1)
    expected = pc.list_flatten(table.column("expected_reward")).to_numpy().reshape(N, K)
    part.table = part.table.append_column("target_action", pa.array(target.astype(np.int32)))
    return url, part, float(expected[np.arange(N), target].mean()), float(part.reward.mean())


def compare(folder, replicates: int = REPLICATES) -> dict:
    """DR with the ridge and the logistic ρ̂ on ``replicates`` logs: each log's errors V̂ − V and z = (V̂ − V)/se,
    its mean reward, the DR estimates below 0 and outside their EL interval; the logistic DR's own checks (in
    [0, 1], inside its EL and normal intervals) asserted on every log."""
    errors = {"ridge": np.zeros(replicates), "logistic": np.zeros(replicates)}
    z = {"ridge": np.zeros(replicates), "logistic": np.zeros(replicates)}
    outside_el = {"ridge": 0, "logistic": 0}
    negative = {"ridge": 0, "logistic": 0}
    ctr = []
    for r in range(replicates):
        url, part, truth, mean_reward = replicate(r, folder)
        ctr.append(mean_reward)
        for kind in errors:
            model = fit_reward_model(url, FitSettings(folds=FOLDS, model=kind))
            evaluation = Evaluation("column:target_action", make_estimators(["DR"]), reward_model=model,
                                    n_actions=K, n_features=D)
            dr = evaluate_partitions([part], evaluation).estimates["DR"]
            errors[kind][r] = dr.value - truth
            z[kind][r] = (dr.value - truth) / dr.stderr
            lo, hi = dr.ci(0.05, "el")
            outside_el[kind] += not (lo <= dr.value <= hi)
            negative[kind] += dr.value < 0
            if kind == "logistic":
                assert 0.0 <= dr.value <= 1.0
                assert lo <= dr.value <= hi
                n_lo, n_hi = dr.ci(0.05)
                assert n_lo <= dr.value <= n_hi
    rmse = {kind: float(np.sqrt(np.mean(e ** 2))) for kind, e in errors.items()}
    diff = errors["logistic"] ** 2 - errors["ridge"] ** 2
    print(f"mean reward {np.mean(ctr):.5f}; DR rmse logistic {rmse['logistic']:.6f}, ridge {rmse['ridge']:.6f}; "
          f"paired Δ(sq. error) {diff.mean():.3g} ± {diff.std(ddof=1) / np.sqrt(replicates):.2g}; DR < 0: "
          f"{negative}; outside its EL interval: {outside_el}")
    return {"ctr": float(np.mean(ctr)), "diff": diff, "z": z}


@pytest.mark.slow
def test_logistic_dr_stays_in_0_1_and_in_its_intervals_and_is_no_worse_than_ridge_dr(tmp_path):
    """On REPLICATES logs: the logistic DR in [0, 1] and in its intervals, Σ z² ≤ CHI2_BOUND, and its squared
    error not above the ridge DR's by more than 3 standard errors of the paired difference."""
    result = compare(tmp_path)
    diff = result["diff"]
    assert 0.003 <= result["ctr"] <= 0.008
    assert np.sum(result["z"]["logistic"] ** 2) <= CHI2_BOUND
    assert diff.mean() <= 3 * diff.std(ddof=1) / np.sqrt(REPLICATES)
