"""The sampler's logged view of a visits set, and the full-data IPS / DR pass.

Over all N users (no subsample), the paper's covariate-shift logging gives a
two-action bandit log: action a_i = 1{U(seed, "logging-full", repetition; row_id) < p_i}
("sampled"), reward r_i = a_i v_i, propensity of the logged action p_i if a_i = 1
else 1 − p_i. :func:`write_logged_view` writes it as a logged data set of the core
contract (``dr_scale.logs.contract``), so ``dr-scale evaluate URL --policy constant:1``
estimates the mean visits from it; :func:`full_data_sums` computes IPS and DR
(π ≡ 1, a given ρ̂) on it in one pass, the operation benchmarked against a bare
read in ``benchmarks/visits_pass.py``.
"""

from __future__ import annotations

import posixpath

import numpy as np
import pyarrow as pa

from dr_scale.core import keyed_random
from dr_scale.experiments.visits.data import VisitsPart
from dr_scale.experiments.visits.sampler import propensity
from dr_scale.io.atomic import url_to_fs
from dr_scale.logs.sparse import csr_to_features
from dr_scale.logs.writing import with_log_metadata, write_parquet
from dr_scale.outofcore.compute import compute
from dr_scale.outofcore.passes import PartSet, load_part


def logging_draw(part: VisitsPart, xbar, m: float, mbar: float, seed: int, repetition: int = 0,
                 kernel: str = "density", t=None):
    """(p, a) over all rows of the part (``t`` = X x̄ if already computed)."""
    p = propensity(part.X @ xbar if t is None else t, m, mbar, kernel)
    return p, keyed_random.bernoulli(p, part.row_id, seed, "logging-full", repetition)


def full_data_sums(part: VisitsPart, xbar, m, mbar, coef, intercept, seed: int = 0) -> np.ndarray:
    """[n, Σ a v/p, Σ (ρ̂ + a (v − ρ̂)/p)] with ρ̂ = intercept + coef·x."""
    X = part.X
    # two one-vector mat-vecs: scipy's two-column product is slower
    p, a = logging_draw(part, xbar, m, mbar, seed, t=X @ xbar)
    rho = X @ coef + intercept
    w = a / p
    ips = w @ part.visits
    return np.array([len(part), ips, rho.sum() + ips - w @ rho])  # Σ ρ̂ + a (v − ρ̂)/p


def _write_logged_part(part, xbar, m, mbar, seed, repetition, kernel, fs, root, index):
    part = load_part(part)
    p, a = logging_draw(part, xbar, m, mbar, seed, repetition, kernel)
    table = pa.table({
        "row_id": pa.array(part.row_id),
        "features": csr_to_features(part.X),
        "action": pa.array(a.astype(np.int8)),
        "reward": pa.array(np.where(a, part.visits, 0.0)),
        "propensity": pa.array(np.where(a, p, 1.0 - p)),
    })
    write_parquet(with_log_metadata(table, part.n_features, 2), posixpath.join(root, f"part-{index:05d}.parquet"),
                  fs=fs)
    return len(part)


def write_logged_view(parts: PartSet, url: str, xbar, m: float, mbar: float, *, seed: int = 0,
                      repetition: int = 0, kernel: str = "density", storage_options: dict | None = None,
                      progress: bool = False) -> int:
    """Write the logged view, one part file per part, atomically; return the row count."""
    import dask

    fs, root = url_to_fs(url, storage_options)  # pickles without secrets (dr_scale.io.storage)
    tasks = [dask.delayed(_write_logged_part, pure=True)(part, xbar, m, mbar, seed, repetition, kernel, fs, root, i)
             for i, part in enumerate(parts.parts)]
    return int(sum(compute(*tasks, client=parts.client, progress=progress)))
