"""A raw click table end to end — import, fit-propensity, fit, learn, evaluate, report — beside the bare read.

    python benchmarks/end_to_end.py --rows 1000000 --work data/e2e
    python benchmarks/end_to_end.py --rows 10000000 --work data/e2e --workers 2 --memory-limit 4GiB
    python benchmarks/end_to_end.py --rows 10000000 --work data/e2e --from evaluate   # the last stages again

The raw table is ``benchmarks/import_throughput.py``'s CSV (a timestamp over 7 days, 20 items, 5 categorical
columns of 10^3 … 10^6 levels and 20 numeric ones) made a click world: the logger shows item a with probability
p(a) ∝ 1.15^(−a) (its ``propensity`` column) and a row is clicked with probability σ(b_a + 0.3 num_0), b_a set
for a click rate near 0.5% — rows of a part drawn in chunks, never the whole table in memory.

Each stage is one ``dr-scale`` command on a ``LocalCluster`` of ``--workers`` single-threaded worker processes
(``--local-workers``), each with ``--memory-limit`` (``DASK_DR_SCALE__WORKER_MEMORY_LIMIT``; beyond 70% of it a
worker spills, beyond 95% it is restarted), and is measured: wall seconds; CPU seconds of the command and every
process it started (psutil, sampled every 0.2 s: the last reading of each process); the peak resident memory of
the command (the client) and of its largest worker, beside the limit; the peak bytes in the workers' spill
directories (``DASK_TEMPORARY_DIRECTORY``, sampled). Then the bare read of the imported log (every part's columns
into CSR, this process, Dask's threads) gives the floor each stage is compared with: its wall time over the read's.

Stages: ``import RAW --spec SPEC``; ``fit-propensity`` (the logging policy, though the log has its propensities:
the multinomial fit at scale); ``learn --split train`` (the DR-imputed linear policy on the default train split,
80% of the rows, with its own cross-fitted reward model); ``fit --split test --folds 5`` (the default logistic
reward model of the evaluation rows, cross-fitted); ``evaluate --split test`` of the learned, the uniform and a
constant policy with DM, IPS, DR, SNIPS, SNDR and that model; ``report --window 7d --split test`` of the same.
Every stage reads every part; the figures per million are per million rows of the log. Each figure is
printed per million rows, so that runs at two sizes give the scaling (docs/benchmarks.md, "End to end").
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.csv as pcsv
from dask.utils import parse_bytes

sys.path.insert(0, str(Path(__file__).resolve().parent))
from evaluate_throughput import bare_read as read_into_csr  # noqa: E402  (the floor every stage is set against)
from import_throughput import LEVELS, N_NUMERIC, SPEC, K, _schema  # noqa: E402  (the raw table's shape)

ESTIMATORS = "DM,IPS,DR,SNIPS,SNDR"
STAGES = ("import", "fit-propensity", "learn", "fit", "evaluate", "report")
CLICK_RATE = 0.005


def click_world(path: Path, rows: int, seed: int = 0, chunk: int = 500_000) -> float:
    """The raw CSV with logged propensities and rare clicks, in chunks; returns its click rate."""
    rng = np.random.default_rng(seed)
    start = np.datetime64("2026-11-01T00:00:00", "s")
    logging = 1.15 ** -np.arange(K)
    logging /= logging.sum()
    offsets = np.log(CLICK_RATE) + rng.normal(0.0, 0.5, K)
    clicks = 0
    with pcsv.CSVWriter(str(path), schema=_schema()) as writer:
        for lo in range(0, rows, chunk):
            n = min(chunk, rows - lo)
            seconds = (lo + np.arange(n)) * (7 * 86400) // rows  # in time order over 7 days
            item = rng.choice(K, size=n, p=logging)
            numeric = np.round(rng.normal(size=(N_NUMERIC, n)), 4)
            click = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(offsets[item] + 0.3 * numeric[0])))
            clicks += int(click.sum())
            cols = {"ts": pa.array((start + seconds.astype("timedelta64[s]")).astype(str)),
                    "item": pa.array(np.char.add("item_", item.astype(str))),
                    "click": pa.array(click.astype(np.int64)), "propensity": pa.array(logging[item])}
            for j, levels in enumerate(LEVELS):
                cols[f"cat_{j}"] = pa.array(rng.zipf(1.3, n) % levels)
            for j in range(N_NUMERIC):
                cols[f"num_{j}"] = pa.array(numeric[j])
            writer.write_table(pa.table(cols, schema=_schema()))
    return clicks / rows


def folder_bytes(folder: str) -> int:
    """The bytes of the files under ``folder`` (0 where it or a file vanished meanwhile)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def measured(argv: list[str], env: dict) -> dict:
    """Run one command; its wall and CPU seconds, the client's and the largest worker's peak RSS, the spill."""
    spill = env["DASK_TEMPORARY_DIRECTORY"]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    root = psutil.Process(proc.pid)
    cpu, peak, peak_spill = {}, {}, 0
    output: list[bytes] = []
    reader = threading.Thread(target=lambda: output.append(proc.stdout.read()))
    reader.start()
    while proc.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        for p in tree:
            try:
                with p.oneshot():
                    times, rss = p.cpu_times(), p.memory_info().rss
            except psutil.NoSuchProcess:
                continue
            cpu[p.pid] = times.user + times.system
            peak[p.pid] = max(peak.get(p.pid, 0), rss)
        peak_spill = max(peak_spill, folder_bytes(spill))
        time.sleep(0.2)
    reader.join()
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:3])} failed ({proc.returncode}):\n{output[0].decode()[-3000:]}")
    workers = [rss for pid, rss in peak.items() if pid != proc.pid]
    return dict(wall=wall, cpu=sum(cpu.values()), client=peak.get(proc.pid, 0), worker=max(workers, default=0),
                spill=peak_spill)


def bare_read(logs: str) -> float:
    """Seconds of the bare read of every part (``evaluate_throughput.bare_read``: its columns into CSR, Dask's
    threads), the better of two."""
    best = float("inf")
    for _ in range(2):
        start = time.perf_counter()
        read_into_csr(logs, ("row_id", "features", "values", "action", "reward", "propensity"), 2 ** 18)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--work", default="data/e2e", help="a folder for the raw table, the log and the outputs")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="4GiB", help="each worker's memory limit")
    parser.add_argument("--from", dest="first", default="import", choices=STAGES,
                        help="rerun from this stage, on the outputs an earlier run left in --work")
    args = parser.parse_args()
    work = Path(args.work) / f"rows-{args.rows}"
    limit = parse_bytes(args.memory_limit)
    raw, logs, spec = work / "raw.csv", work / "logs", work / "spec.toml"
    if args.first == "import":
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        start = time.perf_counter()
        rate = click_world(raw, args.rows)
        spec.write_text(SPEC)
        print(f"raw CSV: {args.rows:,} rows, click rate {rate:.4%}, {raw.stat().st_size / 2 ** 30:.2f} GiB, "
              f"{time.perf_counter() - start:.0f} s to write; {args.workers} workers of {args.memory_limit} each",
              flush=True)
    elif not logs.is_dir():
        raise SystemExit(f"--from {args.first}: no log under {work} (run from import first)")
    policies = work / "policies.toml"
    # paths relative to the policies file's folder, the work folder (as a report reads them)
    policies.write_text(f'reward_model = "reward.npz"\nestimators = {ESTIMATORS.split(",")!r}\n'
                        '[[policy]]\nname = "learned"\nspec = "linear:policy.npz"\n'
                        '[[policy]]\nname = "uniform"\nspec = "uniform"\n'
                        '[[policy]]\nname = "always-3"\nspec = "constant:item_3"\n')
    cli = [sys.executable, "-m", "dr_scale.cli"]
    cluster = ["--local-workers", str(args.workers), "--no-progress"]
    stages = [
        ("import", ["import", str(raw), "--spec", str(spec), "--out", str(logs)]),
        ("fit-propensity", ["fit-propensity", str(logs), "--out", str(work / "propensity.npz")]),
        ("learn", ["learn", str(logs), "--split", "train", "--out", str(work / "policy.npz")]),
        ("fit", ["fit", str(logs), "--split", "test", "--folds", "5", "--out", str(work / "reward.npz")]),
        ("evaluate", ["evaluate", str(logs), "--policy", f"linear:{work / 'policy.npz'}", "--policy", "uniform",
                      "--policy", "constant:item_3", "--reward-model", str(work / "reward.npz"), "--split", "test",
                      "--estimators", ESTIMATORS]),
        ("report", ["report", "--logs", str(logs), "--policies", str(policies), "--window", "7d",
                       "--split", "test", "--out", str(work / "report")]),
    ]
    assert [name for name, _ in stages] == list(STAGES)
    stages = stages[STAGES.index(args.first):]
    results = {}
    with tempfile.TemporaryDirectory(dir=work) as spill:
        env = {**os.environ, "DASK_DR_SCALE__WORKER_MEMORY_LIMIT": args.memory_limit,
               "DASK_TEMPORARY_DIRECTORY": spill}
        shutil.rmtree(work / "report", ignore_errors=True)  # a full report, not an incremental one over its cache
        for name, argv in stages:
            results[name] = measured([*cli, *argv, *cluster], env)
            r = results[name]
            print(f"{name}: {r['wall']:.1f} s, CPU {r['cpu']:.1f} s, peak client {r['client'] / 2 ** 30:.2f} GiB, "
                  f"largest worker {r['worker'] / 2 ** 30:.2f} GiB", flush=True)
    read = bare_read(str(logs))
    per = args.rows / 1e6
    print(f"\n{args.rows:,} rows, {args.workers} workers × {args.memory_limit}; bare read {read:.1f} s "
          f"({read / per:.2f} s per million rows)")
    print(f"{'stage':<16} {'wall s':>8} {'s/M rows':>9} {'× read':>7} {'CPU s':>8} {'client GiB':>11} "
          f"{'worker GiB':>11} {'under limit':>12} {'spill MiB':>10}")
    for name, r in results.items():
        print(f"{name:<16} {r['wall']:>8.1f} {r['wall'] / per:>9.2f} {r['wall'] / read:>7.1f} {r['cpu']:>8.1f} "
              f"{r['client'] / 2 ** 30:>11.2f} {r['worker'] / 2 ** 30:>11.2f} "
              f"{'yes' if r['worker'] < limit else 'NO':>12} {r['spill'] / 2 ** 20:>10.1f}")


if __name__ == "__main__":
    main()
