"""A cluster of any size is used: a LocalCluster of 8 single-threaded workers runs each pass as 8 tasks at once.

The scheduler's task stream (``distributed.get_task_stream``) records when each task
computed on which worker. The summing passes over 16 parts (:class:`PartSet`'s ``sum``,
``accumulate`` and ``sum_and_derive``) map a function that sleeps, so that the tasks'
overlap shows how many ran at once whatever the load on this 2-core machine (this is about
concurrency, not speed). The visits experiment on the same cluster splits its ridge into 8
blocks of fits and gives the bits of local mode.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from distributed import Client, LocalCluster, get_task_stream

from dr_scale.experiments.visits.experiment import Settings, load_parts, run_experiment
from dr_scale.outofcore.passes import PartSet
from dr_scale.synthetic.visits import generate_visits

WORKERS, PARTS, SLEEP = 8, 16, 0.6


def most_at_once(stream, name: str) -> tuple[int, int]:
    """(tasks whose key starts with ``name``, the most of them computing at the same time)."""
    spans = [(s["start"], s["stop"]) for t in stream for s in t["startstops"]
             if s["action"] == "compute" and str(t["key"]).strip("('").startswith(name)]
    events = sorted([(start, 1) for start, _ in spans] + [(stop, -1) for _, stop in spans])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return len(spans), peak


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_each_pass_runs_a_task_per_worker_at_once(tmp_path):
    def slow_term(part):
        time.sleep(SLEEP)
        return part * 2.0

    def slow_accumulate(total, part):
        return slow_term(part)

    def slow_derive(total, part):
        return slow_term(part), part[:1].copy()

    passes = {
        "_sum_node": lambda parts: parts.sum(slow_term),
        "_accumulate_node": lambda parts: parts.accumulate(slow_accumulate),
        "_derive_node": lambda parts: parts.sum_and_derive(slow_derive)[0],
    }
    expected = sum(np.full(3, 2.0 * i) for i in range(PARTS))
    data = str(tmp_path / "visits")
    generate_visits(data, rows=8000, features=100, seed=1, rows_per_part=500)
    settings = Settings(fractions=(0.05, 0.3), repetitions=6, seed=2)
    local = run_experiment(load_parts(data), settings)
    with LocalCluster(n_workers=WORKERS, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster, set_as_default=False) as client:
        client.wait_for_workers(WORKERS, timeout=120)
        parts = PartSet.build(np.full, [(3, float(i)) for i in range(PARTS)], client)
        parts.sum(np.multiply, 1.0)  # every worker imports the pass engine before the passes are timed
        for name, run in passes.items():
            with get_task_stream(client=client) as stream:
                np.testing.assert_array_equal(run(parts), expected)
            n_tasks, at_once = most_at_once(stream.data, name)
            assert n_tasks == WORKERS and at_once >= WORKERS, (name, n_tasks, at_once, sorted(
                (t["worker"], round(s["start"] % 100, 2), round(s["stop"] % 100, 2)) for t in stream.data
                for s in t["startstops"] if s["action"] == "compute" and name in str(t["key"])))
        with get_task_stream(client=client) as stream:
            on_cluster = run_experiment(load_parts(data, client=client), settings)
    assert most_at_once(stream.data, "_solve_block")[0] == WORKERS  # the ridge: one block of fits per worker
    sum_tasks = most_at_once(stream.data, "_sum_node")[0]
    assert sum_tasks and sum_tasks % WORKERS == 0  # every summing pass (μ, each Lanczos step, …): 8 tasks
    for name in ("ips", "dr", "r2"):
        np.testing.assert_array_equal(getattr(on_cluster, name), getattr(local, name))
