"""``dr-scale run`` jobs for the classification experiments: Table 2 and Table 3.

Both jobs build one Dask graph of tasks — per data set × block of repetitions — and
run it with :func:`dr_scale.outofcore.compute.compute` (local threads or a cluster, with
progress). Every task writes its records atomically to
``OUTPUT/tasks-FINGERPRINT/DATASET/…json`` and a rerun skips the tasks whose file
exists, so an interrupted run resumes where it stopped. The fingerprint hashes the
options that change results (seed, learners' settings, split), so a run with other
settings never reuses stale records; adding repetitions or data sets only adds tasks.

Options (TOML keys, overridable with ``--set key=value``):

=================  ===================================================================
``output``         folder of the reports and task records (any fsspec URL)
``datasets``       ``"all"`` or a list of names
``repetitions``    Table 2: 500 in the paper; Table 3: 30
``seed``           the run's seed (all randomness is keyed by it)
``data_dir``       the data folder (default ``$DR_SCALE_DATA``, else the user cache)
``block``          repetitions per task (Table 2: default 100; Table 3: always 1)
``dlm``            DLM options, e.g. ``{n_restarts = 20, max_iter = 200}``
``tree``           decision-tree options of the Filter/Offset Trees (Table 3)
``ridge_alpha``    ridge penalty of the loss model
=================  ===================================================================
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import sys
import time
from typing import Annotated, Literal

import dask
from pydantic import Field

from dr_scale.experiments.classification import evaluation_experiment, optimization_experiment, reports
from dr_scale.experiments.classification.protocol import dataset_names
from dr_scale.io import strict_json
from dr_scale.io.atomic import atomic_write, url_to_fs
from dr_scale.io.config import ConfigError, Model, NonNegativeInt, PositiveFinite, PositiveInt, validate
from dr_scale.outofcore.compute import compute

RESULT_KEYS = ("seed", "dlm", "tree", "ridge_alpha", "train_fraction")


class DLMOptions(Model):
    """Options of :class:`dr_scale.experiments.classification.dlm.DirectLossMinimization` (Appendix A)."""

    epsilon: PositiveFinite = 0.1
    n_restarts: PositiveInt = 20
    max_iter: PositiveInt = 200
    tol: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 1e-4
    n_iter_no_change: PositiveInt = 50
    init_scale: PositiveFinite = 0.01


class ClassificationJob(Model):
    """The keys of pipelines/classification_{eval,opt}.toml (module docstring)."""

    job: Literal["classification_eval", "classification_opt"]
    output: Annotated[str, Field(min_length=1)] = ""
    datasets: Literal["all"] | Annotated[list[str], Field(min_length=1)] = "all"
    repetitions: PositiveInt = 1
    seed: NonNegativeInt = 0
    block: PositiveInt = 100
    data_dir: str | None = None
    ridge_alpha: PositiveFinite = 1.0
    train_fraction: Annotated[float, Field(gt=0, lt=1)] = 0.5
    dlm: DLMOptions | None = None
    tree: dict[str, int | float | str | bool | None] | None = None
    storage_options: dict | None = None


def _options(config: dict, defaults: dict) -> dict:
    options = {**defaults, **validate(ClassificationJob, config).model_dump(exclude_unset=True)}
    options.pop("job", None)
    try:
        options["datasets"] = dataset_names(options.get("datasets"))
    except ValueError as exc:
        raise ConfigError(f"datasets: {exc}") from None
    if options.get("tree") is not None:
        _check_tree(options["tree"])
    return options


def _check_tree(params: dict) -> None:
    """The decision-tree options as scikit-learn validates them."""
    from sklearn.tree import DecisionTreeClassifier

    known = sorted(DecisionTreeClassifier().get_params())
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ConfigError(f"tree: unknown key(s) {', '.join(unknown)}; known: {', '.join(known)}")
    try:
        DecisionTreeClassifier(**params)._validate_params()
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"tree: {' '.join(str(exc).split())}") from None


def _output(options: dict):
    """The output folder's filesystem and path, refused before any work if it cannot be one."""
    from dr_scale.core.errors import check_output_folder

    fs, root = url_to_fs(str(options["output"]), options.get("storage_options"))
    check_output_folder(str(options["output"]), fs, root)
    return fs, root


def _task_folder(options: dict, kind: str) -> str:
    relevant = {k: options.get(k) for k in RESULT_KEYS} | {"kind": kind}
    digest = hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:12]
    return posixpath.join(str(options["output"]).rstrip("/"), f"tasks-{digest}")


def _stored(fs, path: str):
    if fs.exists(path):
        with fs.open(path, "rb") as f:
            try:
                return json.loads(f.read())
            except ValueError:  # not a record this job wrote: compute it again
                return None
    return None


def _save(records, fs, path: str):
    atomic_write(fs, path, strict_json.dumps(records))
    return records


def _evaluation_block(prepared, repetitions, options, fs, path):
    return _save(evaluation_experiment.run_repetitions(prepared, repetitions, options), fs, path)


def _optimization_task(name, repetition, options, fs, path):
    return _save([optimization_experiment.run_repetition(name, repetition, options)], fs, path)


def _run(tasks: list, done: list, client, progress: bool) -> list[dict]:
    """Compute the pending tasks and return all records, stored and new."""
    print(f"{len(done)} task(s) already done, {len(tasks)} to run", file=sys.stderr)
    computed = compute(*tasks, client=client, progress=progress) if tasks else ()
    return [record for block in [*done, *computed] for record in block]


def run_evaluation(config: dict, client=None, progress: bool = False) -> int:
    """Table 2: bias and rmse of DM, IPS and DR for a DLM policy (module docstring for options)."""
    options = _options(config, {"output": "results/classification_eval", "datasets": "all", "repetitions": 500,
                                "seed": 0, "block": 100, "train_fraction": 0.5})
    started = time.perf_counter()
    fs, root = _output(options)
    folder = _task_folder({**options, "output": root}, "evaluation")
    block = max(1, int(options["block"]))
    tasks, done = [], []
    for name in options["datasets"]:
        prepared = dask.delayed(evaluation_experiment.prepare, pure=True)(name, options)
        for start in range(0, options["repetitions"], block):
            reps = range(start, min(start + block, options["repetitions"]))
            path = posixpath.join(folder, name, f"reps-{reps.start:05d}-{reps.stop - 1:05d}.json")
            stored = _stored(fs, path)
            if stored is not None:
                done.append(stored)
            else:
                tasks.append(dask.delayed(_evaluation_block)(prepared, list(reps), options, fs, path))
    records = _run(tasks, done, client, progress)
    summary = evaluation_experiment.summarize(records)
    return _finish(options, started, tasks, done, records, summary, "table2",
                   reports.evaluation_table(summary), reports.evaluation_checks(summary),
                   "Table 2: policy evaluation (bias and rmse of the classification-error estimates of a DLM policy)",
                   [("|bias|", ["bias (IPS)", "bias (DR)", "bias (DM)"]),
                    ("rmse", ["rmse (IPS)", "rmse (DR)", "rmse (DM)"])],
                   "Policy evaluation on classification data (paper Table 2 / Fig. class-eval)")


def run_optimization(config: dict, client=None, progress: bool = False) -> int:
    """Table 3: test error of DLM and Filter Tree on IPS/DR-imputed losses, and the Offset Tree."""
    options = _options(config, {"output": "results/classification_opt", "datasets": "all", "repetitions": 30,
                                "seed": 0, "train_fraction": 0.7})
    started = time.perf_counter()
    fs, root = _output(options)
    folder = _task_folder({**options, "output": root}, "optimization")
    tasks, done = [], []
    for name in options["datasets"]:
        for rep in range(options["repetitions"]):
            path = posixpath.join(folder, name, f"rep-{rep:05d}.json")
            stored = _stored(fs, path)
            if stored is not None:
                done.append(stored)
            else:
                tasks.append(dask.delayed(_optimization_task)(name, rep, options, fs, path))
    records = _run(tasks, done, client, progress)
    summary = optimization_experiment.summarize(records)
    return _finish(options, started, tasks, done, records, summary, "table3",
                   reports.optimization_table(summary), reports.optimization_checks(summary),
                   "Table 3: policy optimization (mean test error over repetitions)",
                   [("test error", ["IPS (DLM)", "DR (DLM)", "Offset Tree"]),
                    ("test error", ["IPS (FT)", "DR (FT)", "Offset Tree"])],
                   "Policy optimization on classification data (paper Table 3 / Fig. class-opt)")


def _finish(options: dict, started: float, tasks: list, done: list, records: list[dict], summary, stem: str,
            table, checks: dict, description: str, plot_panels, title: str) -> int:
    """Write the report (tables beside the paper's, checks, plots) and say where it went."""
    meta = _meta(options, started, len(tasks), len(done), description)
    paths = reports.write_report(str(options["output"]), stem, summary, table, records, checks, meta,
                                 plot_panels, title, options.get("storage_options"))
    _announce(paths, checks, meta)
    return 0


def _meta(options: dict, started: float, tasks_run: int, tasks_resumed: int, description: str) -> dict:
    return {"description": description, "options": {k: v for k, v in options.items() if k != "storage_options"},
            "wall_seconds": round(time.perf_counter() - started, 2), "tasks_run": tasks_run,
            "tasks_resumed": tasks_resumed}


def _announce(paths, checks, meta) -> None:
    print(f"done in {meta['wall_seconds']} s; wrote {', '.join(paths)}", file=sys.stderr)
    print(strict_json.dumps(checks, indent=2))
