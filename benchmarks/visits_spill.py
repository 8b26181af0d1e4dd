"""The visits job at 10× the paper's rows on a LocalCluster with a memory limit per worker: time, peak memory, spill.

    python benchmarks/visits_spill.py                                 # 38,546,890 rows, 2 workers × 8 GiB
    python benchmarks/visits_spill.py --rows 3854689 --memory-limit 4GiB   # the paper's size

The job is ``dr-scale run pipelines/visits.toml --set rows=N --local-workers W`` with each worker's
memory limit set through the Dask config key ``dr-scale.worker-memory-limit``. With the job's default
``spill = "disk"`` the workers write the parts, the lifted rows and the ridge's pieces once into the
spill folder on this machine's disk and map them back on each pass, as local mode does; what they
still hold in memory Dask spills to its own disk past 70% of the limit (docs/deploy.md § Memory on a
LocalCluster). Every second the workers report their resident memory, split into their own
(anonymous) memory and mapped spill files, and Dask's spilled bytes; the peaks are printed per worker
with the spill folder's peak size, the restarts and the job's stage timings. The embedded set is
generated first if it is not cached (timed apart).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import tempfile
import threading
import time
from pathlib import Path

import dask

from dr_scale.experiments.visits.job import embedded_dataset
from dr_scale.experiments.visits.job import run as run_visits
from dr_scale.io.cache import spill_root
from dr_scale.outofcore.compute import MEMORY_LIMIT_KEY, dask_session

GIB = 2 ** 30


def worker_memory(dask_worker) -> dict[str, int]:
    """The worker process's resident bytes now — anonymous (its own arrays) and file-backed (spilled parts mapped
    from the page cache) — its peak resident bytes (``ru_maxrss``), and the bytes Dask has spilled to disk."""
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return {"anon": int(status["RssAnon"].split()[0]) * 1024, "file": int(status["RssFile"].split()[0]) * 1024,
            "maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "dask_disk": dask_worker.data.spilled_total.disk if hasattr(dask_worker.data, "spilled_total") else 0}


class Watch(threading.Thread):
    """Polls the workers each ``every`` seconds; keeps each worker's peaks of :func:`worker_memory` and the peak
    size of the spill folders."""

    def __init__(self, client, folder: str, every: float = 1.0):
        super().__init__(daemon=True)
        self.client, self.folder, self.every, self.stop = client, folder, every, threading.Event()
        self.peaks: dict[str, dict[str, int]] = {}
        self.folder_bytes = 0

    def run(self) -> None:
        while not self.stop.wait(self.every):
            with contextlib.suppress(Exception):  # a worker busy restarting answers next time
                for address, now in self.client.run(worker_memory).items():
                    peak = self.peaks.setdefault(address, dict.fromkeys(now, 0))
                    for k, v in now.items():
                        peak[k] = max(peak[k], v)
                self.folder_bytes = max(self.folder_bytes, folder_size(self.folder))


def folder_size(folder: str) -> int:
    return sum(f.stat().st_size for f in Path(folder).rglob("*") if f.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=38_546_890)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="8GiB", help="each worker's (Dask's memory_limit)")
    args = parser.parse_args()

    start = time.perf_counter()
    data = embedded_dataset(args.rows, 5000, 0)
    print(f"data: {data} (ready in {time.perf_counter() - start:.1f} s)", flush=True)
    with tempfile.TemporaryDirectory() as out, dask.config.set({MEMORY_LIMIT_KEY: args.memory_limit}), \
            dask_session(local_workers=args.workers, quiet=True) as client:
        client.wait_for_workers(args.workers)
        watch = Watch(client, spill_root())
        watch.start()
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            run_visits({"job": "visits", "data": data, "out": out}, client=client, progress=False)
        wall = time.perf_counter() - start
        watch.stop.set()
        watch.join()
        results = json.loads((Path(out) / "results.json").read_text())
    print(f"visits job, {results['rows']:,} rows in {results['parts']} parts, LocalCluster {args.workers} × 1 thread, "
          f"memory limit {args.memory_limit} each: {wall:.1f} s (load average {os.getloadavg()[0]:.2f})")
    print("  stages (s): " + ", ".join(f"{k} {v:.1f}" for k, v in results["timings_seconds"].items()))
    print(f"  DR's mean rmse reduction {100 * results['mean_dr_rmse_reduction']:.1f}%; workers restarted by their "
          f"nanny (past 95% of the limit): {len(watch.peaks) - args.workers}; spill folder at most "
          f"{watch.folder_bytes / GIB:.1f} GiB")
    for address, peak in sorted(watch.peaks.items()):
        print(f"  worker {address}: peak resident {peak['maxrss'] / GIB:.2f} GiB (ru_maxrss); sampled peaks: "
              f"own memory {peak['anon'] / GIB:.2f} GiB, spilled files mapped {peak['file'] / GIB:.2f} GiB, "
              f"Dask's spill {peak['dask_disk'] / GIB:.2f} GiB")


if __name__ == "__main__":
    main()
