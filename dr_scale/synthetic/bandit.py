"""A synthetic contextual bandit with known truth: sparse contexts, a non-linear reward, a skewed logger.

The world (every formula and parameter is in docs/generate-bandit.md) has d sparse binary
features in F = 40 *fields*, like the hashed categorical fields of an ad log: field f
owns the feature ids [s_f, s_f + n_f), its sizes growing geometrically (the largest
1000× the smallest, Σ n_f = d). Row i has at most one feature per field:

* field f is present with probability q_f (q from 1.0 down to 0.5 over the fields:
  ~30 active features a row), its value a Zipf(1.1) rank over the field's n_f ids, so
  feature popularity is skewed within every field;
* the true reward of action a is E[r | x, a] = σ(s_a(x)), with the score
  s_a(x) = b_a + x·W_a + m_a · tanh(x·u) · (x·v) — linear terms plus an interaction
  (a gate tanh(x·u) times a second direction x·v, weighted per action by m_a) — and the
  observed reward is Bernoulli: r ~ Bernoulli(σ(s_a(x)));
* the logging policy mixes a softmax of another score with the uniform policy,
  μ(a | x) = (1 − ε) softmax_a(τ ℓ(x)) + ε / k with ℓ_a(x) = c_a + ρ x·W_a + √(1 − ρ²) x·Z_a
  and ε = min(0.5, 0.001 k) (``uniform_share`` sets another ε, 0 for a pure softmax): propensities down to
  0.001, so IPS weights reach 1000.

``hide_propensity`` writes the log without its ``propensity`` column, as a team's log that never recorded
it: the logging policy is then to be estimated (docs/propensities.md), and its truth stays known —
:meth:`World.scores` of the world :func:`make_world` rebuilds from the manifest.

The world's parameters (b, W, m, u, v, c, Z) are drawn from ``default_rng([seed, 0xBA4D17])``
for the given (d, k); every per-row draw (fields, action, reward) is keyed by
(seed, purpose, row_id) through :mod:`dr_scale.core.keyed_random`. A log is therefore a
function of (seed, d, k, row ids) only: identical for any part size, worker count or
day split. Every part carries ``expected_reward`` (list<float64>, the k values
E[r | x, a]), so the true value of any policy on those rows is known:
V(π) = (1/n) Σ_i Σ_a π(a | x_i) E[r | x_i, a].
"""

from __future__ import annotations

import datetime
import functools
import json
import posixpath
from dataclasses import asdict, dataclass, field

import dask
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

from dr_scale.core import keyed_random
from dr_scale.core.errors import ParameterError
from dr_scale.io.atomic import atomic_open, incomplete_on_interrupt, url_to_fs
from dr_scale.io.config import NonNegativeInt, PositiveInt, check
from dr_scale.io.outputs import prepare_output_folder, publish_folder
from dr_scale.logs.sparse import binary_csr, compact_index
from dr_scale.logs.writing import with_log_metadata
from dr_scale.outofcore.compute import compute

#: Bump when the generator's output changes for the same options.
GENERATOR_VERSION = 2
MANIFEST = "_manifest.json"
FIRST_DATE = datetime.date(2026, 11, 1)
MAX_FEATURES = 1 << 24
MAX_ACTIONS = 500
#: ``click_rate`` P: the action offsets' mean is logit(P) − CLICK_SHIFT, the shift that offsets E[e^{x·W_a + …}] > 1
#: of the scores' spread (the mean reward then lands within ~20% of P for P ≤ 1%: docs/generate-bandit.md).
CLICK_SHIFT = 1.9


@dataclass(frozen=True)
class WorldSettings:
    """The world's fixed constants (docs/generate-bandit.md explains each)."""

    fields: int = 40  # F
    presence_first: float = 1.0  # q_0: the first field is always present …
    presence_last: float = 0.5  # … the last in half of the rows
    size_ratio: float = 1000.0  # n_{F-1} / n_0
    zipf: float = 1.1  # popularity exponent within a field
    base: float = -1.5  # mean of the action offsets b_a
    base_sd: float = 0.5  # sd of b_a
    weight_sd: float = 0.25  # root mean square over the fields of the sd of W_a's and Z_a's entries
    field_effect: float = 0.25  # γ: the sd in field f ∝ (n_f / n_0)^−γ (coarse fields carry larger effects)
    interaction_sd: float = 0.8  # sd of m_a
    gate_sd: float = 0.25  # sd of u's and v's entries
    logging_temperature: float = 1.0  # τ
    logging_correlation: float = 0.5  # ρ: how much the logger's score knows of W
    min_propensity: float = 0.001  # ε / k


@dataclass
class World:
    """The parameters of one world: fields, reward and logging functions."""

    n_features: int
    n_actions: int
    field_start: np.ndarray  # (F + 1,) feature id ranges of the fields
    presence: np.ndarray  # (F,) q_f
    offset: np.ndarray  # (k,) b_a
    interaction: np.ndarray  # (k,) m_a
    logging_offset: np.ndarray  # (k,) c_a
    weights: np.ndarray  # (d, 2k + 2): columns W_0…W_{k-1}, Z_0…Z_{k-1}, u, v
    settings: WorldSettings = field(default_factory=WorldSettings)

    @property
    def epsilon(self) -> float:
        """The uniform share ε of the logging policy."""
        return min(0.5, self.settings.min_propensity * self.n_actions)

    def contexts(self, first: int, n: int, seed: int) -> sp.csr_matrix:
        """The contexts x_i of rows ``first … first + n − 1`` (CSR, sorted ids, at most one feature per field).

        One draw U_if per (row, field), at position i·F + f of the keyed stream
        (:func:`keyed_random.positions`): the field is present when U_if < q_f, and then
        its value the rank ⌊t⌋ − 1 of t = (1 + V ((n_f + 1)^(1−s) − 1))^(1/(1−s)), V = U_if / q_f
        (uniform on [0, 1) given presence): the inverse CDF of the power law ∝ t^−s on
        [1, n_f + 1), so P(rank = j) ≈ ∝ (j + 1)^−s (s = ``settings.zipf``).
        """
        F = self.presence.shape[0]
        u = keyed_random.positions(first * F, n * F, seed, "bandit-context").reshape(n, F)
        present = u < self.presence
        np.minimum(u, self.presence, out=u)  # absent fields' draws kept in range (their ranks are dropped)
        size = np.diff(self.field_start)
        power = 1.0 - self.settings.zipf
        u *= (np.power(size + 1.0, power) - 1.0) / self.presence  # V ((n_f + 1)^(1−s) − 1)
        u += 1.0
        np.power(u, 1.0 / power, out=u)
        rank = u.astype(np.int32)
        rank += (self.field_start[:-1] - 1).astype(np.int32)
        np.minimum(rank, self.field_start[1:].astype(np.int32) - 1, out=rank)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(present.sum(axis=1), out=indptr[1:])
        return binary_csr(*compact_index(indptr, rank[present], self.n_features), self.n_features)

    def scores(self, X: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
        """(expected rewards σ(s_a(x_i)), logging probabilities μ(a | x_i)), both (n, k)."""
        k, s = self.n_actions, self.settings
        proj = np.asarray(X @ self.weights)  # one sparse product for every direction
        linear, other, gate, second = proj[:, :k], proj[:, k:2 * k], np.tanh(proj[:, 2 * k]), proj[:, 2 * k + 1]
        score = self.offset + linear + np.outer(gate * second, self.interaction)
        expected = 1.0 / (1.0 + np.exp(-score))
        rho = s.logging_correlation
        logit = s.logging_temperature * (self.logging_offset + rho * linear + np.sqrt(1 - rho * rho) * other)
        logit -= logit.max(axis=1, keepdims=True)
        probs = np.exp(logit)
        probs *= (1 - self.epsilon) / probs.sum(axis=1, keepdims=True)
        probs += self.epsilon / k
        return expected, probs


def field_starts(n_features: int, settings: WorldSettings) -> np.ndarray:
    """Feature id ranges of the fields: n_f = 2 + ⌊(d − 2F) · r_f / Σ_g r_g⌋, r_f = ratio^(f/(F−1)), summing to d."""
    F = settings.fields
    if n_features < 2 * F:
        raise ParameterError(f"`features` must be at least {2 * F} (two ids per field of the {F} fields), "
                             f"got {n_features}")
    share = settings.size_ratio ** (np.arange(F) / (F - 1))
    sizes = 2 + np.floor((n_features - 2 * F) * share / share.sum()).astype(np.int64)
    sizes[-1] += n_features - sizes.sum()  # the largest field takes the rounding
    return np.concatenate([[0], np.cumsum(sizes)])


@functools.lru_cache(maxsize=2)
def make_world(seed: int, n_features: int, n_actions: int, settings: WorldSettings = WorldSettings()) -> World:
    """The world of (seed, d, k): its parameters from ``default_rng([seed, 0xBA4D17])`` (cached per process)."""
    check_size(n_features, n_actions)
    check(NonNegativeInt, "seed", seed)
    s, k = settings, n_actions
    rng = np.random.default_rng([seed, 0xBA4D17])
    offset = rng.normal(s.base, s.base_sd, k)
    interaction = rng.normal(0.0, s.interaction_sd, k)
    logging_offset = rng.normal(0.0, s.base_sd, k)
    weights = rng.standard_normal((n_features, 2 * k + 2))
    starts = field_starts(n_features, s)
    size = np.diff(starts)
    field_sd = (size / size[0]) ** -s.field_effect
    field_sd *= s.weight_sd / np.sqrt(np.mean(field_sd ** 2))
    weights[:, :2 * k] *= np.repeat(field_sd, size)[:, None]
    weights[:, 2 * k:] *= s.gate_sd
    presence = np.linspace(s.presence_first, s.presence_last, s.fields)
    return World(n_features, n_actions, starts, presence, offset, interaction, logging_offset, weights, s)


def check_size(n_features: int, n_actions: int) -> None:
    """Refuse a world whose k is outside [2, MAX_ACTIONS] or whose d is above MAX_FEATURES (naming the parameter)."""
    if not 2 <= n_actions <= MAX_ACTIONS:
        raise ParameterError(f"`actions` must be in [2, {MAX_ACTIONS}], got {n_actions}")
    if n_features > MAX_FEATURES:
        raise ParameterError(f"`features` must be at most {MAX_FEATURES} (2^24), got {n_features}")
    field_starts(n_features, WorldSettings())


# -- one part ------------------------------------------------------------------------
@dataclass
class Calibration:
    """Mergeable sums over rows: the log's calibration figures."""

    rows: int
    reward_sum: float
    value_sums: np.ndarray  # (k,) Σ_i E[r | x_i, a]: each constant policy's value × n
    logging_value_sum: float  # Σ_i Σ_a μ(a | x_i) E[r | x_i, a]
    oracle_value_sum: float  # Σ_i max_a E[r | x_i, a]
    action_counts: np.ndarray  # (k,) rows that logged each action
    active_sum: int  # Σ_i |x_i|
    min_propensity: float
    max_propensity: float

    @classmethod
    def of(cls, X, expected, probs, action, reward, propensity) -> Calibration:
        """One part's calibration sums: rows, Σ r, Σ_i ρ(x_i, ·), Σ_i π·ρ, Σ_i max_a ρ, action counts, non-zeros and
        the propensities' range."""
        return cls(int(reward.shape[0]), float(reward.sum()), expected.sum(axis=0),
                   float((probs * expected).sum()), float(expected.max(axis=1).sum()),
                   np.bincount(action, minlength=expected.shape[1]), int(X.indptr[-1]),
                   float(propensity.min()), float(propensity.max()))

    def __add__(self, other: Calibration) -> Calibration:
        return Calibration(self.rows + other.rows, self.reward_sum + other.reward_sum,
                           self.value_sums + other.value_sums, self.logging_value_sum + other.logging_value_sum,
                           self.oracle_value_sum + other.oracle_value_sum, self.action_counts + other.action_counts,
                           self.active_sum + other.active_sum, min(self.min_propensity, other.min_propensity),
                           max(self.max_propensity, other.max_propensity))

    def summary(self) -> dict:
        """The figures: means over rows and the policies' true values."""
        n = self.rows
        constant = self.value_sums / n
        return {
            "rows": n,
            "mean_active_features": self.active_sum / n,
            "mean_reward": self.reward_sum / n,
            "min_propensity": self.min_propensity,
            "max_propensity": self.max_propensity,
            "max_weight": 1.0 / self.min_propensity,
            "logged_action_shares": (self.action_counts / n).tolist(),
            "logging_value": self.logging_value_sum / n,
            "constant_values": constant.tolist(),
            "best_constant_action": int(np.argmax(constant)),
            "best_constant_value": float(constant.max()),
            "oracle_value": self.oracle_value_sum / n,
        }


def generate_rows(world: World, seed: int, first: int, n: int,
                  hide_propensity: bool = False) -> tuple[pa.Table, Calibration]:
    """Rows ``first … first + n − 1`` as a logged table (with ``expected_reward``; without ``propensity`` when
    ``hide_propensity``) and their calibration sums."""
    row_id = np.arange(first, first + n, dtype=np.int64)
    X = world.contexts(first, n, seed)
    expected, probs = world.scores(X)
    n, k = expected.shape
    action = keyed_random.categorical(probs, row_id, seed, "bandit-action")
    logged = np.arange(n) * k + action
    propensity = probs.take(logged)
    reward = (keyed_random.uniform(row_id, seed, "bandit-reward") < expected.take(logged)).astype(np.float64)
    table = pa.table({
        "row_id": pa.array(row_id),
        "features": pa.ListArray.from_arrays(pa.array(X.indptr), pa.array(X.indices)),
        "action": pa.array(action.astype(np.int32)),
        "reward": pa.array(reward),
        "propensity": pa.array(propensity),
        "expected_reward": pa.ListArray.from_arrays(pa.array(np.arange(0, n * k + 1, k, dtype=np.int32)),
                                                    pa.array(expected.ravel())),
    })
    if hide_propensity:
        table = table.drop_columns(["propensity"])
    return with_log_metadata(table, world.n_features, k), Calibration.of(X, expected, probs, action, reward, propensity)


def _write_part(fs, root: str, seed: int, n_features: int, n_actions: int, path: str,
                first: int, n: int, settings: WorldSettings = WorldSettings(), hide_propensity: bool = False
                ) -> Calibration:
    world = make_world(seed, n_features, n_actions, settings)
    table, calibration = generate_rows(world, seed, first, n, hide_propensity)
    with atomic_open(fs, posixpath.join(root, path), "wb") as f:
        # no dictionary pages: ids over 2^18 values and float rewards do not repeat enough to pay for them
        pq.write_table(table, f, compression="zstd", use_dictionary=["action"])
    return calibration


# -- a whole log ------------------------------------------------------------------------
def part_paths(rows: int, days: int | None, rows_per_part: int) -> list[tuple[str, int, int]]:
    """(relative path, first row id, rows) of every part: ``date=YYYY-MM-DD/part-NNNNN.parquet`` with days.

    The rows are numbered 0 … rows − 1 in order; with ``days`` they are split into that
    many near-equal consecutive days from 2026-11-01, each day into parts of at most
    ``rows_per_part`` rows.
    """
    out = []
    day_bounds = np.linspace(0, rows, (days or 1) + 1).astype(np.int64)
    for day in range(days or 1):
        first, last = int(day_bounds[day]), int(day_bounds[day + 1])
        n_parts = max(1, -(-(last - first) // rows_per_part))
        bounds = np.linspace(first, last, n_parts + 1).astype(np.int64)
        folder = f"date={FIRST_DATE + datetime.timedelta(days=day)}/" if days else ""
        out += [(f"{folder}part-{j:05d}.parquet", int(bounds[j]), int(bounds[j + 1] - bounds[j]))
                for j in range(n_parts)]
    return out


def generate_bandit(url: str, *, rows: int, features: int, actions: int, seed: int = 0, days: int | None = None,
                    rows_per_part: int = 500_000, overwrite: bool = False, storage_options: dict | None = None,
                    client=None, progress: bool = False, hide_propensity: bool = False,
                    uniform_share: float | None = None, click_rate: float | None = None) -> dict:
    """Write a generated log to ``url`` in parallel (one Dask task per part); return its manifest.

    The manifest (also written as ``_manifest.json``, last) holds the options, the world's
    settings and the calibration figures (:meth:`Calibration.summary`). A non-empty ``url`` is
    refused unless ``overwrite``, which replaces only a folder dr-scale wrote
    (:func:`dr_scale.io.outputs.prepare_output_folder`). ``hide_propensity`` leaves the ``propensity`` column
    out; ``uniform_share`` is the logging policy's uniform share ε in [0, 0.5] (default min(0.5, 0.001 k));
    ``click_rate`` P ∈ (0, 0.5] makes rewards rare clicks: the action offsets' mean is logit(P) − :data:`CLICK_SHIFT`
    instead of −1.5, so that the mean reward is near P (printed; docs/generate-bandit.md).
    """
    check(PositiveInt, "rows", rows)
    check(PositiveInt, "rows_per_part", rows_per_part)
    if days is not None and not 1 <= days <= rows:
        raise ParameterError(f"`days` must be between 1 and `rows` ({rows}), got {days}")
    settings = WorldSettings()
    if uniform_share is not None:
        from dr_scale.io.config import UniformShare

        settings = WorldSettings(min_propensity=check(UniformShare, "uniform_share", uniform_share) / actions)
    if click_rate is not None:
        from dataclasses import replace

        from dr_scale.io.config import ClickRate

        rate = check(ClickRate, "click_rate", click_rate)
        settings = replace(settings, base=float(np.log(rate) - np.log1p(-rate)) - CLICK_SHIFT)
    make_world(seed, features, actions, settings)  # bad sizes or seed fail here, before anything is written
    fs, root = url_to_fs(url, storage_options)
    prepare_output_folder(url, fs, root, overwrite=overwrite, writer="dr_scale.synthetic.bandit")
    tasks = [dask.delayed(_write_part, pure=True)(fs, root, seed, features, actions, path, first, n,  # fs: no secrets
                                                  settings, hide_propensity)
             for path, first, n in part_paths(rows, days, rows_per_part)]
    with incomplete_on_interrupt(url):
        parts = compute(*tasks, client=client, progress=progress)
    calibration = sum(parts[1:], parts[0])
    manifest = {"generator": "dr_scale.synthetic.bandit", "version": GENERATOR_VERSION, "rows": rows,
                "features": features, "actions": actions, "seed": seed, "days": days,
                "rows_per_part": rows_per_part, "parts": len(tasks), "settings": asdict(settings),
                "hide_propensity": hide_propensity, "calibration": calibration.summary()}
    publish_folder(fs, root, json.dumps(manifest, indent=2))
    return manifest


def calibration_lines(summary: dict) -> list[str]:
    """The calibration figures as the lines ``dr-scale generate bandit`` prints."""
    lo, hi = summary["min_propensity"], summary["max_propensity"]
    values = summary["constant_values"]
    return [
        f"rows                      {summary['rows']:,}",
        f"mean active features      {summary['mean_active_features']:.2f}",
        f"mean reward               {summary['mean_reward']:.6f}",
        f"propensity range          [{lo:.6g}, {hi:.6g}]   (max IPS weight {summary['max_weight']:.4g})",
        f"logged action shares      {' '.join(f'{s:.3f}' for s in summary['logged_action_shares'])}",
        f"true value, logging       {summary['logging_value']:.6f}",
        *(f"true value, constant:{a:<4} {v:.6f}" for a, v in enumerate(values)),
        f"best constant policy      constant:{summary['best_constant_action']} ({summary['best_constant_value']:.6f})",
        f"true value, oracle        {summary['oracle_value']:.6f}   (argmax_a E[r | x, a] per row)",
    ]


def read_manifest(url: str, storage_options: dict | None = None) -> dict:
    """The manifest of a complete generated log at ``url``."""
    fs, root = url_to_fs(url, storage_options)
    with fs.open(posixpath.join(root, MANIFEST), "r") as f:
        return json.load(f)
