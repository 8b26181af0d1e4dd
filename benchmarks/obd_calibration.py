"""The default reward model against ridge on rare clicks, side by side in one run: the Open Bandit Dataset samples that
ship in obp's package, and generated click worlds.

    PYTHONPATH=. python benchmarks/obd_calibration.py [--part obd|bts|worlds|all] [--seeds S]

1. **obd**: the six raw logs (random and BTS logging × campaigns all, men, women; 10,000 rows, 80/34/46 items)
   imported with ``dr-scale import`` (tests/fixtures/obd/obd.toml); per log the default reward model (logistic,
   cross-fitted over 5 folds, as ``evaluate --fit-reward-model``) and ``--model ridge``, then
   ``dr-scale evaluate LOGS --policy logging --estimators DM,IPS``: the log's own click rate (IPS = the mean) and its
   95% interval, DM and its interval with each model, whether DM lies within the own rate's interval, DM's relative
   error, and each model's ECE by decile (``model.metadata["calibration"]``).
2. **bts**: the BTS policy (obp's ``BernoulliTS`` with ZOZOTOWN's prior, 100,000 simulations, a distribution per
   position) evaluated on the random log of each campaign (``--policy probs:bts``, the BTS probabilities of the row's
   position in a list column); the truth is the BTS log's own click rate. DR with the default model and with ridge,
   beside obp's ``DoublyRobust`` on the same rows with obp's ``RegressionModel`` (scikit-learn's
   ``LogisticRegression``, cross-fitted over 3 folds as in obp's examples): relative errors.
3. **worlds**: generated click worlds (``generate bandit --click-rate``; items, rows, click rate below, S seeds
   each); ``--policy uniform`` (truth: the mean of the constant policies' true values in the manifest), cross-fitted
   DR and DM with each model: DR's rmse over the worlds' relative errors, each model's mean ECE, and the paired
   difference of the two DRs' squared relative errors (mean ± one standard error over the logs).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import tempfile
import time

import numpy as np
import pyarrow as pa

from dr_scale.cli import main as cli
from dr_scale.logs.importing import import_log
from dr_scale.reward.fitting import FitSettings, fit_reward_model
from dr_scale.synthetic.bandit import generate_bandit

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "obd"
CAMPAIGNS = ("all", "men", "women")
FOLDS = 5
#: (items, rows, click rate) of the generated worlds, with 4,096 hashed features.
WORLDS = ((80, 20_000, 0.005), (80, 200_000, 0.003), (500, 100_000, 0.01), (500, 1_000_000, 0.005))
MODELS = (("default", None), ("ridge", "ridge"))


def obd_folder() -> pathlib.Path:
    """The OBD samples in obp's package."""
    import obp

    return pathlib.Path(obp.__file__).parent / "dataset" / "obd"


def imported(root: pathlib.Path, policy: str, campaign: str) -> str:
    """The raw log of (policy, campaign) imported with ``dr-scale import`` under ``root``."""
    source = obd_folder() / policy / campaign
    folder = root / f"{policy}_{campaign}"
    folder.mkdir()
    for name in (f"{campaign}.csv", "item_context.csv"):
        shutil.copy(source / name, folder / name)
    (folder / "obd.toml").write_text((FIXTURES / "obd.toml").read_text())
    logs = str(folder / "logs")
    import_log(str(folder / f"{campaign}.csv"), str(folder / "obd.toml"), logs)
    return logs


def fitted(logs: str, model: str | None, root: pathlib.Path) -> tuple[str, dict]:
    """The reward model (cross-fitted over FOLDS) written under ``root``, and its calibration record."""
    m = fit_reward_model(logs, FitSettings(folds=FOLDS, model=model))
    path = str(root / f"model-{abs(hash((logs, model)))}.npz")
    m.save(path)
    return path, m.metadata["calibration"]


def evaluated(logs: str, policy: str, model_path: str, estimators: str, root: pathlib.Path) -> dict:
    """``dr-scale evaluate`` with the reward model file: the JSON's estimates."""
    out = str(root / f"evaluate-{time.monotonic_ns()}.json")
    assert cli(["evaluate", logs, "--policy", policy, "--reward-model", model_path, "--estimators", estimators,
                "--json", out, "--no-progress"]) == 0
    return json.loads(pathlib.Path(out).read_text())["estimates"]


def part_obd(root: pathlib.Path, only: list[str], models: list[str]) -> None:
    print("\n1. DM of the logging policy against the log's own click rate (95% intervals; cross-fitted, "
          f"{FOLDS} folds)")
    print(f"{'log':<14} {'own rate [95% CI]':>30} {'model':>8} {'DM [95% CI]':>30} {'in CI':>6} {'rel. err':>9} "
          f"{'ECE':>9}")
    for policy in ("random", "bts"):
        for campaign in CAMPAIGNS:
            if only and f"{policy}/{campaign}" not in only:
                continue
            logs = imported(root, policy, campaign)
            for name, model in MODELS:
                if models and name not in models:
                    continue
                path, calibration = fitted(logs, model, root)
                est = evaluated(logs, "logging", path, "DM,IPS", root)
                own, dm = est["IPS"], est["DM"]
                inside = own["ci"][0] <= dm["value"] <= own["ci"][1]
                print(f"{policy + '/' + campaign:<14} {own['value']:>9.5f} [{own['ci'][0]:.5f}, {own['ci'][1]:.5f}] "
                      f"{name:>8} {dm['value']:>9.5f} [{dm['ci'][0]:.5f}, {dm['ci'][1]:.5f}] "
                      f"{'yes' if inside else 'NO':>6} {dm['value'] / own['value'] - 1:>+9.1%} "
                      f"{calibration['ece']:>9.2e}", flush=True)


def bts_log(root: pathlib.Path, campaign: str) -> tuple[str, float, float]:
    """(the random log of ``campaign`` with BTS's probabilities of the row's position as the list column ``bts``,
    BTS's on-policy click rate, obp's DR of BTS on the random log)."""
    import pandas as pd
    from obp.ope import DoublyRobust, OffPolicyEvaluation, RegressionModel
    from obp.policy import BernoulliTS
    from sklearn.linear_model import LogisticRegression

    import dr_scale

    # obp's OpenBanditDataset's pre-processing fails on the installed pandas (DataFrame.drop(…, 1)): its arrays are
    # built here as it builds them — context: the user features one-hot (drop_first), position 0-based
    df = pd.read_csv(obd_folder() / "random" / campaign / f"{campaign}.csv", index_col=0)
    k = int(df["item_id"].max()) + 1
    feedback = {"n_rounds": len(df), "action": df["item_id"].to_numpy(), "reward": df["click"].to_numpy(),
                "pscore": df["propensity_score"].to_numpy(), "position": df["position"].to_numpy() - 1,
                "context": pd.get_dummies(df.filter(like="user_feature"), drop_first=True).to_numpy(float)}
    truth = pd.read_csv(obd_folder() / "bts" / campaign / f"{campaign}.csv", index_col=0)["click"].mean()
    bts = BernoulliTS(n_actions=k, len_list=3, is_zozotown_prior=True, campaign=campaign, random_state=12345)
    dist = bts.compute_batch_action_dist(n_sim=100_000, n_rounds=feedback["n_rounds"])  # (n, k, positions)
    regression = RegressionModel(n_actions=k, len_list=3, base_model=LogisticRegression(max_iter=10_000))
    predicted = regression.fit_predict(context=feedback["context"], action=feedback["action"],
                                       reward=feedback["reward"], position=feedback["position"],
                                       pscore=feedback["pscore"], n_folds=3, random_state=12345)
    obp_dr = OffPolicyEvaluation(bandit_feedback=feedback, ope_estimators=[DoublyRobust()]).estimate_policy_values(
        action_dist=dist, estimated_rewards_by_reg_model=predicted)["dr"]

    spec = {"action": "item_id", "reward": "click", "propensity": "propensity_score", "timestamp": "timestamp",
            "features": {"categorical": ["user_feature_*", "position"], "numeric": ["user-item_affinity_*"]},
            "hash_bits": 18}
    log = dr_scale.from_pandas(df, spec, actions=list(range(k)))  # action id = obp's item id; rows in df's order
    assert (np.asarray(log.action) == feedback["action"]).all() and (np.asarray(log.reward) == feedback["reward"]).all()
    probs = dist[0][:, feedback["position"]].T  # BTS is context-free: row 0's distribution, at the row's position
    table = log.table.append_column("bts", pa.array(list(probs), type=pa.list_(pa.float64())))
    logs = str(root / f"random-{campaign}-bts")
    dr_scale.write_log(table, logs, n_features=2 ** 18, n_actions=k)
    return logs, float(truth), float(obp_dr)


def part_bts(root: pathlib.Path, only: list[str]) -> None:
    print("\n2. BTS evaluated on the random log (truth: BTS's on-policy click rate); cross-fitted, "
          f"{FOLDS} folds")
    print(f"{'campaign':<9} {'truth':>9} {'obp DR':>9} {'obp err':>8} {'model':>8} {'DR [95% CI]':>30} {'DR err':>8} "
          f"{'covers':>7} {'DM':>9} {'DM err':>8}")
    for campaign in CAMPAIGNS:
        if only and campaign not in only:
            continue
        logs, truth, obp_dr = bts_log(root, campaign)
        for name, model in MODELS:
            path, _ = fitted(logs, model, root)
            est = evaluated(logs, "probs:bts", path, "DM,DR", root)
            dr, dm = est["DR"], est["DM"]
            print(f"{campaign:<9} {truth:>9.5f} {obp_dr:>9.5f} {abs(obp_dr / truth - 1):>8.1%} {name:>8} "
                  f"{dr['value']:>9.5f} [{dr['ci'][0]:.5f}, {dr['ci'][1]:.5f}] {abs(dr['value'] / truth - 1):>8.1%} "
                  f"{'yes' if dr['ci'][0] <= truth <= dr['ci'][1] else 'NO':>7} {dm['value']:>9.5f} "
                  f"{abs(dm['value'] / truth - 1):>8.1%}", flush=True)


def part_worlds(root: pathlib.Path, seeds: int, worlds) -> None:
    print(f"\n3. Generated click worlds, --policy uniform, cross-fitted over {FOLDS} folds ({seeds} seed(s) each)")
    print(f"{'items':>6} {'rows':>10} {'CTR':>7} {'seed':>5} {'truth':>9} {'model':>8} {'DR':>9} {'DR err':>8} "
          f"{'DM':>9} {'DM err':>8} {'ECE':>9} {'seconds':>8}")
    errors: dict[str, list] = {name: [] for name, _ in MODELS}
    eces: dict[str, list] = {name: [] for name, _ in MODELS}
    for items, rows, rate in worlds:
        for seed in range(seeds):
            logs = str(root / f"world-{items}-{rows}-{seed}")
            manifest = generate_bandit(logs, rows=rows, features=4096, actions=items, seed=seed, click_rate=rate)
            truth = float(np.mean(manifest["calibration"]["constant_values"]))
            for name, model in MODELS:
                start = time.perf_counter()
                path, calibration = fitted(logs, model, root)
                est = evaluated(logs, "uniform", path, "DM,DR", root)
                seconds = time.perf_counter() - start
                dr, dm = est["DR"]["value"], est["DM"]["value"]
                errors[name].append(dr / truth - 1)
                eces[name].append(calibration["ece"])
                print(f"{items:>6} {rows:>10,} {manifest['calibration']['mean_reward']:>7.4f} {seed:>5} "
                      f"{truth:>9.5f} {name:>8} {dr:>9.5f} {dr / truth - 1:>+8.1%} {dm:>9.5f} {dm / truth - 1:>+8.1%} "
                      f"{calibration['ece']:>9.2e} {seconds:>8.1f}", flush=True)
            shutil.rmtree(logs)
    for name, _ in MODELS:
        e = np.asarray(errors[name])
        print(f"{name:>8}: DR relative rmse {np.sqrt(np.mean(e ** 2)):.1%} over {e.size} logs, mean ECE "
              f"{np.mean(eces[name]):.3e}")
    # both DRs are unbiased (true propensities, cross-fitted ρ̂): their squared errors differ by the models' variance,
    # which the logs' paired differences measure; one standard error of their mean beside it
    delta = np.asarray(errors["default"]) ** 2 - np.asarray(errors["ridge"]) ** 2
    se = delta.std(ddof=1) / np.sqrt(delta.size) if delta.size > 1 else float("nan")
    print(f"paired: mean (DR error² default − ridge) {delta.mean():+.2e} ± {se:.2e} (one standard error) over "
          f"{delta.size} logs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("obd", "bts", "worlds", "all"), default="all")
    parser.add_argument("--seeds", type=int, default=2, help="seeds per generated world (default 2)")
    parser.add_argument("--worlds", type=int, default=len(WORLDS), help="the first N worlds of WORLDS")
    parser.add_argument("--model", action="append", default=[], choices=[name for name, _ in MODELS],
                        help="obd: only this model (default or ridge); repeatable")
    parser.add_argument("--only", action="append", default=[],
                        help="only this log (obd: e.g. random/men) or campaign (bts: e.g. men); repeatable")
    args = parser.parse_args()
    root = pathlib.Path(tempfile.mkdtemp(prefix="dr-scale-obd-calibration-"))
    os.environ.setdefault("DR_SCALE_NO_PROGRESS", "1")
    try:
        if args.part in ("obd", "all"):
            part_obd(root, args.only, args.model)
        if args.part in ("bts", "all"):
            part_bts(root, args.only)
        if args.part in ("worlds", "all"):
            part_worlds(root, args.seeds, WORLDS[:args.worlds])
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
