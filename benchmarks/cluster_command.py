"""The whole command, as a user runs it: ``dr-scale run pipelines/visits.toml`` with and without ``--local-workers 2``.

Each run is a fresh process, timed from its start to its exit: interpreter and imports, the
LocalCluster's start and stop (scheduler, dashboard, two worker processes), the job and its outputs.
The two modes alternate so a change of the machine's load hits both; the median of each is compared.
The job's own stages (``results.json``'s ``timings_seconds``) are shown beside the wall time, and
what is left — start-up, outputs, shut-down — as ``other``. The embedded set of ``--rows`` rows is
generated into the cache first if it is not there (not timed).

    python benchmarks/cluster_command.py                    # 1,000,000 rows, 5 runs each
    python benchmarks/cluster_command.py --rows 3854689 --runs 3   # the paper's size
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The console script installed beside this Python (what a user types), else the one on PATH.
BESIDE = Path(sys.executable).with_name("dr-scale")
DR_SCALE = str(BESIDE) if BESIDE.exists() else shutil.which("dr-scale") or "dr-scale"


def run_once(rows: int, out: str, workers: int | None) -> tuple[float, dict]:
    """(wall seconds from start to exit, the job's stage timings) of one ``dr-scale run``."""
    command = [DR_SCALE, "run", str(ROOT / "pipelines/visits.toml"), "--set", f"rows={rows}",
               "--set", f"out={out}", "--no-progress"] + (["--local-workers", str(workers)] if workers else [])
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return wall, json.loads((Path(out) / "results.json").read_text())["timings_seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5, help="runs per mode, alternating")
    parser.add_argument("--workers", type=int, default=2, help="--local-workers of the cluster side")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_once(args.rows, f"{tmp}/warm", None)  # generates the set on first use; warms the page cache
        runs: dict[str, list] = {"local": [], "cluster": []}
        for _ in range(args.runs):
            for mode, workers in (("local", None), ("cluster", args.workers)):
                runs[mode].append(run_once(args.rows, f"{tmp}/{mode}", workers))
    load = os.getloadavg()[0]
    base = statistics.median(w for w, _ in runs["local"])
    print(f"dr-scale run pipelines/visits.toml --set rows={args.rows}: median of {args.runs} runs each "
          f"(load average {load:.2f} at the end)")
    stages = list(runs["local"][0][1])
    print(f"  {'mode':<28} {'wall s':>7} {'ratio':>6}  " + " ".join(f"{s[:9]:>9}" for s in stages) + f" {'other':>6}")
    for mode, label in (("local", "local threads (baseline)"), ("cluster", f"--local-workers {args.workers}")):
        wall = statistics.median(w for w, _ in runs[mode])
        stage = {s: statistics.median(t[s] for _, t in runs[mode]) for s in stages}
        print(f"  {label:<28} {wall:>7.2f} {wall / base:>6.2f}  " + " ".join(f"{stage[s]:>9.2f}" for s in stages)
              + f" {wall - stage['total']:>6.2f}")
    print("  all runs, wall s: " + "; ".join(f"{m} " + " ".join(f"{w:.2f}" for w, _ in r) for m, r in runs.items()))


if __name__ == "__main__":
    main()
