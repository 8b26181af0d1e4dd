"""Time and peak memory of the whole visits pipeline as the number of rows grows.

Runs ``dr-scale run pipelines/visits.toml --set data=URL`` once per given set, each in
its own process, and prints per set: rows, wall time, time per million rows relative to
the first (smallest) set — 1.00 means linear — the pipeline's own stage timings, and
the process's peak resident memory (its ``ru_maxrss``, from ``os.wait4``).

    python benchmarks/visits_scaling.py /data/visits-385k /data/visits-paper /data/visits-38M
    python benchmarks/visits_scaling.py --set spill=memory /data/visits-385k /data/visits-paper

Data generation is excluded (generate the sets first with ``dr-scale generate visits``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PIPELINE = Path(__file__).resolve().parents[1] / "pipelines" / "visits.toml"


def run_once(data: str, out: str, extra: list[str]) -> tuple[float, float, dict]:
    """(wall seconds, peak RSS in GiB, results.json) of one pipeline run in a child process."""
    cmd = [sys.executable, "-m", "dr_scale.cli", "run", str(PIPELINE), "--no-progress", "--set", f"data={data}",
           "--set", f"out={out}"]
    for kv in extra:
        cmd += ["--set", kv]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed with status {os.waitstatus_to_exitcode(status)}")
    return wall, usage.ru_maxrss / 2 ** 20, json.loads((Path(out) / "results.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", nargs="+", help="visits sets, smallest first")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="passed to the job")
    args = ap.parse_args()
    out = tempfile.mkdtemp(prefix="visits-scaling-")
    try:
        base = None
        print(f"{'rows':>12} {'wall s':>8} {'s per M rows':>12} {'vs first':>8} {'peak GiB':>8}  stages (s)")
        for i, data in enumerate(args.data):
            wall, peak, res = run_once(data, os.path.join(out, str(i)), args.set)
            per_million = wall / (res["rows"] / 1e6)
            base = base or per_million
            stages = {k: v for k, v in res["timings_seconds"].items() if k != "total"}
            print(f"{res['rows']:>12,} {wall:>8.1f} {per_million:>12.2f} {per_million / base:>8.2f} {peak:>8.2f}  "
                  f"{stages}", flush=True)
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
