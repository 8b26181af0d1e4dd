"""``dr-scale run pipelines/visits.toml``: the paper's Fig. cv experiment, end to end.

With ``data`` empty (the default) the job uses the embedded set: ``rows`` rows
(by default the paper's 3,854,689, so that each fraction's subsamples have the paper's
sizes) generated on first use into the cache folder ``<cache>/visits-<rows>x<features>-seed<seed>-v<version>``,
``cache`` defaulting to ``$DR_SCALE_CACHE`` or ``~/.cache/dr-scale``. Later runs reuse
the cached set (complete sets carry a ``_manifest.json``).
"""

from __future__ import annotations

import posixpath
import sys
import time
from typing import Annotated, Literal

from pydantic import Field

from dr_scale.core.errors import check_output_folder
from dr_scale.experiments.visits.experiment import (
    Settings,
    load_parts,
    run_experiment,
)
from dr_scale.experiments.visits.outputs import write_outputs
from dr_scale.io.atomic import url_to_fs
from dr_scale.io.cache import cache_root, spill_root
from dr_scale.io.config import PositiveInt, validate
from dr_scale.io.storage import storage_options
from dr_scale.outofcore.passes import spill_folder
from dr_scale.synthetic import visits as gen


class VisitsJob(Settings):
    """The keys of pipelines/visits.toml, typed, with their defaults: the experiment's
    :class:`~dr_scale.experiments.visits.experiment.Settings` and where its data, outputs and caches are."""

    job: Literal["visits"]
    data: str = ""
    rows: Annotated[int, Field(ge=2)] = gen.DEFAULT_ROWS
    features: PositiveInt = gen.DEFAULT_FEATURES
    out: Annotated[str, Field(min_length=1)] = "results/visits"
    cache: str = ""
    storage_options: dict | str = Field(default_factory=dict)
    spill: Annotated[str, Field(min_length=1)] = "disk"

    def settings(self) -> Settings:
        """The experiment's settings alone (no storage options: they go into no task graph)."""
        return Settings(**self.model_dump(include=set(Settings.model_fields)))


def embedded_dataset(rows: int, features: int, seed: int, cache: str = "", client=None, progress: bool = False) -> str:
    """The cached embedded set's folder, generated (in parallel, through Dask) on first use."""
    url = posixpath.join(cache_root(cache), f"visits-{rows}x{features}-seed{seed}-v{gen.GENERATOR_VERSION}")
    manifest = gen.read_manifest(url)
    if manifest is None or manifest.get("rows") != rows:
        print(f"generating the embedded visits set ({rows:,} rows × {features} features) into {url} …",
              file=sys.stderr)
        start = time.perf_counter()
        gen.generate_visits(url, rows=rows, features=features, seed=seed, client=client, progress=progress,
                            overwrite=True)  # the cache's own folder, left incomplete by an interrupted run
        print(f"generated in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return url


def run(config: dict, client=None, progress: bool = False) -> int:
    """Run a visits job (``dr-scale run`` of a ``kind = "visits"`` file): validate ``config``, compute the experiment
    and write its outputs; the exit status (0)."""
    job = validate(VisitsJob, config)
    settings, c = job.settings(), job.model_dump()
    options = storage_options(c["storage_options"] or None)  # credentials: job file, else the environment
    out_fs, out_path = url_to_fs(c["out"], options or None)
    check_output_folder(c["out"], out_fs, out_path)
    data = c["data"] or embedded_dataset(c["rows"], c["features"], c["seed"], c["cache"], client, progress)
    start = time.perf_counter()
    with spill_folder(str(c["spill"]), client, disk=spill_root(c["cache"])) as spill:
        parts = load_parts(data, options or None, client=client, progress=progress, spill=spill)
        read = time.perf_counter() - start
        result = run_experiment(parts, settings, progress=progress)
    result.timings = {"read": round(read, 3), **result.timings}
    result.timings["total"] = round(time.perf_counter() - start, 3)
    written = write_outputs(result, c["out"], data=data, storage_options=options or None)
    print_summary(result)
    print(f"wrote {', '.join(posixpath.basename(w) for w in written)} to {c['out']}", file=sys.stderr)
    return 0


def print_summary(result) -> None:
    """Print the calibration line and one line per fraction: IPS and DR bias and RMSE, and DR's reduction."""
    cal = result.calibration
    print(f"{result.n_rows:,} rows: true mean {cal['true_mean']:.3f}, mean propensity {cal['mean_propensity']:.3f}, "
          f"naive sampled mean {cal['naive_sampled_mean']:.2f} ({100 * cal['naive_bias']:.1f}% bias)")
    print(f"{'fraction':>9} {'IPS bias':>9} {'IPS rmse':>9} {'DR bias':>9} {'DR rmse':>9} {'reduction':>9}")
    for r in result.per_fraction():
        print(f"{r['fraction']:>9g} {r['ips_bias']:>9.3f} {r['ips_rmse']:>9.3f} {r['dr_bias']:>9.3f} "
              f"{r['dr_rmse']:>9.3f} {100 * r['dr_rmse_reduction']:>8.1f}%")
    print(f"DR's mean rmse reduction {100 * result.mean_rmse_reduction():.1f}% (paper: 13.6%); "
          f"{result.timings.get('total', 0):.1f} s")
