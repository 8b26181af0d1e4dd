"""Cluster overhead: the visits pipeline in local threaded mode vs a 2-process LocalCluster.

Same machine, same data, same job (``dr-scale run pipelines/visits.toml`` through its
Python entry point, :func:`dr_scale.visits.job.run`), side by side:

* **local** — Dask's threaded scheduler in this process (the default);
* **cluster** — a ``LocalCluster`` of 2 single-threaded worker processes: every task's
  inputs and results cross process boundaries, parts live in the workers' memory.

The overhead is ``cluster / local − 1`` (target ≤ 25%); the cluster's start-up and a
warm-up run (imports on the workers) are measured and shown separately, not counted.
Results of both modes must be identical (checked). For comparison the same is done for
the one-pass ``evaluate`` on a multi-part log (the bundled example repeated), with the
pickled size of its task graph, which holds file paths and settings, not rows.

    python benchmarks/cluster_overhead.py                  # 200,000 rows × 1,000 features
    python benchmarks/cluster_overhead.py --rows 50000 --repetitions 5   # quicker
    python benchmarks/cluster_overhead.py --data ~/.cache/dr-scale/visits-1000000x5000-seed0-v3 \
        --job-protocol --evaluate-copies 715 --evaluate-parts 20 --runs 1   # 1M-row job, 10M-row evaluate

Wall and CPU seconds are both shown: CPU counts this process and, on the cluster, every
worker process (``time.process_time`` in each), so a shared machine's load shows in the
wall ratio more than in the CPU one.
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


def cpu_seconds(client) -> float:
    """CPU seconds used so far by this process and, on a cluster, by every worker process."""
    return time.process_time() + (sum(client.run(time.process_time).values()) if client is not None else 0.0)


def timed_run(config: dict, client) -> tuple[tuple[float, float], dict, dict]:
    """(wall, CPU) seconds for one visits job, its results (timings removed) and its per-stage timings."""
    cpu, start = cpu_seconds(client), time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        run_visits(config, client=client, progress=False)
    seconds = time.perf_counter() - start, cpu_seconds(client) - cpu
    results = json.loads((Path(config["out"]) / "results.json").read_text())
    stages = results.pop("timings_seconds")
    results.pop("data")
    return seconds, results, stages


def write_evaluate_log(url: str, copies: int, parts: int) -> tuple[int, str]:
    """The bundled example week repeated ``copies`` times (fresh row ids), in ``parts`` files."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from dr_scale.example import N_ACTIONS, N_FEATURES, make_example
    from dr_scale.logdata import write_log

    table, model, _ = make_example(seed=0)
    table = table.drop_columns(["date"])
    n = table.num_rows
    tiled = pa.concat_tables([table.set_column(0, "row_id", pc.add(table.column("row_id"), i * n))
                              for i in range(copies)])
    write_log(tiled, url, n_parts=parts, n_features=N_FEATURES, n_actions=N_ACTIONS)
    model.save(f"{url}-model.npz")
    return tiled.num_rows, f"{url}-model.npz"


def timed_evaluate(url: str, model: str, client) -> tuple[float, dict]:
    from dr_scale.estimators import ESTIMATORS
    from dr_scale.evaluation import Evaluation, evaluate_log
    from dr_scale.reward_models import LinearRewardModel

    evaluation = Evaluation("column:target_action", list(ESTIMATORS), reward_model=LinearRewardModel.load(model))
    cpu, start = cpu_seconds(client), time.perf_counter()
    result = evaluate_log(url, evaluation, client=client)
    return (time.perf_counter() - start, cpu_seconds(client) - cpu), result.to_dict()


def print_side_by_side(job: str, local_times: list[tuple], cluster_times: list[tuple]) -> None:
    """Wall and CPU seconds (the run with the least wall time of each mode) and their ratios."""
    (t_local, c_local), (t_cluster, c_cluster) = min(local_times), min(cluster_times)
    print(f"{job}: the fastest of {len(local_times)} runs each")
    print(f"  {'mode':<34} {'seconds':>8} {'ratio':>7} {'CPU s':>8} {'ratio':>7}")
    print(f"  {'local threaded (baseline)':<34} {t_local:>8.2f} {1:>7.2f} {c_local:>8.2f} {1:>7.2f}")
    print(f"  {'LocalCluster, 2 processes × 1 thr':<34} {t_cluster:>8.2f} {t_cluster / t_local:>7.2f} "
          f"{c_cluster:>8.2f} {c_cluster / c_local:>7.2f}")
    print(f"  cluster overhead: {100 * (t_cluster / t_local - 1):+.1f}% wall, {100 * (c_cluster / c_local - 1):+.1f}% "
          f"CPU (client and workers); results identical: yes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--features", type=int, default=1000)
    parser.add_argument("--rows-per-part", type=int, default=25_000)
    parser.add_argument("--data", help="an existing visits set (instead of generating --rows × --features)")
    parser.add_argument("--job-protocol", action="store_true",
                        help="the job's own fractions and repetitions (6 × 100), as `dr-scale run pipelines/visits.toml`")
    parser.add_argument("--repetitions", type=int, default=20)
    parser.add_argument("--runs", type=int, default=2, help="timed runs per mode (the minimum is reported)")
    parser.add_argument("--evaluate-copies", type=int, default=100,
                        help="evaluate: the bundled 14,000-row example log repeated this many times")
    parser.add_argument("--evaluate-parts", type=int, default=16)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or f"{tmp}/visits"
        if not args.data:
            start = time.perf_counter()
            manifest = gen.generate_visits(data, rows=args.rows, features=args.features, seed=0,
                                           rows_per_part=args.rows_per_part)
            print(f"data: {manifest['rows']:,} rows × {args.features} features in {manifest['parts']} parts "
                  f"(generated in {time.perf_counter() - start:.1f} s)")
        protocol = {} if args.job_protocol else {"fractions": FRACTIONS, "repetitions": args.repetitions}
        config = {"job": "visits", "data": data, **protocol, "out": f"{tmp}/out"}
        log_rows, model = write_evaluate_log(f"{tmp}/log", args.evaluate_copies, args.evaluate_parts)
        print(f"evaluate log: {log_rows:,} rows in {args.evaluate_parts} parts")
        eval_local = [timed_evaluate(f"{tmp}/log", model, None) for _ in range(args.runs)]

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
            eval_cluster = [timed_evaluate(f"{tmp}/log", model, client) for _ in range(args.runs)]
            graph = evaluate_graph_bytes(f"{tmp}/log", model)

    assert on_cluster == local, "the LocalCluster's results differ from local mode's (visits)"
    assert all(r == eval_local[0][1] for _, r in eval_local + eval_cluster), "evaluate results differ"
    print_side_by_side(f"visits job on {data}, " + ("the job's protocol" if args.job_protocol else
                                                    f"{len(FRACTIONS)} fractions × {args.repetitions} repetitions"),
                       local_times, cluster_times)
    print("  per stage (last run), local/cluster seconds: " + ", ".join(
        f"{k} {local_stages[k]:.2f}/{cluster_stages[k]:.2f}" for k in local_stages if k in cluster_stages))
    print_side_by_side(f"evaluate, all estimators, {log_rows:,} rows", [t for t, _ in eval_local],
                       [t for t, _ in eval_cluster])
    print(f"  evaluate's task graph: {graph:,} bytes pickled for {args.evaluate_parts} parts "
          f"(file paths and settings; no rows)")
    print(f"not counted: cluster start-up {startup:.1f} s, warm-up run {warmup[0]:.1f} s")


def evaluate_graph_bytes(url: str, model: str) -> int:
    """Pickled size of the task graph ``evaluate`` sends for the log at ``url``."""
    from distributed.protocol.pickle import dumps

    from dr_scale.estimators import ESTIMATORS
    from dr_scale.evaluation import Evaluation, log_states, reduce_states
    from dr_scale.reward_models import LinearRewardModel

    evaluation = Evaluation("column:target_action", list(ESTIMATORS), reward_model=LinearRewardModel.load(model))
    return len(dumps(dict(reduce_states(log_states(url, evaluation)).__dask_graph__())))


if __name__ == "__main__":
    main()
