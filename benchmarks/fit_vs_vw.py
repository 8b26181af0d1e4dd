"""Benchmark: ``dr-scale fit --folds 5`` vs one pass of VW ``--cb 10 --cb_type dr``, and the exact solve at its λ.

    pip install ".[benchmarks]"
    python benchmarks/fit_vs_vw.py --rows 10000000 --data data/bench

The data (cached under ``--data``, reused when present): one generated log,
``dr-scale generate bandit --rows N+H --features 262144 --actions 10 --seed 0``, whose
first N rows train and whose last H rows (``--heldout``, default N/10) are held out. They
are rows of the same world: the generator's ``--seed`` draws the world too, so another
seed would be another world. Each row is a function of (seed, d, k, row id) only, so the
split at a part boundary is the same as two logs of N and H rows. VW's text for the N
training rows (``a:cost:p | id id …``, actions from 1, cost = −reward) is written once,
then read from the page cache (the conversion is not timed).

In one run, each as its own process, its line printed as soon as it has run (wall time,
CPU time of the process and its children, peak resident memory, and the load average
before and after it):

(a) VW 9.11.9 ``--cb 10 --cb_type dr -b 18`` through its own text driver, one pass over
    the N training rows;
(b) ``dr-scale fit TRAIN --folds 5 --out FIT.npz`` with its default λ rule and tolerance
    (``--folds``; 0 fits the full-data model only);
(c) the exact solve at the λ that (b) chose: ``dr-scale fit TRAIN --folds 5 --lam λ
    --rtol 1e-10`` (``--exact-rtol``; left out with ``--skip-exact``).

The fits run as ``python -m dr_scale.cli`` under this interpreter and environment
(PYTHONPATH kept), so they measure whichever ``dr_scale`` this script imports.

Then each model's full-data ρ̂ predicts the held-out rows' logged actions (one part at a
time): held-out squared error (1/H) Σ_i (r_i − ρ̂(x_i, a_i))², beside two references on
the same rows: the held-out mean reward as a constant (the variance of r) and the true
E[r | x, a] (the noise floor). Printed: the table, the wall and CPU ratios fit / VW, the
CG passes and λ from the models' metadata, and the relative difference of the held-out
squared errors (fit − exact) / exact.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

import dr_scale
from dr_scale import LinearRewardModel, read_log
from dr_scale.logs.listing import list_parts

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from learn_vs_vw_scale import linked, timed, vw_text  # noqa: E402

FEATURES, ACTIONS, SEED = 262144, 10, 0
CLI = [sys.executable, "-m", "dr_scale.cli"]


def prepare(data: str, rows: int, heldout: int) -> tuple[list[str], list[str], str]:
    """The cached log (generated if absent), its training and held-out parts, and the training rows' VW text."""
    total = rows + heldout
    per_part = math.gcd(rows, heldout, 500_000)  # both ends of the split fall on part boundaries
    log = os.path.join(data, f"bandit-{total}")
    if not os.path.exists(os.path.join(log, "_manifest.json")):
        os.makedirs(data, exist_ok=True)
        start = time.perf_counter()
        subprocess.run([*CLI, "generate", "bandit", "--rows", str(total), "--features", str(FEATURES),
                        "--actions", str(ACTIONS), "--seed", str(SEED), "--rows-per-part", str(per_part),
                        "--out", log, "--overwrite", "--no-progress"], check=True)
        print(f"generated {log} in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    _, paths = list_parts(log)
    sizes = [pq.ParquetFile(p).metadata.num_rows for p in paths]
    if sum(sizes) != total or sum(sizes[:len(paths) - heldout // per_part]) != rows:
        sys.exit(f"{log} does not split into {rows:,} + {heldout:,} rows at a part boundary: remove it")
    train, held = paths[:len(paths) - heldout // per_part], paths[len(paths) - heldout // per_part:]
    text = os.path.join(data, f"bandit-{total}-train-{rows}.vw")
    if not os.path.exists(text):
        start = time.perf_counter()
        vw_text(train, text + ".partial", labelled=True)
        os.replace(text + ".partial", text)
        print(f"wrote {text} in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return train, held, text


def measured(command: list[str]) -> dict:
    """:func:`timed` with the 1-minute load average before and after."""
    before = os.getloadavg()[0]
    result = timed(command)
    result["load"] = (before, os.getloadavg()[0])
    return result


def fitted(command: list[str], out: str) -> dict:
    result = measured([*command, "--out", out, "--no-progress"])
    model = LinearRewardModel.load(out)
    result["model"] = model
    result["lam"] = float(model.metadata["lam"])
    result["passes"] = model.metadata.get("passes")
    return result


def heldout_errors(paths: list[str], models: dict) -> tuple[dict, float, float, int]:
    """Each model's held-out squared error on the logged actions; the variance of r; the true E[r|x,a]'s error."""
    sse = dict.fromkeys(models, 0.0)
    n, total, squares, floor = 0, 0.0, 0.0, 0.0
    for path in paths:  # one part at a time: memory bounded by a part
        [part] = read_log(path, n_features=FEATURES, n_actions=ACTIONS)
        rows = np.arange(len(part))
        for name, model in models.items():
            sse[name] += float(np.sum((part.reward - model.predict(part.X)[rows, part.action]) ** 2))
        expected = pc.list_flatten(pq.read_table(path, columns=["expected_reward"]).column("expected_reward"))
        truth = expected.to_numpy().reshape(-1, ACTIONS)[rows, part.action]
        floor += float(np.sum((part.reward - truth) ** 2))
        n, total, squares = n + len(part), total + float(part.reward.sum()), squares + float(part.reward @ part.reward)
    return {name: s / n for name, s in sse.items()}, squares / n - (total / n) ** 2, floor / n, n


def report(name: str, r: dict) -> None:
    """One measured command's line, printed as soon as it has run."""
    fit = f" {r['passes']:>7} {r['lam']:>8g}" if "lam" in r else ""
    print(f"{name:<26} {r['wall']:>9.1f} {r['cpu']:>9.1f} {r['rss_gib']:>15.2f} "
          f"{r['load'][0]:>4.1f}/{r['load'][1]:<4.1f}{fit}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="training rows N (default 10,000,000)")
    parser.add_argument("--heldout", type=int, help="held-out rows H after them (default N/10)")
    parser.add_argument("--data", default="data/bench",
                        help="folder of the cached log and VW text (default data/bench)")
    parser.add_argument("--folds", type=int, default=5, help="fit's --folds (default 5; 0: no fold models)")
    parser.add_argument("--exact-rtol", type=float, default=1e-10, help="the exact solve's --rtol (default 1e-10)")
    parser.add_argument("--skip-exact", action="store_true", help="do not run the exact solve (c)")
    parser.add_argument("--skip-vw", action="store_true", help="do not run VW (a)")
    args = parser.parse_args()
    heldout = args.heldout or args.rows // 10
    train, held, text = prepare(args.data, args.rows, heldout)
    print(f"{args.rows:,} training rows ({len(train)} parts), {heldout:,} held-out rows ({len(held)} parts) of "
          f"{args.data}/bandit-{args.rows + heldout}; dr_scale from {os.path.dirname(dr_scale.__file__)}; "
          f"{os.cpu_count()} cores; load average 1-minute before/after each command")
    print(f"{'':<26} {'wall (s)':>9} {'CPU (s)':>9} {'peak RSS (GiB)':>15} {'load avg':>10} {'passes':>7} {'λ':>8}",
          flush=True)
    runs = {}
    with tempfile.TemporaryDirectory(prefix="fit-vs-vw-", dir=args.data) as work:
        train_log = linked(train, os.path.join(work, "train"))
        subprocess.run(["cat", text], stdout=subprocess.DEVNULL, check=True)  # VW reads from the page cache
        if not args.skip_vw:
            runs["VW --cb_type dr, 1 pass"] = measured([sys.executable, "-c", (
                "from vowpalwabbit import Workspace\n"
                f"w = Workspace('--cb {ACTIONS} --cb_type dr -b 18 -d {text} -f {work}/model.vw --quiet')\n"
                "w.run_parser(); w.finish()")])
            report("VW --cb_type dr, 1 pass", runs["VW --cb_type dr, 1 pass"])
        fit = [*CLI, "fit", train_log, *(["--folds", str(args.folds)] if args.folds else [])]
        name = "fit (default λ rule)"
        runs[name] = fitted(fit, os.path.join(work, "fit.npz"))
        report(name, runs[name])
        lam = runs[name]["lam"]
        if not args.skip_exact:
            name = f"exact solve at λ = {lam:g}"
            runs[name] = fitted([*fit, "--lam", repr(lam), "--rtol", repr(args.exact_rtol)],
                                os.path.join(work, "exact.npz"))
            report(name, runs[name])
    for name, r in runs.items():
        if r["output"]:
            print(f"  {name}: {r['output'][0]}")
    models = {name: r["model"] for name, r in runs.items() if "model" in r}
    mse, variance, floor, n = heldout_errors(held, models)
    print(f"held-out squared error on the {n:,} held-out rows' logged actions: "
          + ", ".join(f"{name} {value:.6f}" for name, value in mse.items())
          + f"; references: variance of r {variance:.6f}, true E[r|x,a] {floor:.6f}")
    names = list(runs)
    if not args.skip_vw:
        ours, vw = runs[names[1]], runs[names[0]]
        print(f"ratios fit / VW: wall {ours['wall'] / vw['wall']:.2f}, CPU {ours['cpu'] / vw['cpu']:.2f} "
              "(target: wall ≤ 1)")
    if not args.skip_exact:
        a, b = mse[names[-2]], mse[names[-1]]
        print(f"held-out MSE (fit − exact) / exact: {(a - b) / b:+.4%} (target: within ±0.5%)")


if __name__ == "__main__":
    main()
