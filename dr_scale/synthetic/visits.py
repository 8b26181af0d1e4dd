"""A synthetic "user visits" set shaped like the paper's (Section 5.2), written in parallel.

The real set (3,854,689 bcookies, ~5000 sparse binary features, visit counts with
mean 23.8) is not public. This generator draws a set with the same shape and the
properties the paper and its draft report (:data:`TARGETS`), from a small model of
*behaviour groups* (parameters in :class:`VisitsModel`, documented in docs/visits.md):

* the d features are "common" ones (Zipf popularity, exponent ``zipf_common``) and two
  signature blocks, A ("casual" behaviour) and B ("heavy" behaviour), of ``block``
  features each (Zipf within a block, exponent ``zipf_block``; 0, the default, is uniform);
* user i belongs to group g_i ~ Categorical(π) (:data:`GROUPS`); the user draws
  K_i ~ 1 + Poisson(κ · LogNormal(−s²/2, s)) features from the group's profile
  q_g = (1 − η) q_common + η (θ_g q_A + (1 − θ_g) q_B); the active set x_i is the
  distinct features drawn (~40 on average);
* visits v_i ~ Poisson(μ_i), log μ_i = α + β_g + Σ_j ω_j x_ij + ε_i with
  ω_j ~ N(0, σ_ω²) and ε_i ~ N(0, σ_ε²): a long right tail and a real but partial
  linear signal in the features.

The A-versus-B contrast between groups carries more variance than any single feature,
so the first principal component of the features is the behaviour axis: the projection
t_i = x_i·x̄ is high for casual users (θ_g = 0.9) and low for heavy ones. With uniform
popularity within the blocks and a flat common Zipf, x̄ is spread over the 2400 block
features (no single feature dominates it) and t_i within a group is a sum of many small
terms: its lower tail, hence the minimum m that sets the sampler, stays close to the
heavy groups as N grows (calibration in docs/visits.md). The paper's
sampler, centred a third of the way from the minimum projection to the mean, favours
heavy users, who visit more: the covariate shift of the paper.

Each part is drawn from ``numpy.random.default_rng((seed, 1, part))`` and the global
model (profiles, ω) from ``(seed, 0)``, so the set is a function of (seed, rows, d,
rows_per_part) only — identical for any Dask worker count. Parts are written by one
Dask task each, atomically; a ``_manifest.json`` written last marks a complete set.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import asdict, dataclass, field

import dask
import numpy as np
import pyarrow as pa

from dr_scale.core.errors import ParameterError
from dr_scale.io import strict_json
from dr_scale.io.atomic import incomplete_on_interrupt, url_to_fs
from dr_scale.io.config import NonNegativeInt, PositiveInt, check
from dr_scale.io.outputs import prepare_output_folder, publish_folder
from dr_scale.logs.writing import with_log_metadata, write_parquet
from dr_scale.outofcore.compute import compute

#: Bump when the generator's output changes, so cached sets are regenerated.
GENERATOR_VERSION = 3
PAPER_ROWS = 3_854_689
DEFAULT_ROWS = PAPER_ROWS
DEFAULT_FEATURES = 5000
DEFAULT_ROWS_PER_PART = 100_000
MANIFEST = "_manifest.json"
GUIDE = 1 << 16  # buckets of the feature draws' guide tables (a power of 2: u·GUIDE is exact)

#: What the paper (and its draft note) report for the real set.
TARGETS = {"true_mean": 23.8, "mean_propensity": 0.25, "naive_sampled_mean": 29.5}


@dataclass(frozen=True)
class Group:
    share: float  # π_g
    visits: float  # β_g, log-visits offset
    casual: float  # θ_g, share of signature draws from the casual block A (the rest from B)


#: Behaviour groups, from casual users (signature features mostly from block A) to heavy ones (block B).
GROUPS = (
    Group(0.70, -0.10, 0.90),
    Group(0.15, 0.14, 0.30),
    Group(0.15, 0.24, 0.10),
)


@dataclass(frozen=True)
class VisitsModel:
    """Parameters of the generator (documented in ``docs/visits.md``)."""

    groups: tuple = GROUPS
    breadth: float = 40.0  # κ, mean number of feature draws
    breadth_sigma: float = 0.0  # s_K (0: K_i − 1 is plain Poisson(κ))
    max_draws: int = 400
    signature: float = 0.5  # η, share of draws from the signature blocks
    block: int = 1200  # features in each of the blocks A and B
    zipf_common: float = 0.2  # popularity exponent over the common features
    zipf_block: float = 0.0  # popularity exponent within a block (0: uniform)
    alpha: float = 2.489  # α, sets the mean of the visits
    omega_sd: float = 0.12  # σ_ω
    contrast: float = 0.0  # γ: mean of ω_j, −γ on block A (casual) features, +γ on block B (heavy)
    noise_sd: float = 0.8  # σ_ε


@dataclass
class GlobalModel:
    """The parts of the model shared by all rows: profiles (CDFs) and effects ω."""

    cdf: np.ndarray  # (G, d) cumulative profiles
    omega: np.ndarray  # (d,)
    model: VisitsModel = field(default_factory=VisitsModel)

    def __post_init__(self):
        # guide[g, b] = #{j : cdf[g, j] ≤ b / GUIDE}: where the search for u ∈ [b/GUIDE, (b+1)/GUIDE) starts
        self.guide = np.stack([np.searchsorted(c, np.arange(GUIDE + 1) / GUIDE, side="right") for c in self.cdf])
        self.guide_steps = int(np.diff(self.guide, axis=1).max(initial=0))

    def draw_features(self, group: int, u: np.ndarray) -> np.ndarray:
        """Features of draws ``u`` ~ U[0, 1) from group's profile: ``min(searchsorted(cdf, u, "right"), d − 1)``,
        by a guide table (Chen & Asau 1974): a look-up, then ``guide_steps`` compares (1 with the defaults)."""
        cdf = np.append(self.cdf[group], np.inf)
        found = self.guide[group][(u * GUIDE).astype(np.int64)]
        for _ in range(self.guide_steps):
            found += cdf[found] <= u
        return np.minimum(found, cdf.shape[0] - 2)


def _zipf(n: int, exponent: float) -> np.ndarray:
    w = (np.arange(n) + 1.0) ** -exponent
    return w / w.sum()


def global_model(seed: int, n_features: int, model: VisitsModel = VisitsModel()) -> GlobalModel:
    """Feature profiles q_g and effects ω from ``default_rng((seed, 0))``."""
    rng = np.random.default_rng((seed, 0))
    block = min(model.block, n_features // 4)  # small d (tests): blocks of a quarter of the features each
    if block < 1:
        raise ParameterError(f"`features` = {n_features} is too small: the generator needs at least 4")
    n_common = n_features - 2 * block
    perm = rng.permutation(n_features)  # feature ids carry no popularity order
    common, block_a, block_b = (np.zeros(n_features) for _ in range(3))
    common[perm[:n_common]] = _zipf(n_common, model.zipf_common)
    block_a[perm[n_common:n_common + block]] = _zipf(block, model.zipf_block)
    block_b[perm[n_common + block:]] = _zipf(block, model.zipf_block)
    profiles = np.array([(1 - model.signature) * common
                         + model.signature * (g.casual * block_a + (1 - g.casual) * block_b) for g in model.groups])
    cdf = np.cumsum(profiles, axis=1)
    cdf /= cdf[:, -1:]
    omega = rng.normal(0.0, model.omega_sd, n_features) + model.contrast * ((block_b > 0).astype(float) - (block_a > 0))
    return GlobalModel(cdf, omega, model)


def generate_part(seed: int, part: int, first_row: int, n_rows: int, gm: GlobalModel) -> pa.Table:
    """Rows ``first_row … first_row + n_rows − 1`` (part ``part``) as a Parquet-ready table."""
    m = gm.model
    rng = np.random.default_rng((seed, 1, part))
    d = gm.cdf.shape[1]
    shares = np.array([grp.share for grp in m.groups])
    group = rng.choice(len(m.groups), size=n_rows, p=shares / shares.sum())
    breadth = m.breadth * rng.lognormal(-0.5 * m.breadth_sigma ** 2, m.breadth_sigma, n_rows)
    draws = np.minimum(1 + rng.poisson(breadth), m.max_draws)
    row = np.repeat(np.arange(n_rows, dtype=np.int32 if n_rows * d < 2 ** 31 else np.int64), draws)
    u = rng.random(row.shape[0])
    feature = np.empty(row.shape[0], dtype=row.dtype)
    draw_group = group[row]
    for k in range(len(m.groups)):
        sel = draw_group == k
        feature[sel] = gm.draw_features(k, u[sel])
    keys = np.sort(row * d + feature)
    keys = keys[np.r_[True, keys[1:] != keys[:-1]]]  # distinct features per row, sorted by (row, feature)
    rows, cols = np.divmod(keys, d)
    indptr = np.zeros(n_rows + 1, dtype=np.int32)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=indptr[1:])
    log_mu = (m.alpha + np.array([grp.visits for grp in m.groups])[group]
              + np.bincount(rows, weights=gm.omega[cols], minlength=n_rows)  # X ω
              + rng.normal(0.0, m.noise_sd, n_rows))
    visits = rng.poisson(np.exp(log_mu))
    table = pa.table({
        "row_id": pa.array(np.arange(first_row, first_row + n_rows, dtype=np.int64)),
        "features": pa.ListArray.from_arrays(pa.array(indptr), pa.array(cols.astype(np.int32, copy=False))),
        "visits": pa.array(visits.astype(np.int32)),
    })
    return with_log_metadata(table, d, None)


def part_bounds(n_rows: int, rows_per_part: int) -> np.ndarray:
    """The first row of each part and n_rows: ⌈n_rows / rows_per_part⌉ parts of near-equal size."""
    n_parts = max(1, -(-n_rows // rows_per_part))
    return np.linspace(0, n_rows, n_parts + 1).astype(np.int64)


def _write_part(fs, root: str, seed, part, first, n, gm) -> int:
    write_parquet(generate_part(seed, part, first, n, gm), posixpath.join(root, f"part-{part:05d}.parquet"), fs=fs)
    return n


def generate_visits(url: str, *, rows: int = DEFAULT_ROWS, features: int = DEFAULT_FEATURES, seed: int = 0,
                    rows_per_part: int = DEFAULT_ROWS_PER_PART, storage_options: dict | None = None,
                    client=None, progress: bool = False, overwrite: bool = False) -> dict:
    """Write the set to ``url`` (a folder) in parallel, one Dask task per part; return the manifest.

    A non-empty ``url`` is refused unless ``overwrite``, which replaces only a folder dr-scale wrote
    (:func:`dr_scale.io.outputs.prepare_output_folder`).
    """
    for name, value in (("rows", rows), ("features", features), ("rows_per_part", rows_per_part)):
        check(PositiveInt, name, value)
    check(NonNegativeInt, "seed", seed)
    gm = global_model(seed, features)
    bounds = part_bounds(rows, rows_per_part)
    gm_key = dask.delayed(gm, pure=True)
    fs, root = url_to_fs(url, storage_options)  # pickles without secrets (dr_scale.io.storage)
    prepare_output_folder(url, fs, root, overwrite=overwrite, writer="dr_scale.synthetic.visits")
    tasks = [dask.delayed(_write_part, pure=True)(fs, root, seed, j, int(bounds[j]),
                                                  int(bounds[j + 1] - bounds[j]), gm_key)
             for j in range(len(bounds) - 1)]
    with incomplete_on_interrupt(url):
        written = compute(*tasks, client=client, progress=progress)
    manifest = {"generator": "dr_scale.synthetic.visits", "version": GENERATOR_VERSION, "rows": int(sum(written)),
                "features": features, "seed": seed, "rows_per_part": rows_per_part, "parts": len(tasks),
                "model": asdict(VisitsModel())}
    publish_folder(fs, root, strict_json.dumps(manifest, indent=2))
    return manifest


def read_manifest(url: str, storage_options: dict | None = None) -> dict | None:
    """The manifest of a complete set at ``url``, or None."""
    fs, root = url_to_fs(url, storage_options)
    path = posixpath.join(root, MANIFEST)
    if not fs.exists(path):
        return None
    with fs.open(path, "r") as f:
        return json.load(f)
