"""Cluster overhead: the visits pipeline in local threaded mode vs a 2-process LocalCluster.

Same machine, same data, same job (``dr-scale run pipelines/visits.toml`` through its
Python entry point, :func:`dr_scale.experiments.visits.job.run`), side by side:

* **local** — Dask's threaded scheduler in this process (the default);
* **cluster** — the ``LocalCluster`` of 2 single-threaded worker processes that
  ``--local-workers 2`` starts (:func:`dr_scale.outofcore.compute.dask_session`, with its worker settings):
  every task's inputs and results cross process boundaries, parts live in the workers' memory.

The overhead is ``cluster / local − 1`` (target ≤ 25%); the cluster's start-up and a
warm-up run (imports on the workers) are measured and shown separately, not counted.
Results of both modes must be identical (checked). For comparison the same is done for
the one-pass ``evaluate`` on a multi-part log (the bundled example repeated), with the
pickled size of its task graph, which holds file paths and settings, not rows.

    python benchmarks/cluster_overhead.py                  # 200,000 rows × 1,000 features
    python benchmarks/cluster_overhead.py --rows 50000 --repetitions 5   # quicker
    python benchmarks/cluster_overhead.py --data ~/.cache/dr-scale/visits-1000000x5000-seed0-v3 \
        --job-protocol --evaluate-copies 715 --evaluate-parts 20 --runs 1   # 1M-row job, 10M-row evaluate
    python benchmarks/cluster_overhead.py --jobs evaluate --evaluate-copies 715 --evaluate-parts 20 --runs 3

Wall and CPU seconds are both shown: CPU counts this process and, on the cluster, every
worker process (``getrusage`` in each), so a shared machine's load shows in the wall ratio
more than in the CPU one; the system CPU and minor page faults beside them show the
allocator's cost (``--dask-defaults``: the cluster with Dask's default worker settings
instead of ``--local-workers``' ones, docs/deploy.md § Worker settings).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from dr_scale.experiments.visits.job import run as run_visits
from dr_scale.outofcore.compute import dask_session
from dr_scale.synthetic import visits as gen

FRACTIONS = [0.0005, 0.001, 0.005, 0.01, 0.05]


def _usage() -> tuple[float, float, int]:
    """(CPU seconds, of which system, minor page faults) of this process so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime, r.ru_stime, r.ru_minflt


def usage(client) -> np.ndarray:
    """(CPU s, system CPU s, page faults) used so far by this process and, on a cluster, every worker process."""
    own = np.array(_usage())
    return own + (sum(np.array(u) for u in client.run(_usage).values()) if client is not None else 0)


def timed_run(config: dict, client) -> tuple[np.ndarray, dict, dict]:
    """(wall s, CPU s, system CPU s, page faults) of one visits job, its results (timings removed) and its
    per-stage timings."""
    used, start = usage(client), time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        run_visits(config, client=client, progress=False)
    cost = np.array([time.perf_counter() - start, *(usage(client) - used)])
    results = json.loads((Path(config["out"]) / "results.json").read_text())
    stages = results.pop("timings_seconds")
    results.pop("data")
    return cost, results, stages


def write_evaluate_log(url: str, copies: int, parts: int) -> tuple[int, str]:
    """The bundled example week repeated ``copies`` times (fresh row ids), in ``parts`` files."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from dr_scale.logs.writing import write_log
    from dr_scale.synthetic.example import N_ACTIONS, N_FEATURES, make_example

    table, model, _ = make_example(seed=0)
    table = table.drop_columns(["date"])
    n = table.num_rows
    tiled = pa.concat_tables([table.set_column(0, "row_id", pc.add(table.column("row_id"), i * n))
                              for i in range(copies)])
    write_log(tiled, url, n_parts=parts, n_features=N_FEATURES, n_actions=N_ACTIONS)
    model.save(f"{url}-model.npz")
    return tiled.num_rows, f"{url}-model.npz"


def timed_evaluate(url: str, model: str, client) -> tuple[np.ndarray, dict]:
    from dr_scale.ope.estimators import STANDARD_ESTIMATORS
    from dr_scale.ope.evaluation import Evaluation, evaluate_log
    from dr_scale.reward.models import LinearRewardModel

    evaluation = Evaluation("column:target_action", list(STANDARD_ESTIMATORS),
                            reward_model=LinearRewardModel.load(model))
    used, start = usage(client), time.perf_counter()
    result = evaluate_log(url, evaluation, client=client)
    return np.array([time.perf_counter() - start, *(usage(client) - used)]), result.to_dict()


def print_side_by_side(job: str, local: list[np.ndarray], cluster: list[np.ndarray], cluster_name: str) -> None:
    """Wall, CPU and system CPU seconds and page faults (the run with the least wall time of each mode), with
    the wall and CPU ratios."""
    base, other = min(local, key=lambda c: c[0]), min(cluster, key=lambda c: c[0])
    print(f"{job}: the fastest of {len(local)} runs each")
    print(f"  {'mode':<44} {'seconds':>8} {'ratio':>6} {'CPU s':>7} {'ratio':>6} {'sys s':>6} {'faults':>9}")
    for name, (wall, cpu, sys_cpu, faults) in (("local threaded (baseline)", base), (cluster_name, other)):
        print(f"  {name:<44} {wall:>8.2f} {wall / base[0]:>6.2f} {cpu:>7.2f} {cpu / base[1]:>6.2f} "
              f"{sys_cpu:>6.2f} {faults:>9,.0f}")
    print(f"  cluster overhead: {100 * (other[0] / base[0] - 1):+.1f}% wall, {100 * (other[1] / base[1] - 1):+.1f}% "
          f"CPU (client and workers); results identical: yes")


@contextlib.contextmanager
def two_workers(dask_defaults: bool):
    """A 2-process LocalCluster's client: ``--local-workers 2``'s, or one with Dask's default worker settings."""
    if not dask_defaults:
        with dask_session(local_workers=2, quiet=True) as client:
            client.wait_for_workers(2)  # they start in the background: the start-up counts until they are up
            yield client
        return
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster, set_as_default=False) as client:
        yield client


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--features", type=int, default=1000)
    parser.add_argument("--rows-per-part", type=int, default=25_000)
    parser.add_argument("--data", help="an existing visits set (instead of generating --rows × --features)")
    parser.add_argument("--job-protocol", action="store_true",
                        help="the job's own fractions and repetitions (6 × 100), as "
                             "`dr-scale run pipelines/visits.toml`")
    parser.add_argument("--repetitions", type=int, default=20)
    parser.add_argument("--runs", type=int, default=2, help="timed runs per mode (the minimum is reported)")
    parser.add_argument("--evaluate-copies", type=int, default=100,
                        help="evaluate: the bundled 14,000-row example log repeated this many times")
    parser.add_argument("--evaluate-parts", type=int, default=16)
    parser.add_argument("--jobs", default="visits,evaluate", help="which jobs to time (comma-separated)")
    parser.add_argument("--dask-defaults", action="store_true",
                        help="the cluster with Dask's default worker settings, not "
                             "dr_scale.outofcore.compute.WORKER_CONFIG")
    args = parser.parse_args()
    jobs = set(args.jobs.split(","))
    cluster_name = "LocalCluster 2 × 1 thr" + (", Dask's defaults" if args.dask_defaults else " (--local-workers 2)")

    with tempfile.TemporaryDirectory() as tmp:
        if "visits" in jobs:
            data = args.data or f"{tmp}/visits"
            if not args.data:
                start = time.perf_counter()
                manifest = gen.generate_visits(data, rows=args.rows, features=args.features, seed=0,
                                               rows_per_part=args.rows_per_part)
                print(f"data: {manifest['rows']:,} rows × {args.features} features in {manifest['parts']} parts "
                      f"(generated in {time.perf_counter() - start:.1f} s)")
            protocol = {} if args.job_protocol else {"fractions": FRACTIONS, "repetitions": args.repetitions}
            config = {"job": "visits", "data": data, **protocol, "out": f"{tmp}/out"}
            local_visits = [timed_run(config, None) for _ in range(args.runs)]
        if "evaluate" in jobs:
            log_rows, model = write_evaluate_log(f"{tmp}/log", args.evaluate_copies, args.evaluate_parts)
            print(f"evaluate log: {log_rows:,} rows in {args.evaluate_parts} parts")
            eval_local = [timed_evaluate(f"{tmp}/log", model, None) for _ in range(args.runs)]

        start = time.perf_counter()
        with two_workers(args.dask_defaults) as client:
            startup = time.perf_counter() - start
            if "visits" in jobs:
                warmup, _, _ = timed_run(config, client)
                cluster_visits = [timed_run(config, client) for _ in range(args.runs)]
            if "evaluate" in jobs:
                timed_evaluate(f"{tmp}/log", model, client)  # warm-up: the estimators' imports on the workers
                eval_cluster = [timed_evaluate(f"{tmp}/log", model, client) for _ in range(args.runs)]
                graph = evaluate_graph_bytes(f"{tmp}/log", model)

    if "visits" in jobs:
        assert all(r == local_visits[0][1] for _, r, _ in local_visits + cluster_visits), \
            "the LocalCluster's results differ from local mode's (visits)"
        print_side_by_side(f"visits job on {data}, " + ("the job's protocol" if args.job_protocol else
                                                        f"{len(FRACTIONS)} fractions × {args.repetitions} repetitions"),
                           [t for t, _, _ in local_visits], [t for t, _, _ in cluster_visits], cluster_name)
        local_stages, cluster_stages = local_visits[-1][2], cluster_visits[-1][2]
        print("  per stage (last run), local/cluster seconds: " + ", ".join(
            f"{k} {local_stages[k]:.2f}/{cluster_stages[k]:.2f}" for k in local_stages if k in cluster_stages))
        print(f"  not counted: warm-up run {warmup[0]:.1f} s")
    if "evaluate" in jobs:
        assert all(r == eval_local[0][1] for _, r in eval_local + eval_cluster), "evaluate results differ"
        print_side_by_side(f"evaluate, all estimators, {log_rows:,} rows", [t for t, _ in eval_local],
                           [t for t, _ in eval_cluster], cluster_name)
        print(f"  evaluate's task graph: {graph:,} bytes pickled for {args.evaluate_parts} parts "
              f"(file paths and settings; no rows)")
    print(f"not counted: cluster start-up {startup:.1f} s")


def evaluate_graph_bytes(url: str, model: str) -> int:
    """Pickled size of the task graph ``evaluate`` sends for the log at ``url``."""
    from distributed.protocol.pickle import dumps

    from dr_scale.ope.estimators import STANDARD_ESTIMATORS
    from dr_scale.ope.evaluation import Evaluation, log_states
    from dr_scale.outofcore.mergeable import tree_reduce
    from dr_scale.reward.models import LinearRewardModel

    evaluation = Evaluation("column:target_action", list(STANDARD_ESTIMATORS),
                            reward_model=LinearRewardModel.load(model))
    return len(dumps(dict(tree_reduce(log_states(url, evaluation)).__dask_graph__())))


if __name__ == "__main__":
    main()
