"""``dr-scale import`` beside what a user would write: ``read_csv`` + ``FeatureHasher`` + ``write_log``.

    PYTHONPATH=$PWD python benchmarks/import_throughput.py --rows 1000000 --work /tmp/import-bench

A generated raw CSV: a timestamp over 7 days, an action of 20 values, a click, its
propensity, 5 categorical columns of 10^3, 10^4, 10^5, 10^6 and 10^6 levels and 20 numeric
columns (default 10M rows). Both runs are separate processes, timed by wall clock, with
their CPU time (user + system) and peak RSS from ``wait4`` (CPU time is the figure other
processes on a shared machine leave alone; the load average is printed beside):

* ``dr-scale import RAW --spec SPEC --out LOGS`` (Dask's local threaded scheduler);
* the baseline: ``pandas.read_csv`` of the whole file, ``FeatureHasher(2**18,
  alternate_sign=False)`` on the rows as dicts (categoricals as text, so ``"c=v"``;
  numbers as values), the action's values sorted and coded, and ``write_log(...,
  partition_by="date")``.

The two logs' rows are matched by day and position and their features and values
compared (identical hashed features is the check; values as float32 both). With
``--no-baseline`` only the import runs (the baseline holds the whole table and its dicts
in memory: ~30 GB at 10M rows).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

LEVELS = (10**3, 10**4, 10**5, 10**6, 10**6)
N_NUMERIC = 20
K = 20
SPEC = """action = "item"
reward = "click"
propensity = "propensity"
timestamp = "ts"
hash_bits = 18
[features]
categorical = ["cat_*"]
numeric = ["num_*"]
"""

BASELINE = r'''
import sys, numpy as np, pandas as pd, pyarrow as pa
from sklearn.feature_extraction import FeatureHasher
from dr_scale.logs.writing import write_log
raw, out = sys.argv[1], sys.argv[2]
df = pd.read_csv(raw)
cats = [c for c in df.columns if c.startswith("cat_")]
nums = [c for c in df.columns if c.startswith("num_")]
df[cats] = df[cats].astype(str)
X = FeatureHasher(2**18, alternate_sign=False).transform(df[cats + nums].to_dict("records")).tocsr()
X.eliminate_zeros()
items = np.sort(df["item"].unique())
table = pa.table({
    "row_id": np.arange(len(df), dtype=np.int64),
    "features": pa.ListArray.from_arrays(pa.array(X.indptr.astype(np.int32)), pa.array(X.indices.astype(np.int32))),
    "values": pa.ListArray.from_arrays(pa.array(X.indptr.astype(np.int32)), pa.array(X.data.astype(np.float32))),
    "action": np.searchsorted(items, df["item"].to_numpy()).astype(np.int32),
    "reward": df["click"].to_numpy(float), "propensity": df["propensity"].to_numpy(float),
    "date": pd.to_datetime(df["ts"]).dt.strftime("%Y-%m-%d").to_numpy(),
})
write_log(table, out, partition_by="date", n_features=2**18, n_actions=len(items))
'''


def generate(path: Path, rows: int, seed: int = 0, chunk: int = 500_000) -> None:
    """The raw CSV, written in chunks (never the whole table in memory)."""
    rng = np.random.default_rng(seed)
    start = np.datetime64("2026-11-01T00:00:00", "s")
    with pcsv.CSVWriter(str(path), schema=_schema()) as writer:
        for lo in range(0, rows, chunk):
            n = min(chunk, rows - lo)
            seconds = (lo + np.arange(n)) * (7 * 86400) // rows  # in time order over 7 days
            cols = {"ts": pa.array((start + seconds.astype("timedelta64[s]")).astype(str)),
                    "item": pa.array(np.char.add("item_", rng.integers(0, K, n).astype(str))),
                    "click": pa.array(rng.integers(0, 2, n)),
                    "propensity": pa.array(np.full(n, 1 / K))}
            for j, levels in enumerate(LEVELS):
                cols[f"cat_{j}"] = pa.array(rng.zipf(1.3, n) % levels)
            for j in range(N_NUMERIC):
                cols[f"num_{j}"] = pa.array(np.round(rng.normal(size=n), 4))
            writer.write_table(pa.table(cols, schema=_schema()))


def _schema() -> pa.Schema:
    fields = [("ts", pa.string()), ("item", pa.string()), ("click", pa.int64()), ("propensity", pa.float64())]
    fields += [(f"cat_{j}", pa.int64()) for j in range(len(LEVELS))]
    fields += [(f"num_{j}", pa.float64()) for j in range(N_NUMERIC)]
    return pa.schema(fields)


def run_child(argv: list[str], env: dict) -> tuple[float, float, float, str]:
    """(wall seconds, CPU seconds (user + system), peak RSS GiB, stdout) — the child's own rusage via wait4.

    CPU seconds are the figure that other processes on a shared machine do not change.
    """
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    chunks_out, err_chunks = [], []
    t_err = threading.Thread(target=lambda: err_chunks.append(proc.stderr.read()))
    t_err.start()
    chunks_out.append(proc.stdout.read())
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    t_err.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed ({proc.returncode}):\n{err_chunks[0].decode()[-3000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 2**20, chunks_out[0].decode()


def rows_by_day(folder: Path) -> dict:
    """{day: (row positions, features, values)} of a log (the position: the row id's low 36 bits)."""
    out = {}
    for day_dir in sorted(folder.glob("date=*")):
        t = pa.concat_tables([pq.read_table(p) for p in sorted(day_dir.glob("*.parquet"))])
        pos = t.column("row_id").to_numpy() & ((1 << 36) - 1)
        order = np.argsort(pos)
        out[day_dir.name] = (pos[order], t.column("features").take(pa.array(order)),
                             t.column("values").take(pa.array(order)))
    return out


def compare(ours: Path, theirs: Path) -> dict:
    a, b = rows_by_day(ours), rows_by_day(theirs)
    assert a.keys() == b.keys(), (a.keys(), b.keys())
    rows = mismatched = 0
    for day in a:
        pa_, fa, va = a[day]
        pb, fb, vb = b[day]
        assert np.array_equal(pa_, pb), day
        rows += pa_.size
        fa, fb = fa.combine_chunks(), fb.combine_chunks()
        same_offsets = np.array_equal(np.asarray(fa.offsets), np.asarray(fb.offsets))
        same_features = same_offsets and np.array_equal(np.asarray(fa.flatten()), np.asarray(fb.flatten()))
        va, vb = va.combine_chunks().flatten().to_numpy(), vb.combine_chunks().flatten().to_numpy()
        same_values = same_features and np.array_equal(va, vb)
        if not (same_features and same_values):
            mismatched += 1
    return {"rows_compared": rows, "days": len(a), "days_with_differences": mismatched}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--work", default="/tmp/import-bench", help="folder for the CSV and both logs")
    parser.add_argument("--no-baseline", action="store_true", help="run the import only")
    parser.add_argument("--keep", action="store_true", help="keep the generated CSV for the next run")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    raw = work / f"raw-{args.rows}.csv"
    if not raw.exists():
        t0 = time.perf_counter()
        generate(raw, args.rows)
        print(f"generated {raw} ({raw.stat().st_size / 2**30:.2f} GiB) in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)
    (work / "spec.toml").write_text(SPEC)
    env = dict(os.environ)
    repo = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = repo + os.pathsep + env.get("PYTHONPATH", "")
    result = {"rows": args.rows, "csv_gib": round(raw.stat().st_size / 2**30, 3)}
    for name in ("ours", "baseline"):
        shutil.rmtree(work / name, ignore_errors=True)
    wall, cpu, rss, out = run_child([sys.executable, "-m", "dr_scale.cli", "import", str(raw), "--spec",
                                     str(work / "spec.toml"), "--out", str(work / "ours"), "--no-progress"], env)
    result["import"] = {"seconds": round(wall, 2), "cpu_seconds": round(cpu, 2), "peak_rss_gib": round(rss, 3),
                        "summary": out.strip()}
    result["load_average"] = os.getloadavg()
    if not args.no_baseline:
        wall, cpu, rss, _ = run_child([sys.executable, "-c", BASELINE, str(raw), str(work / "baseline")], env)
        result["baseline"] = {"seconds": round(wall, 2), "cpu_seconds": round(cpu, 2), "peak_rss_gib": round(rss, 3)}
        result["speedup"] = round(result["baseline"]["seconds"] / result["import"]["seconds"], 2)
        result["cpu_ratio"] = round(result["baseline"]["cpu_seconds"] / result["import"]["cpu_seconds"], 2)
        result["rss_ratio"] = round(result["baseline"]["peak_rss_gib"] / result["import"]["peak_rss_gib"], 2)
        result["features"] = compare(work / "ours", work / "baseline")
    if not args.keep:
        raw.unlink()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
