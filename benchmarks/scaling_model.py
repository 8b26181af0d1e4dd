"""Scaling on paper: wall time at 8, 32, 64 and 128 workers up to 10^10 rows, projected from measurements taken here.

Measured on the ``LocalCluster`` of 2 single-threaded worker processes that ``--local-workers 2``
starts (:func:`dr_scale.outofcore.compute.dask_session`, with its worker settings), for each job (the
visits experiment, ``evaluate``, ``fit``; and, with ``--click-log``, the stages of ``benchmarks/end_to_end.py``
on the click table it wrote and imported: ``import``, ``fit-propensity``, ``learn``, ``fit --folds 5`` and
``evaluate`` of DM, IPS, DR, SNIPS and SNDR):

* every pass the job makes (``PartSet.build`` / ``sum`` / ``accumulate`` /
  ``sum_and_derive``, the ridge's ``solve_in_blocks``, ``evaluate``'s one pass): the CPU
  seconds of the worker processes during it (``time.process_time`` in each: CPU, not wall,
  so the load of a shared machine does not inflate them), its parts, the bytes of its
  result, of its large arguments and of what it leaves on the workers;
* the client's CPU seconds between passes (the L-BFGS and CG steps over the coefficients, the λ search's
  bookkeeping: work on one machine whatever W);
* the per-pass latency L: the wall time of a pass that does nothing over the same parts;
* the per-task cost o: the scheduler's time per task over 2,000 trivial tasks.

Projection for W workers (one thread each) and N rows in parts of the measured size
(n = N / rows-per-part parts), each pass:

    compute   ⌈n / W⌉ · t_part                        (t_part: the workers' CPU per part)
    overhead  L + o · (tasks)                          (tasks: min(W, n) + the tree's adds)
    traffic   ⌈log₂ min(W, n)⌉ · (R / B + R / A)      (the tree of + over results of R bytes)
              + R / B                                  (the sum to the client)
              + ⌈log₂(W + 1)⌉ · G / B + o · W          (large arguments G, copied to every task's worker
                                                        down a binary tree of copy tasks)

with B the network bandwidth and A the rate of adding two arrays in memory (measured). The
ridge of the visits job runs as blocks of fits (``dr_scale.outofcore.blocks``): its CG work
scales with N and divides by W; each worker receives (W − 1) / W of its share of the lifted
rows once (bytes measured); W² pieces tasks. ``evaluate`` runs one task per part (per run of 8
consecutive parts from 1,024 parts on, :func:`dr_scale.outofcore.mergeable.parts_bag`) and a reduction tree of
fan-in 8; ``import`` one task per 16 MiB block of the raw CSV in each of its two passes.
Passes per job (Lanczos steps, CG iterations, L-BFGS steps) are taken as measured, independent of N (an
assumption: they depend on the spectrum, which a larger set of the same kind keeps). The client's seconds
between passes are added as measured, independent of N and W (an assumption: they are work over the
coefficients, whose number the hashed space bounds). T(1) is the same model
with one worker and no traffic; parallel efficiency is T(1) / (W · T(W)).

    python benchmarks/scaling_model.py                      # visits 1M rows (10 parts), bandit log 200k (2 parts)
    python benchmarks/scaling_model.py --click-log data/e2e/rows-1000000/logs   # and end_to_end.py's stages
    python benchmarks/scaling_model.py --bandwidth 1.25e9   # B in bytes/s (default 10 Gbit/s)
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import glob
import io
import math
import os
import tempfile
import time

import dask
import numpy as np
from distributed import get_task_stream

from dr_scale.outofcore import blocks, mergeable, passes
from dr_scale.outofcore.compute import dask_session
from dr_scale.outofcore.passes import PartSet


@dataclasses.dataclass
class Pass:
    kind: str
    parts: int
    task_seconds: float  # Σ compute time of the pass's per-part work
    result_bytes: int
    argument_bytes: int = 0
    kept_bytes: int = 0  # what the pass leaves on the workers (lifted rows: the ridge moves them once)
    block_seconds: float = 0.0  # the ridge: Σ compute time of the blocks' CG
    client_seconds: float = 0.0  # the client's CPU between the previous pass's end and this pass's start


def nbytes(obj) -> int:
    """Bytes of the arrays inside ``obj`` (arrays, tuples, lists, dicts, dataclasses, objects)."""
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, (tuple, list)):
        return sum(nbytes(x) for x in obj)
    if isinstance(obj, dict):
        return sum(nbytes(x) for x in obj.values())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return sum(nbytes(getattr(obj, f.name)) for f in dataclasses.fields(obj))
    return nbytes(vars(obj)) if hasattr(obj, "__dict__") else 0


def workers_cpu(client) -> float:
    """CPU seconds used so far by all worker processes (their tasks, and what serves them)."""
    return sum(client.run(time.process_time).values())


def compute_seconds(stream, prefixes) -> float:
    return sum(s["stop"] - s["start"] for t in stream for s in t["startstops"]
               if s["action"] == "compute" and str(t["key"]).strip("('").startswith(prefixes))


@contextlib.contextmanager
def recording(client, log: list[Pass]):
    """Record every pass of the PartSet engine and the ridge's blocks made with ``client``."""
    originals = {name: getattr(PartSet, name) for name in ("sum", "accumulate", "sum_and_derive")}
    build, solve = PartSet.build.__func__, blocks.solve_in_blocks
    last = [time.process_time()]  # the client's CPU clock at the end of the last pass

    def between() -> float:
        """The client's CPU seconds since the last pass ended."""
        return time.process_time() - last[0]

    def ended(p: Pass) -> None:
        """Record pass ``p`` and restart the client's clock."""
        log.append(p)
        last[0] = time.process_time()

    def wrap(name):
        def method(self, fn, *args, **kwargs):
            serial = between()
            cpu = workers_cpu(client)
            out = originals[name](self, fn, *args, **kwargs)
            cpu = workers_cpu(client) - cpu
            total = out[0] if name == "sum_and_derive" else out
            kept = 0
            if name == "sum_and_derive":
                kept = sum(client.nbytes(keys=[p.key for p in out[1].parts], summary=False).values())
            result = (sum(client.nbytes(keys=[total.key], summary=False).values())  # kept on a worker
                      if dask.is_dask_collection(total) else nbytes(total))
            ended(Pass(name, len(self.parts), cpu, result,
                       sum(nbytes(a) for a in args if passes._is_large(a)), kept, client_seconds=serial))
            return out
        return method

    def wrapped_build(cls, make, args_per_part, client=None, progress=False, spill=None):
        serial = between()
        cpu = workers_cpu(client)
        out = build(cls, make, args_per_part, client, progress, spill)
        ended(Pass("build", len(args_per_part), workers_cpu(client) - cpu, 0, client_seconds=serial))
        return out

    def wrapped_solve(parts, *args, **kwargs):
        serial = between()
        cpu = workers_cpu(client)
        with get_task_stream(client=client) as stream:
            out = solve(parts, *args, **kwargs)
        cpu = workers_cpu(client) - cpu
        cut, cg = compute_seconds(stream.data, ("_pieces",)), compute_seconds(stream.data, ("_solve_block",))
        share = cut / (cut + cg)  # the workers' CPU split between cutting pieces and the CG as their task times are
        ended(Pass("blocks", len(parts.parts), cpu * share, nbytes(out), block_seconds=cpu * (1 - share),
                   client_seconds=serial))
        return out

    import dr_scale.experiments.visits.experiment as experiment

    for name in originals:
        setattr(PartSet, name, wrap(name))
    PartSet.build = classmethod(wrapped_build)
    experiment.solve_in_blocks = wrapped_solve
    try:
        yield
        log.append(Pass("client", 0, 0.0, 0, client_seconds=between()))  # after the last pass: the model's making
    finally:
        for name, method in originals.items():
            setattr(PartSet, name, method)
        PartSet.build = classmethod(build)
        experiment.solve_in_blocks = solve


def measure_latency(client, n_parts: int) -> tuple[float, float]:
    """(L, o): a do-nothing pass's wall time over ``n_parts`` parts (median of 9), and the scheduler's
    time per task over 2,000 trivial tasks."""
    parts = PartSet.build(np.zeros, [(1,)] * n_parts, client)
    walls = []
    for _ in range(9):
        start = time.perf_counter()
        parts.sum(np.add, 0.0)
        walls.append(time.perf_counter() - start)
    start = time.perf_counter()
    client.gather(client.map(int, range(2000)))
    return float(np.median(walls)), (time.perf_counter() - start) / 2000


def add_rate() -> float:
    """Bytes per second of ``a += b`` on 24 MB float64 arrays (memory-bound, one thread)."""
    a, b = np.ones(3_000_000), np.ones(3_000_000)
    start = time.process_time()
    for _ in range(20):
        a += b
    return 20 * a.nbytes / (time.process_time() - start)


def project(log: list[Pass], rows0: int, rows: int, workers: int, L: float, o: float, B: float, A: float) -> float:
    """Projected wall seconds of the job recorded in ``log`` (measured at ``rows0`` rows) at ``rows`` rows."""
    scale = rows / rows0
    total = 0.0
    for p in log:
        total += p.client_seconds  # on the client, whatever N and W
        if p.kind == "client":
            continue
        n = max(1, round(p.parts * scale))
        t_part = p.task_seconds / p.parts
        W = workers
        if p.kind == "blocks":
            total += p.block_seconds * scale / W + math.ceil(n / W) * t_part  # CG work and the cut, balanced
            if W > 1:
                total += p.result_bytes / B + (p.kept_bytes * scale / W) * (W - 1) / W / B + o * W * W
            total += L
            continue
        if p.kind == "evaluate":  # a task per part, or per run of SPLIT_EVERY parts from GROUP_FROM parts on
            run = mergeable.SPLIT_EVERY if n >= mergeable.GROUP_FROM else 1
            tasks = math.ceil(n / run)
            total += math.ceil(tasks / W) * run * t_part + L + (o * tasks if W > 1 else 0.0)
            continue
        if p.kind == "import":  # n tasks (blocks of the raw table, two passes), gathered by the client
            total += math.ceil(n / W) * t_part + 2 * L + (o * n if W > 1 else 0.0)
            continue
        total += math.ceil(n / W) * t_part + L
        if W > 1:
            tasks = min(W, n)
            depth = math.ceil(math.log2(tasks)) if tasks > 1 else 0
            total += o * 2 * tasks + depth * (p.result_bytes / B + p.result_bytes / A) + p.result_bytes / B
            if p.argument_bytes:  # copied down a binary tree of the tasks' workers, one copy task each
                total += math.ceil(math.log2(tasks + 1)) * p.argument_bytes / B + o * tasks
    return total


def recorded(stage):
    """A job whose passes :func:`recording` logs: ``stage(source, client)``, its progress lines (stderr) silenced."""
    def run(client, source: str, log: list[Pass]):
        with recording(client, log), contextlib.redirect_stderr(io.StringIO()):
            stage(source, client)
    return run


def visits_job(data: str, client) -> None:
    """The visits job on the set ``data`` (no spill folder: kept in the workers)."""
    from dr_scale.experiments.visits.experiment import Settings, load_parts, run_experiment

    run_experiment(load_parts(data, client=client), Settings())


def fit(logs: str, client, folds: int | None = None) -> None:
    """``dr-scale fit`` (``--folds``), the sums kept in the workers, as on other machines."""
    from dr_scale.reward.fitting import FitSettings, fit_reward_model

    fit_reward_model(logs, FitSettings(folds=folds, spill="memory"), client=client)


def fit_propensity(logs: str, client) -> None:
    """``dr-scale fit-propensity``: the multinomial logging policy, cross-fitted over the command's default folds."""
    from dr_scale.commands.fit_propensity import DEFAULT_PROPENSITY_FOLDS
    from dr_scale.propensity.fitting import FitSettings, fit_propensity_model

    fit_propensity_model(logs, FitSettings(folds=DEFAULT_PROPENSITY_FOLDS, spill="memory"), client=client)


def learn(logs: str, client) -> None:
    """``dr-scale learn``: the DR-imputed linear policy with its own cross-fitted ρ̂, its defaults."""
    from dr_scale.learning.learn import learn_policy

    learn_policy(logs, client=client)


def run_evaluate(client, logs: str, log: list[Pass], estimators: tuple[str, ...] = ()):
    """evaluate's one pass (``estimators``, default the seven standard ones, ``evaluate``'s with a reward model; a
    linear ρ̂ of the log's d × k): a task per part, reduced by a tree of fan-in 8; its task time is that of every
    task of the pass."""
    from dr_scale.logs.opened import open_log
    from dr_scale.ope.estimators import STANDARD_ESTIMATORS
    from dr_scale.ope.evaluation import Evaluation, evaluate_log
    from dr_scale.reward.models import LinearRewardModel

    opened = open_log(logs)
    d, k = opened.dimensions()
    model = LinearRewardModel(np.zeros((d, k)), np.zeros(k))
    # ρ̂'s cost, not its values
    evaluation = Evaluation("constant:#0", list(estimators or STANDARD_ESTIMATORS), reward_model=model)
    cpu = workers_cpu(client)
    evaluate_log(opened, evaluation, client=client)
    log.append(Pass("evaluate", len(opened.paths), workers_cpu(client) - cpu, 0))


def run_import(client, logs: str, log: list[Pass]):
    """``dr-scale import`` of the raw CSV beside ``logs`` (end_to_end.py's ``raw.csv`` and ``spec.toml``) into a
    temporary folder: two passes of one task per block of the CSV, recorded as one pass of their tasks."""
    from dr_scale.logs.importing.driver import import_log
    from dr_scale.logs.importing.raw import DEFAULT_BLOCKSIZE

    work = os.path.dirname(os.path.abspath(logs))
    raw = os.path.join(work, "raw.csv")
    tasks = 2 * math.ceil(os.path.getsize(raw) / DEFAULT_BLOCKSIZE)  # the survey's and the conversion's
    with tempfile.TemporaryDirectory(dir=work) as out:
        cpu = workers_cpu(client)
        import_log(raw, os.path.join(work, "spec.toml"), os.path.join(out, "logs"), client=client)
        log.append(Pass("import", tasks, workers_cpu(client) - cpu, 0))


WORKERS = (8, 32, 64, 128)
TARGETS = {"visits job": (38_500_000, 385_000_000), "fit": (38_500_000, 100_000_000, 385_000_000),
           "evaluate": (38_500_000, 385_000_000, 10 ** 10)}
CLICK_TARGETS = (100_000_000, 10 ** 10)  # the click log's stages
CLICK_ESTIMATORS = ("DM", "IPS", "DR", "SNIPS", "SNDR")  # end_to_end.py's


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--visits", default="", help="a visits set (default: the cached 1,000,000-row set, else "
                                                     "generated into a temporary folder)")
    parser.add_argument("--visits-rows", type=int, default=1_000_000)
    parser.add_argument("--bandit-rows", type=int, default=200_000)
    parser.add_argument("--bandit-rows-per-part", type=int, default=100_000)
    parser.add_argument("--click-log", default="", help="the log benchmarks/end_to_end.py imported (its "
                                                        "ROWS/logs folder): also project its stages")
    parser.add_argument("--bandwidth", type=float, default=1.25e9, help="network bytes/s per worker (10 Gbit/s)")
    args = parser.parse_args()
    if args.click_log and not os.path.isdir(args.click_log):
        raise SystemExit(f"--click-log {args.click_log}: no such folder (run benchmarks/end_to_end.py first)")

    A = add_rate()
    with tempfile.TemporaryDirectory() as tmp, dask_session(local_workers=2, quiet=True) as client:
        from dr_scale.logs.opened import open_log
        from dr_scale.synthetic.bandit import generate_bandit
        from dr_scale.synthetic.visits import generate_visits

        data = args.visits or next(iter(glob.glob(os.path.expanduser(
            f"~/.cache/dr-scale/visits-{args.visits_rows}x5000-seed0-v*"))), "")
        if not data:
            data = f"{tmp}/visits"
            generate_visits(data, rows=args.visits_rows, features=5000, client=client)
        bandit = f"{tmp}/bandit"
        generate_bandit(bandit, rows=args.bandit_rows, features=1 << 18, actions=10, client=client,
                        rows_per_part=args.bandit_rows_per_part)  # the CLI defaults
        client.run(lambda: __import__("dr_scale.experiments.visits.experiment")
                   and __import__("dr_scale.reward.fitting"))
        runs = [("visits job", recorded(visits_job), data, args.visits_rows, TARGETS["visits job"]),
                ("fit", recorded(fit), bandit, args.bandit_rows, TARGETS["fit"]),
                ("evaluate", run_evaluate, bandit, args.bandit_rows, TARGETS["evaluate"])]
        if args.click_log:
            rows = open_log(args.click_log).footprint.rows
            runs += [(f"clicks: {name}", run, args.click_log, rows, CLICK_TARGETS) for name, run in (
                ("import", run_import), ("fit-propensity", recorded(fit_propensity)), ("learn", recorded(learn)),
                ("fit --folds 5", recorded(lambda logs, client: fit(logs, client, folds=5))),
                ("evaluate", lambda *a: run_evaluate(*a, estimators=CLICK_ESTIMATORS)))]
        jobs = {}
        for name, run, source, rows, targets in runs:
            log: list[Pass] = []
            start = time.perf_counter()
            run(client, source, log)
            jobs[name] = (log, rows, time.perf_counter() - start, targets)
        L, o = measure_latency(client, max(p.parts for log, *_ in jobs.values() for p in log))

    B = args.bandwidth
    print(f"measured on a 2-process LocalCluster (shared machine): per-pass latency L = {1e3 * L:.1f} ms, "
          f"per-task cost o = {1e3 * o:.2f} ms, a += b at A = {A / 1e9:.1f} GB/s; assumed B = {B / 1e9:.2f} GB/s")
    for name, (log, rows, wall, targets) in jobs.items():
        parts = max(p.parts for p in log)
        passes_ = sum(p.kind != "client" for p in log)
        print(f"\n{name}: measured at {rows:,} rows in {parts} parts, {passes_} passes, "
              f"{wall:.1f} s on the 2-process cluster; per part, all passes: "
              f"{1e3 * sum(p.task_seconds + p.block_seconds for p in log) / parts:.0f} ms of worker CPU; "
              f"the client's CPU between passes {sum(p.client_seconds for p in log):.1f} s")
        print(f"  {'rows':>14} {'T(1) s':>10} " + " ".join(f"{f'W={w}: s / eff.':>19}" for w in WORKERS))
        for target in targets:
            t1 = project(log, rows, target, 1, L, o, B, A)
            cells = []
            for w in WORKERS:
                tw = project(log, rows, target, w, L, o, B, A)
                cells.append(f"{tw:>10.1f} / {100 * t1 / (w * tw):>4.0f}%")
            print(f"  {target:>14,} {t1:>10.1f} " + " ".join(f"{c:>19}" for c in cells))


if __name__ == "__main__":
    main()
