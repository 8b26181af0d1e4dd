"""Would the other policy have beaten ours? Every estimator against the on-policy truth on the Open Bandit Dataset.

    PYTHONPATH=. python benchmarks/obd_logged_policies.py [--campaigns all,men,women] [--hash-bits 12]

The obp 0.5.7 package ships the Open Bandit Dataset samples: per campaign (all, men, women) 10,000 rows logged by a
uniform random policy and 10,000 by Bernoulli Thompson sampling (BTS), three slots per impression, one row per slot.
Each pair is imported with its slots (``slot = "position"``, docs/rankings.md) into a temporary folder, and both
directions are estimated:

* **BTS on the random log**: ``--policy logged:BTS_LOG:frequencies`` evaluated on the random log;
* **random on the BTS log**: ``--policy logged:RANDOM_LOG:frequencies`` evaluated on the BTS log;

by dr-scale's estimators (DM, IPS, DR, SNIPS, SNDR, SwitchDR, ClippedDR; the reward model a ridge model fitted on
the evaluated log, cross-fitted over 2 folds, ``hash_bits`` 12), pooled over the slots and per slot, in one pass
(``evaluate_log(..., by_slot=True)``). The truth is the other log's on-policy value, its mean click rate (pooled
and per slot), itself a 10,000-row mean with a standard error (printed). Beside them, Open Bandit Pipeline's
estimators on the same rows and the same π (its ``position`` argument): IPW, SNIPW, DM, DR and SNDR, the regression
model obp's own ``RegressionModel`` (logistic regression over obp's context — the one-hot user features and the 80
user–item affinities — and the one-hot item features, 3-fold cross-fitted, ``fitting_method="normal"``, as in
obp's OBD examples). Also printed: the largest difference between dr-scale's estimates and obp's given dr-scale's
own reward model (their definitions agree; tests/ope/test_slots.py checks it to 1e-12).

Prints one table: per campaign, direction and estimator, the relative error (V̂ − V)/V of the pooled estimate and
of each slot's, and obp's pooled relative error with its own regression model.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile

import numpy as np
import pandas as pd

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import obp_equality  # noqa: E402,F401,I001 - stand-in torch and seaborn modules before obp is imported

import obp  # noqa: E402
from obp.ope import (  # noqa: E402
    DirectMethod,
    DoublyRobust,
    InverseProbabilityWeighting,
    RegressionModel,
    SelfNormalizedDoublyRobust,
    SelfNormalizedInverseProbabilityWeighting,
)
from sklearn.linear_model import LogisticRegression  # noqa: E402

from dr_scale import Evaluation, evaluate_log  # noqa: E402
from dr_scale.logs.importing import import_log  # noqa: E402
from dr_scale.logs.importing.convert import POSITION_BITS  # noqa: E402
from dr_scale.logs.reading import read_log  # noqa: E402
from dr_scale.ope.estimators import STANDARD_ESTIMATORS  # noqa: E402
from dr_scale.policies import parse_policy  # noqa: E402
from dr_scale.reward.fitting import FitSettings, fit_reward_model  # noqa: E402

DATA = pathlib.Path(obp.__file__).parent / "dataset" / "obd"
SPEC = """action = "item_id"
reward = "click"
propensity = "propensity_score"
timestamp = "timestamp"
slot = "position"
impression = ["timestamp", "user_feature_*"]
hash_bits = {bits}

[features]
categorical = ["user_feature_*", "position"]
numeric = ["user-item_affinity_*"]

[actions]
table = "{catalogue}"
key = "item_id"
categorical = ["item_feature_1", "item_feature_2", "item_feature_3"]
numeric = ["item_feature_0"]
"""
OBP = {"IPS": InverseProbabilityWeighting, "SNIPS": SelfNormalizedInverseProbabilityWeighting, "DM": DirectMethod,
       "DR": DoublyRobust, "SNDR": SelfNormalizedDoublyRobust}


def imported(folder: pathlib.Path, logger: str, campaign: str, bits: int) -> str:
    """The campaign's log of ``logger`` (random or bts), imported with slots into ``folder``."""
    raw = DATA / logger / campaign
    spec = folder / f"{logger}-{campaign}.toml"
    spec.write_text(SPEC.format(bits=bits, catalogue=raw / "item_context.csv"))
    out = folder / f"{logger}-{campaign}"
    import_log(str(raw / f"{campaign}.csv"), str(spec), str(out))
    return str(out)


def obp_context(logger: str, campaign: str) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """obp's pre-processing of the raw CSV (``OpenBanditDataset``): the context (one-hot user features and the
    affinities), the action context (one-hot item features beside item_feature_0), and the item ids."""
    raw = pd.read_csv(DATA / logger / campaign / f"{campaign}.csv", index_col=0)
    users = [c for c in raw.columns if c.startswith("user_feature")]
    affinity = [c for c in raw.columns if c.startswith("user-item_affinity")]
    context = pd.concat([pd.get_dummies(raw[users], drop_first=True), raw[affinity]], axis=1).to_numpy(float)
    items = pd.read_csv(DATA / logger / campaign / "item_context.csv", index_col=0)
    hashed = [c for c in items.columns if c.startswith("item_feature") and c != "item_feature_0"]
    action_context = pd.concat([items[["item_feature_0"]], pd.get_dummies(items[hashed], drop_first=True)],
                               axis=1).to_numpy(float)
    return raw, context, action_context


def run(campaign: str, direction: str, logs: dict[str, str], bits: int) -> list[dict]:
    """One campaign and direction: every estimator's relative error, ours per slot, obp's pooled."""
    evaluated, target = ("random", "bts") if direction == "BTS on random" else ("bts", "random")
    policy = parse_policy(f"logged:{logs[target]}:frequencies")
    truth, truth_se, _, _ = policy.stats.pooled_value()
    truth_slots = policy.stats.value()[0]
    model = fit_reward_model(logs[evaluated], FitSettings(folds=2))
    result = evaluate_log(logs[evaluated], Evaluation(policy, list(STANDARD_ESTIMATORS), reward_model=model),
                          by_slot=True)

    # the same rows for obp, in the raw file's order (row_id's low bits are the row's line in the file)
    parts = read_log(logs[evaluated], n_features=1 << bits)
    row = np.concatenate([p.row_id for p in parts]) & ((1 << POSITION_BITS) - 1)
    order = np.argsort(row)
    take = {name: np.concatenate([getattr(p, name) for p in parts])[order]
            for name in ("action", "reward", "propensity", "slot")}
    import scipy.sparse as sp

    X = sp.vstack([p.X for p in parts]).tocsr()[order]
    row_id = np.concatenate([p.row_id for p in parts])[order]
    raw, context, action_context = obp_context(evaluated, campaign)
    assert (raw["click"].to_numpy() == take["reward"]).all() and (raw["position"].to_numpy() - 1 == take["slot"]).all()
    n, k = len(row), policy.frequencies().shape[1]
    pi = policy.frequencies()
    action_dist = np.ascontiguousarray(np.broadcast_to(pi.T[None], (n, k, pi.shape[0])))
    regression = RegressionModel(LogisticRegression(C=100, max_iter=10000, random_state=12345), n_actions=k,
                                 len_list=pi.shape[0], action_context=action_context, fitting_method="normal")
    theirs_hat = regression.fit_predict(context, take["action"], take["reward"], position=take["slot"], n_folds=3,
                                        random_state=12345)
    ours_hat = np.ascontiguousarray(np.broadcast_to(model.predict(X, row_id=row_id)[:, :, None], (n, k, pi.shape[0])))
    rows, gap = [], 0.0
    for name in STANDARD_ESTIMATORS:
        line = {"campaign": campaign, "direction": direction, "truth": truth, "truth_se": truth_se, "estimator": name,
                "ours": result.pooled.estimates[name].value / truth - 1,
                "slots": [result.slots[s].estimates[name].value / truth_slots[s] - 1 for s in sorted(result.slots)]}
        if name in OBP:
            args = dict(reward=take["reward"], action=take["action"], pscore=take["propensity"],
                        position=take["slot"], action_dist=action_dist)
            theirs = OBP[name]().estimate_policy_value(**args, estimated_rewards_by_reg_model=theirs_hat)
            line["obp"] = theirs / truth - 1
            same = OBP[name]().estimate_policy_value(**args, estimated_rewards_by_reg_model=ours_hat)
            gap = max(gap, abs(same - result.pooled.estimates[name].value))
        rows.append(line)
    rows[0]["gap"] = gap
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", default="all,men,women")
    parser.add_argument("--hash-bits", type=int, default=12)
    args = parser.parse_args()
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        for campaign in args.campaigns.split(","):
            logs = {logger: imported(folder, logger, campaign, args.hash_bits) for logger in ("random", "bts")}
            for direction in ("BTS on random", "random on BTS"):
                lines += run(campaign, direction, logs, args.hash_bits)
    print("relative error (V̂ − V)/V against the other log's on-policy value V (its mean click rate)")
    print(f"{'campaign':<9}{'direction':<15}{'V (± s.e.)':<20}{'estimator':<11}{'dr-scale':>10}"
          f"{'slot 0':>9}{'slot 1':>9}{'slot 2':>9}{'obp':>9}")
    for line in lines:
        truth = f"{line['truth']:.5f} ± {line['truth_se']:.5f}"
        slots = "".join(f"{x:>+9.1%}" for x in line["slots"])
        theirs = f"{line['obp']:>+9.1%}" if "obp" in line else f"{'—':>9}"
        print(f"{line['campaign']:<9}{line['direction']:<15}{truth:<20}{line['estimator']:<11}{line['ours']:>+10.1%}"
              f"{slots}{theirs}")
    gaps = [line["gap"] for line in lines if "gap" in line]
    print(f"largest |dr-scale − obp| given dr-scale's reward model, over every campaign, direction and estimator: "
          f"{max(gaps):.1e}")
    print(f"(obp {obp.__version__})")


if __name__ == "__main__":
    main()
