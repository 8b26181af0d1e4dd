"""Cluster overhead: the visits pipeline in local threaded mode vs a 2-process LocalCluster.

Same machine, same data, same job (``dr-scale run pipelines/visits.toml`` through its
Python entry point, :func:`dr_scale.visits.job.run`), side by side:

* **local** — Dask's threaded scheduler in this process (the default);
* **cluster** — a ``LocalCluster`` of 2 single-threaded worker processes: every task's
  inputs and results cross process boundaries, parts live in the workers' memory.

The overhead is ``cluster / local − 1`` (target ≤ 25%); the cluster's start-up and a
warm-up run (imports on the workers) are measured and shown separately, not counted.
Results of both modes must be identical (checked). Also printed: the pickled size of
the task graph ``evaluate`` sends for a log of the same parts, which does not grow with
the rows (the workers read the files).

    python benchmarks/cluster_overhead.py                  # 200,000 rows × 1,000 features
    python benchmarks/cluster_overhead.py --rows 50000 --repetitions 5   # quicker
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import tempfile
import time
from pathlib import Path

from distributed import Client, LocalCluster

from dr_scale.visits import generate as gen
from dr_scale.visits.job import run as run_visits

FRACTIONS = [0.0005, 0.001, 0.005, 0.01, 0.05]


def timed_run(config: dict, client) -> tuple[float, dict, dict]:
    """Seconds for one visits job, its results (timings removed) and its per-stage timings."""
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        run_visits(config, client=client, progress=False)
    seconds = time.perf_counter() - start
    results = json.loads((Path(config["out"]) / "results.json").read_text())
    stages = results.pop("timings_seconds")
    results.pop("data")
    return seconds, results, stages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--features", type=int, default=1000)
    parser.add_argument("--rows-per-part", type=int, default=25_000)
    parser.add_argument("--repetitions", type=int, default=20)
    parser.add_argument("--runs", type=int, default=2, help="timed runs per mode (the minimum is reported)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        data = f"{tmp}/visits"
        start = time.perf_counter()
        manifest = gen.generate_visits(data, rows=args.rows, features=args.features, seed=0,
                                       rows_per_part=args.rows_per_part)
        print(f"data: {manifest['rows']:,} rows × {args.features} features in {manifest['parts']} parts "
              f"(generated in {time.perf_counter() - start:.1f} s)")
        config = {"job": "visits", "data": data, "fractions": FRACTIONS, "repetitions": args.repetitions,
                  "out": f"{tmp}/out"}

        local_times = []
        for _ in range(args.runs):
            t, local, local_stages = timed_run(config, None)
            local_times.append(t)

        start = time.perf_counter()
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
                Client(cluster, set_as_default=False) as client:
            startup = time.perf_counter() - start
            warmup, _, _ = timed_run(config, client)
            cluster_times = []
            for _ in range(args.runs):
                t, on_cluster, cluster_stages = timed_run(config, client)
                cluster_times.append(t)
            graph = evaluate_graph_bytes(data)

    assert on_cluster == local, "the LocalCluster's results differ from local mode's"
    t_local, t_cluster = min(local_times), min(cluster_times)
    print(f"job: visits, {len(FRACTIONS)} fractions × {args.repetitions} repetitions; "
          f"min of {args.runs} runs each")
    print(f"{'mode':<34} {'seconds':>8} {'ratio':>7}")
    print(f"{'local threaded (baseline)':<34} {t_local:>8.2f} {1:>7.2f}")
    print(f"{'LocalCluster, 2 processes × 1 thr':<34} {t_cluster:>8.2f} {t_cluster / t_local:>7.2f}")
    print(f"cluster overhead: {100 * (t_cluster / t_local - 1):+.1f}% (target ≤ 25%); results identical: yes")
    print("per stage (last run), local vs cluster seconds: " + ", ".join(
        f"{k} {local_stages[k]:.2f}/{cluster_stages[k]:.2f}" for k in local_stages if k in cluster_stages))
    print(f"not counted: cluster start-up {startup:.1f} s, warm-up run {warmup:.1f} s")
    print(f"evaluate's task graph for these {manifest['parts']} parts: {graph:,} bytes pickled")


def evaluate_graph_bytes(data: str) -> int:
    """Pickled size of the graph ``evaluate`` would send for the parts in ``data`` (nothing is read
    but the first part's schema: the graph holds file paths and the evaluation's settings)."""
    from distributed.protocol.pickle import dumps

    from dr_scale.evaluation import Evaluation, log_states, reduce_states

    bag = reduce_states(log_states(data, Evaluation("constant:1", ["IPS"], n_actions=2)))
    return len(dumps(dict(bag.__dask_graph__())))


if __name__ == "__main__":
    main()
