"""A bandit world with many actions described by features: items in categories, and known truth.

``dr-scale generate bandit --actions 10000 --action-features D_A --embedding-categories L``
(docs/large-action-spaces.md). The contexts are those of :mod:`dr_scale.synthetic.bandit` (d sparse
binary features in 40 fields). The world's parameters, drawn from ``default_rng([seed, 0x17E3A])``:

* a projection P (d, D_A) of the context to a latent z(x) = x·P, entries N(0, 1/30) (about 30
  features are active per row, so z's entries are ≈ N(0, 1));
* L category centroids g_c ∈ R^{D_A}, N(0, I); each action a has the category (its embedding)
  e(a) ∈ {0 … L−1} (a balanced random assignment, k ≥ L) and the features f_a = g_{e(a)} + 0.5 ξ_a,
  ξ_a ~ N(0, I) — the *catalogue*, written to ``_actions.parquet`` (:class:`~dr_scale.logs.catalogue.Catalogue`);
* the reward r ~ Bernoulli(q(x, a)), q(x, a) = σ(b + γ z(x)·g_{e(a)} / √D_A), b = −1, γ = 1.5: the
  reward depends on the item through its category only (MIPS's no-direct-effect assumption, Saito &
  Joachims 2022), so the categories carry all the item's effect;
* the logging policy picks a category, then an item in it: π₀(a|x) = π₀(e(a)|x) · ν(a | e(a)), with
  π₀(e|x) = (1 − ε) softmax_e(τ₀ ℓ_e(x)) + ε / L, ℓ_e(x) = (ρ z·g_e + √(1 − ρ²) z·h_e) / √D_A
  (h_e ~ N(0, I), ρ = 0.3, τ₀ = 1, ε = 0.1), and ν(a|e) ∝ exp(c_a), c_a ~ N(0, 1) (popularity within
  the category). The log's ``propensity`` is π₀(a_i|x_i) and its ``embedding_propensity`` is
  p_π₀(e(a_i)|x_i) = π₀(e(a_i)|x_i), the denominator of MIPS's weight — one float per row, where the
  logging policy's whole distribution over k actions would be k;
* the target policy: the item scorer (:class:`~dr_scale.policies.ItemScorerPolicy`)
  s(x, a) = 2 z(x)·f_a (coef = 2P), the top K = ``target_top_k`` items with softmax probabilities
  at temperature 1. It is written as ``_target_policy.npz`` (spec ``scorer:LOG/_target_policy.npz``)
  and its decisions as the column ``target_topk`` (list<struct<action, prob>>, spec ``sparse:target_topk``).

Every part carries ``target_expected_reward`` = Σ_a π(a|x_i) q(x_i, a), the truth of the target
policy on that row (for 10^4 actions, the truth of the policy compared, not a k-list), so
V(π) on the rows is its mean. Per-row draws are keyed by (seed, purpose, row_id): a log is a
function of (seed, d, k, D_A, L, K, row ids), identical for any part size or worker count. Memory
per part is O(n·(L + K) + chunk·k).
"""

from __future__ import annotations

import functools
import json
import posixpath
from dataclasses import asdict, dataclass

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
from dr_scale.logs.catalogue import CATALOGUE_FILE, Catalogue
from dr_scale.logs.contract import Partition
from dr_scale.logs.writing import with_log_metadata
from dr_scale.outofcore.compute import compute
from dr_scale.policies import ItemScorerPolicy
from dr_scale.policies.columns import sparse_target_column
from dr_scale.synthetic.bandit import make_world, part_paths

GENERATOR_VERSION = 1
TARGET_POLICY_FILE = "_target_policy.npz"
MAX_ACTIONS = 1_000_000


@dataclass(frozen=True)
class ItemSettings:
    """The item world's fixed constants (the module docstring explains each)."""

    projection_sd: float = 30 ** -0.5
    feature_noise: float = 0.5  # sd of f_a around its category's centroid
    base: float = -1.0  # b
    effect: float = 1.5  # γ
    logging_correlation: float = 0.3  # ρ
    logging_temperature: float = 1.0  # τ₀
    logging_epsilon: float = 0.1  # ε
    popularity_sd: float = 1.0  # sd of c_a
    target_scale: float = 2.0  # the target scorer's coef = scale · P
    target_temperature: float = 1.0


@dataclass
class ItemWorld:
    """The parameters of one item world (the module docstring)."""

    n_features: int
    projection: np.ndarray  # (d, D_A) P
    centroids: np.ndarray  # (L, D_A) g
    logging_directions: np.ndarray  # (L, D_A) h
    embedding: np.ndarray  # (k,) e(a)
    item_features: np.ndarray  # (k, D_A) f_a
    within: np.ndarray  # (k,) ν(a | e(a))
    target_top_k: int
    settings: ItemSettings

    @property
    def n_actions(self) -> int:
        """The number of items k."""
        return self.embedding.size

    @property
    def n_categories(self) -> int:
        """The number of categories L (the embedding's values)."""
        return self.centroids.shape[0]

    @functools.cached_property
    def _sampler(self) -> tuple[np.ndarray, np.ndarray]:
        """(actions sorted by category, e(a) + cumulative ν within the category): the inverse CDF of every ν(·|e)."""
        order = np.lexsort((np.arange(self.n_actions), self.embedding))
        cum = np.cumsum(self.within[order])
        starts = np.searchsorted(self.embedding[order], np.arange(self.n_categories))
        before = np.concatenate([[0.0], cum])[starts]  # Σ ν of earlier categories (each category sums to 1)
        cat = self.embedding[order]
        within_cum = cum - before[cat]
        last = np.r_[cat[1:] != cat[:-1], True]
        within_cum[last] = 1.0
        return order, cat + within_cum

    def latent(self, X: sp.csr_matrix) -> np.ndarray:
        """The contexts' latent vectors z = X·P (n, D_A)."""
        return np.asarray(X @ self.projection)

    def category_rewards(self, z: np.ndarray) -> np.ndarray:
        """q per category, (n, L): q(x, a) = q_{e(a)}(x)."""
        s = self.settings
        score = s.base + s.effect * (z @ self.centroids.T) / np.sqrt(z.shape[1])
        return 1.0 / (1.0 + np.exp(-score))

    def category_logging(self, z: np.ndarray) -> np.ndarray:
        """π₀(e|x), (n, L)."""
        s = self.settings
        rho = s.logging_correlation
        logit = s.logging_temperature * (rho * z @ self.centroids.T + np.sqrt(1 - rho * rho)
                                         * z @ self.logging_directions.T) / np.sqrt(z.shape[1])
        logit -= logit.max(axis=1, keepdims=True)
        p = np.exp(logit)
        p *= (1 - s.logging_epsilon) / p.sum(axis=1, keepdims=True)
        p += s.logging_epsilon / self.n_categories
        return p

    def target_policy(self) -> ItemScorerPolicy:
        """The target policy: the top K items by s(x, a) = scale · x·P·f_a, softmax probabilities at the world's
        temperature."""
        s = self.settings
        return ItemScorerPolicy(s.target_scale * self.projection, self.item_features, None, self.target_top_k,
                                s.target_temperature, source=TARGET_POLICY_FILE, chunk=512)

    def catalogue(self) -> Catalogue:
        """The world's action catalogue: each item's features f_a and its category e(a)."""
        return Catalogue(sp.csr_matrix(self.item_features), self.embedding, CATALOGUE_FILE)


@dataclass(frozen=True, eq=False)
class CategoryValues:
    """:class:`~dr_scale.policies.distributions.ActionValues` of the item world: v(x_i, a) = q(x_i, e(a)), the
    reward of action a's category e(a), from the (n, categories) rewards q and the actions' (k,) categories e."""

    q: np.ndarray
    embedding: np.ndarray

    @property
    def k(self) -> int:
        """The number of actions k."""
        return int(self.embedding.shape[0])

    def columns(self, actions: np.ndarray) -> np.ndarray:
        """q(x_i, e(a)) for the (m,) ``actions``, (n, m)."""
        return self.q[:, self.embedding[actions]]

    def pairs(self, actions: np.ndarray) -> np.ndarray:
        """q(x_i, e(a_ij)) for each row's own (n, K) ``actions``, (n, K)."""
        return np.take_along_axis(self.q, self.embedding[actions], axis=1)

    def mean(self) -> np.ndarray:
        """(1/k) Σ_a q(x_i, e(a)), (n,)."""
        return self.q[:, self.embedding].mean(axis=1)


@functools.lru_cache(maxsize=2)
def make_item_world(seed: int, n_features: int, n_actions: int, action_features: int, categories: int,
                    target_top_k: int = 10, settings: ItemSettings = ItemSettings()) -> ItemWorld:
    """The item world of (seed, d, k, D_A, L, K), from ``default_rng([seed, 0x17E3A])`` (cached per process)."""
    check(NonNegativeInt, "seed", seed)
    for name, value in (("action_features", action_features), ("embedding_categories", categories),
                        ("target_top_k", target_top_k)):
        check(PositiveInt, name, value)
    if not 2 <= n_actions <= MAX_ACTIONS:
        raise ParameterError(f"`actions` must be in [2, {MAX_ACTIONS}], got {n_actions}")
    if categories > n_actions:
        raise ParameterError(f"`embedding_categories` must be at most `actions` ({n_actions}), got {categories}")
    make_world(seed, n_features, 2)  # the contexts' world: checks d
    s = settings
    rng = np.random.default_rng([seed, 0x17E3A])
    projection = rng.normal(0.0, s.projection_sd, (n_features, action_features))
    centroids = rng.standard_normal((categories, action_features))
    directions = rng.standard_normal((categories, action_features))
    embedding = rng.permutation(n_actions) % categories
    item_features = centroids[embedding] + s.feature_noise * rng.standard_normal((n_actions, action_features))
    popularity = np.exp(rng.normal(0.0, s.popularity_sd, n_actions))
    within = popularity / np.bincount(embedding, weights=popularity, minlength=categories)[embedding]
    return ItemWorld(n_features, projection, centroids, directions, embedding, item_features, within,
                     target_top_k, s)


@dataclass
class ItemCalibration:
    """Mergeable sums: the log's calibration figures."""

    rows: int
    reward_sum: float
    target_value_sum: float  # Σ_i Σ_a π(a|x_i) q(x_i, a)
    logging_value_sum: float  # Σ_i Σ_e π₀(e|x_i) q_e(x_i)
    min_propensity: float
    matched: int  # rows whose logged action the target lists

    def __add__(self, other: ItemCalibration) -> ItemCalibration:
        return ItemCalibration(self.rows + other.rows, self.reward_sum + other.reward_sum,
                               self.target_value_sum + other.target_value_sum,
                               self.logging_value_sum + other.logging_value_sum,
                               min(self.min_propensity, other.min_propensity), self.matched + other.matched)

    def summary(self) -> dict:
        """The calibration as means per row: reward, V(π), V(π₀), the propensities' minimum and the largest weight
        1/min p."""
        n = self.rows
        return {"rows": n, "mean_reward": self.reward_sum / n, "target_value": self.target_value_sum / n,
                "logging_value": self.logging_value_sum / n, "min_propensity": self.min_propensity,
                "max_weight": 1.0 / self.min_propensity, "target_matched_rows": self.matched}


def generate_item_rows(world: ItemWorld, seed: int, first: int, n: int) -> tuple[pa.Table, ItemCalibration]:
    """Rows ``first … first + n − 1`` as a logged table (with the target's lists and truth) and their sums."""
    row_id = np.arange(first, first + n, dtype=np.int64)
    X = make_world(seed, world.n_features, 2).contexts(first, n, seed)
    z = world.latent(X)
    q = world.category_rewards(z)
    p_cat = world.category_logging(z)
    category = keyed_random.categorical(p_cat, row_id, seed, "item-category")
    order, cdf = world._sampler
    u = np.maximum(keyed_random.uniform(row_id, seed, "item-action"), 1e-12)
    action = order[np.minimum(np.searchsorted(cdf, category + u, side="left"), world.n_actions - 1)]
    p_e = p_cat[np.arange(n), category]
    propensity = p_e * world.within[action]
    reward = (keyed_random.uniform(row_id, seed, "item-reward") < q[np.arange(n), category]).astype(np.float64)
    part = Partition("<generator>", row_id, X, action, reward, propensity, pa.table({}))
    target = world.target_policy().distribution(part, world.n_actions)
    truth = target.value(CategoryValues(q, world.embedding))  # Σ_a π(a | x_i) q(x_i, e(a))
    table = pa.table({
        "row_id": pa.array(row_id),
        "features": pa.ListArray.from_arrays(pa.array(X.indptr.astype(np.int32)), pa.array(X.indices)),
        "action": pa.array(action.astype(np.int32)),
        "reward": pa.array(reward),
        "propensity": pa.array(propensity),
        "embedding_propensity": pa.array(p_e),
        "target_topk": sparse_target_column(target.actions, target.probs),
        "target_expected_reward": pa.array(truth),
    })
    matched = int((target.at(action) > 0).sum())
    calibration = ItemCalibration(n, float(reward.sum()), float(truth.sum()), float((p_cat * q).sum()),
                                  float(propensity.min()), matched)
    return with_log_metadata(table, world.n_features, world.n_actions), calibration


def _write_part(fs, root, seed, sizes, path, first, n) -> ItemCalibration:
    world = make_item_world(seed, *sizes)
    table, calibration = generate_item_rows(world, seed, first, n)
    with atomic_open(fs, posixpath.join(root, path), "wb") as f:
        pq.write_table(table, f, compression="zstd", use_dictionary=["action"])
    return calibration


def generate_item_bandit(url: str, *, rows: int, features: int, actions: int, action_features: int,
                         embedding_categories: int = 20, target_top_k: int = 10, seed: int = 0,
                         days: int | None = None, rows_per_part: int = 100_000, overwrite: bool = False,
                         storage_options: dict | None = None, client=None, progress: bool = False) -> dict:
    """Write a log of the item world to ``url`` (one Dask task per part), its catalogue and target policy.

    Parameters
    ----------
    url : str
        The output folder (any fsspec URL), new or empty (or ``overwrite``).
    rows, features, actions : int
        n, d and k.
    action_features : int
        D_A, the number of features per action.
    embedding_categories : int, default 20
        L, the number of categories e(a).
    target_top_k : int, default 10
        K, the number of actions the target policy lists per row.
    seed, days, rows_per_part, overwrite, storage_options, client, progress
        As :func:`dr_scale.synthetic.bandit.generate_bandit`'s.

    Returns
    -------
    dict
        The manifest (also ``_manifest.json``, written last): the options and the calibration figures.

    Examples
    --------
    >>> import tempfile
    >>> from dr_scale import Evaluation, evaluate_log
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     manifest = generate_item_bandit(folder, rows=4000, features=500, actions=1000, action_features=4,
    ...                                     embedding_categories=10, seed=1)
    ...     result = evaluate_log(folder, Evaluation("sparse:target_topk", ["IPS", "MIPS"]))
    >>> round(manifest["calibration"]["target_value"], 4)
    0.8498
    >>> {name: round(e.value, 3) for name, e in result.estimates.items()}
    {'IPS': 0.886, 'MIPS': 0.917}
    """
    check(PositiveInt, "rows", rows)
    check(PositiveInt, "rows_per_part", rows_per_part)
    if days is not None and not 1 <= days <= rows:
        raise ParameterError(f"`days` must be between 1 and `rows` ({rows}), got {days}")
    sizes = (features, actions, action_features, embedding_categories, target_top_k)
    world = make_item_world(seed, *sizes)
    fs, root = url_to_fs(url, storage_options)
    prepare_output_folder(url, fs, root, overwrite=overwrite, writer="dr_scale.synthetic.item_world")
    tasks = [dask.delayed(_write_part, pure=True)(fs, root, seed, sizes, path, first, n)
             for path, first, n in part_paths(rows, days, rows_per_part)]
    with incomplete_on_interrupt(url):
        parts = compute(*tasks, client=client, progress=progress)
        with atomic_open(fs, posixpath.join(root, CATALOGUE_FILE), "wb") as f:
            pq.write_table(world.catalogue().table(), f, compression="zstd")
        world.target_policy().save(posixpath.join(url.rstrip("/"), TARGET_POLICY_FILE), storage_options)
    calibration = sum(parts[1:], parts[0])
    manifest = {"generator": "dr_scale.synthetic.item_world", "version": GENERATOR_VERSION, "rows": rows,
                "features": features, "actions": actions, "action_features": action_features,
                "embedding_categories": embedding_categories, "target_top_k": target_top_k, "seed": seed,
                "days": days, "rows_per_part": rows_per_part, "parts": len(tasks),
                "settings": asdict(world.settings), "calibration": calibration.summary()}
    publish_folder(fs, root, json.dumps(manifest, indent=2))
    return manifest


def item_calibration_lines(summary: dict) -> list[str]:
    """The calibration figures as ``dr-scale generate bandit --action-features`` prints them."""
    return [
        f"rows                        {summary['rows']:,}",
        f"mean reward                 {summary['mean_reward']:.6f}",
        f"min propensity              {summary['min_propensity']:.6g}   (max IPS weight {summary['max_weight']:.4g})",
        f"true value, logging         {summary['logging_value']:.6f}",
        f"true value, target          {summary['target_value']:.6f}   (scorer:_target_policy.npz = "
        "sparse:target_topk)",
        f"rows the target lists       {summary['target_matched_rows']:,}   (the logged action among its top K)",
    ]
