"""Benchmark: a full vs an incremental ``dr-scale report`` run on the same week of logs.

The week is the bundled example's, each day's partition tiled ``--tile`` times (row ids
kept unique) so partitions have a realistic size; it is written to a temporary folder.
Measured in one process, each the median of ``--repeat`` runs:

* **full** — a cold cache: every partition of the week is read and evaluated;
* **incremental** — yesterday's run (``--until`` the 6th day) left its states in the
  cache; today's run reads only the 7th day and merges the six cached states;
* **unchanged** — a rerun with nothing new: no partition is read.

Each run is timed in two parts: computing the report (listing, cache, Dask tasks, merging)
and rendering + writing it (three plots, report.json/.md/.html). The incremental and
unchanged reports' estimates are checked to equal the full run's exactly. Prints the
ratios full / incremental and full / unchanged.

    python benchmarks/report_incremental.py [--tile 50] [--repeat 3] [--local-workers N]
"""

from __future__ import annotations

import argparse
import datetime
import io
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dr_scale.logs.writing import write_log
from dr_scale.outofcore.compute import dask_session
from dr_scale.report.make import compute_report
from dr_scale.report.render import write_report
from dr_scale.synthetic.example import example_paths

POLICIES = str(Path(__file__).parents[1] / "pipelines" / "report_policies.toml")


def write_week(root: Path, tile: int) -> int:
    """The example week with each day tiled ``tile`` times; returns rows per day."""
    logs, _ = example_paths()
    rows = 0
    for day in sorted(Path(logs).iterdir()):
        table = pq.read_table(day / "part-00000.parquet")
        big = pa.concat_tables([table] * tile)
        n = table.num_rows
        row_id = (np.tile(table.column("row_id").to_numpy(), tile) * tile + np.repeat(np.arange(tile), n))
        big = big.set_column(big.schema.get_field_index("row_id"), "row_id", pa.array(row_id))
        write_log(big, str(root / day.name), n_features=50, n_actions=3)
        rows = big.num_rows
    return rows


def timed_run(logs: str, out: Path, cache: Path, client, until=None) -> tuple[float, float, dict]:
    """(seconds computing the report's states and numbers, seconds rendering and writing, report)."""
    t0 = time.perf_counter()
    report = compute_report(logs, POLICIES, str(cache), window="7d", until=until, client=client, log=io.StringIO())
    t1 = time.perf_counter()
    write_report(str(out), report)
    return t1 - t0, time.perf_counter() - t1, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tile", type=int, default=50, help="copies of each 2,000-row day (default 50: 100k rows/day)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--local-workers", type=int, help="run on a LocalCluster of N processes")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, dask_session(local_workers=args.local_workers, quiet=True) as client:
        tmp = Path(tmp)
        rows = write_week(tmp / "logs", args.tile)
        print(f"week: 7 partitions x {rows:,} rows, 50 features, 3 policies x 5 estimators; "
              f"{'LocalCluster of ' + str(args.local_workers) if client else 'threaded scheduler'}")

        logs = str(tmp / "logs")
        results = {"full": [], "incremental": [], "unchanged": []}
        for i in range(args.repeat):
            results["full"].append(timed_run(logs, tmp / f"full{i}", tmp / f"cache-full{i}", client))
            cache = tmp / f"cache-inc{i}"
            timed_run(logs, tmp / f"yesterday{i}", cache, client, until=datetime.date(2026, 11, 6))
            results["incremental"].append(timed_run(logs, tmp / f"inc{i}", cache, client))
            results["unchanged"].append(timed_run(logs, tmp / f"inc{i}", cache, client))
        full_report = results["full"][0][2]
        for kind in ("incremental", "unchanged"):
            for *_, report in results[kind]:
                assert report["policies"] == full_report["policies"], f"{kind} run differs from the full run"
        read = {k: sum(p["source"] == "read" for p in v[0][2]["partitions"]) for k, v in results.items()}
        med = {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v)) for k, v in results.items()}
        print(f"{'run':<12} {'partitions read':>16} {'states s':>9} {'render s':>9} {'total s':>9}")
        for kind, (states, rendering) in med.items():
            print(f"{kind:<12} {read[kind]:>16} {states:>9.3f} {rendering:>9.3f} {states + rendering:>9.3f}")
        full, inc, same = (sum(med[k]) for k in ("full", "incremental", "unchanged"))
        print(f"ratio full / incremental: {med['full'][0] / med['incremental'][0]:.2f}x for the states, "
              f"{full / inc:.2f}x end to end")
        print(f"ratio full / unchanged:   {med['full'][0] / med['unchanged'][0]:.2f}x for the states, "
              f"{full / same:.2f}x end to end")
        print("incremental and unchanged reports equal the full run's estimates exactly")


if __name__ == "__main__":
    main()
