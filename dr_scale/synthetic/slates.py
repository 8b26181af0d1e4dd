"""A slate world with known truth (``dr-scale generate slates``; docs/generate-bandit.md, "Slates").

Impression i comes from one of U user types u_i (uniform; the log's features are the one-hot [u_i]) and shows K
items from a catalogue of I in slots 0 … K−1. Clicks follow a cascade with position bias and an interaction of
strength γ ∈ [0, 1]:

    c_k = θ_k · α(u, a_k),    θ_k = (k + 1)^(−η)    (the click probability at slot k of a user still browsing)

the user scans from the top; a click at slot k ends the browsing with probability γ. So

    E[R | u, s] = Σ_k c_k Π_{j<k} (1 − γ c_j),

γ = 0 is an additive (independent-slot) reward, γ = 1 the classic cascade (no click after the first): a click at
slot k lowers every later slot's click probability by the factor (1 − γ c_k). α(u, a) = expit(b + 1.5 z_u·v_a)
with z, v ~ N(0, I/4) in 4 dimensions and b set so that the mean α is about 0.15.

The logging policy draws each slot independently from softmax(β₀ ŝ(u, ·)), ŝ = logit α + noise of sd 1, β₀ = 0.5
(:class:`~dr_scale.policies.slates.FactoredSlatePolicy`; the log's ``propensity`` is its per-slot probability,
and its slate and prefix probabilities are their products). The target policies (:meth:`SlateWorld.policies`):
``factored`` (the same model at β = 1), ``plackett-luce`` (Plackett–Luce of softmax(ŝ)) and ``top-k`` (top-K of ŝ).

True values V(π) = E_u E_{s∼π(u)} E[R | u, s]: exact for the factored policies (slots independent:
Σ_k m_k Π_{j<k} (1 − γ m_j), m_k = E_π[c_k]) and the top-K one; for Plackett–Luce exact by enumerating the ordered
prefixes when there are at most ``ENUMERATION_LIMIT`` of them per user, else a keyed Monte Carlo with its standard
error. Every draw is keyed by (seed, purpose, impression id, slot) (:mod:`dr_scale.core.keyed_random`), so a log is
a function of the options alone, whatever the part size.
"""

from __future__ import annotations

import functools
import json
import math
import posixpath
from dataclasses import dataclass, field

import dask
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from scipy.special import expit, logit

from dr_scale.core import keyed_random
from dr_scale.core.errors import ParameterError
from dr_scale.io.atomic import atomic_open, incomplete_on_interrupt, url_to_fs
from dr_scale.io.outputs import prepare_output_folder, publish_folder
from dr_scale.logs.writing import with_log_metadata
from dr_scale.outofcore.compute import compute
from dr_scale.policies.slates import (
    FactoredSlatePolicy,
    PlackettLuceSlatePolicy,
    SlatePolicy,
    TopKSlatePolicy,
    save_slate_policy,
)

#: The most ordered prefixes of K items per user that the Plackett–Luce truth enumerates (else Monte Carlo).
ENUMERATION_LIMIT = 2_000_000
#: Monte Carlo slates per user for a truth not enumerated.
MONTE_CARLO_SLATES = 20_000


@dataclass(frozen=True)
class SlateWorld:
    """The world of (users, items, slots, η, γ, seed); its parameters from ``default_rng([seed, 0x51A7E])``."""

    users: int = 10
    items: int = 100
    slots: int = 3
    position_bias: float = 1.0  # η
    interaction: float = 0.5  # γ
    seed: int = 0
    attraction: np.ndarray = field(init=False, repr=False, compare=False)  # α, (U, I)
    model: np.ndarray = field(init=False, repr=False, compare=False)  # ŝ, (U, I)

    def __post_init__(self) -> None:
        for name in ("users", "items", "slots"):
            if int(getattr(self, name)) < 1:
                raise ParameterError(f"`{name}` must be a positive integer, got {getattr(self, name)}")
        if self.slots > self.items:
            raise ParameterError(f"`slots` ({self.slots}) must not exceed `items` ({self.items})")
        if not 0 <= self.interaction <= 1:
            raise ParameterError(f"`interaction` γ must be in [0, 1], got {self.interaction}")
        if not 0 <= self.position_bias <= 10:
            raise ParameterError(f"`position_bias` η must be in [0, 10], got {self.position_bias}")
        rng = np.random.default_rng([self.seed, 0x51A7E])
        z, v = rng.normal(0, 0.5, (self.users, 4)), rng.normal(0, 0.5, (self.items, 4))
        attraction = expit(logit(0.15) + 1.5 * z @ v.T)
        object.__setattr__(self, "attraction", attraction)
        object.__setattr__(self, "model", logit(attraction) + rng.normal(0, 1, attraction.shape))

    @property
    def theta(self) -> np.ndarray:
        """θ_k = (k + 1)^(−η), the position bias."""
        out: np.ndarray = (np.arange(self.slots) + 1.0) ** -self.position_bias
        return out

    @functools.cached_property
    def logging(self) -> FactoredSlatePolicy:
        """μ: each slot from softmax(0.5 ŝ(u, ·))."""
        return FactoredSlatePolicy(0.5 * self.model, self.slots)

    def policies(self) -> dict[str, SlatePolicy]:
        """The logging policy and the target policies, by name."""
        return {"logging": self.logging, "factored": FactoredSlatePolicy(self.model, self.slots),
                "plackett-luce": PlackettLuceSlatePolicy(self.model, self.slots),
                "top-k": TopKSlatePolicy(self.model, self.slots)}

    def expected_reward(self, users: np.ndarray, slates: np.ndarray) -> np.ndarray:
        """E[R | u, s] = Σ_k c_k Π_{j<k} (1 − γ c_j) for each (u_i, s_i)."""
        c = self.theta * self.attraction[users[:, None], slates]
        survive = np.cumprod(1 - self.interaction * c, axis=1)
        out: np.ndarray = (c * np.concatenate([np.ones((c.shape[0], 1)), survive[:, :-1]], axis=1)).sum(axis=1)
        return out

    # -- truth ------------------------------------------------------------------------
    def truth(self, policy: SlatePolicy) -> tuple[float, float]:
        """(V(π), its standard error): 0 when exact."""
        users = np.arange(self.users)
        if isinstance(policy, FactoredSlatePolicy):
            m = (policy.table * self.attraction[:, None, :]).sum(axis=2) * self.theta  # E_π[c_k | u]
            survive = np.cumprod(1 - self.interaction * m, axis=1)
            before = np.concatenate([np.ones((self.users, 1)), survive[:, :-1]], axis=1)
            return float((m * before).sum(axis=1).mean()), 0.0
        if isinstance(policy, TopKSlatePolicy):
            return float(self.expected_reward(users, policy.top).mean()), 0.0
        if isinstance(policy, PlackettLuceSlatePolicy):
            if math.perm(self.items, self.slots) <= ENUMERATION_LIMIT:
                return float(np.mean([self._enumerated(policy, u) for u in range(self.users)])), 0.0
            return self._monte_carlo(policy)
        raise ParameterError(f"no truth for a {type(policy).__name__}")

    def _enumerated(self, policy: PlackettLuceSlatePolicy, user: int) -> float:
        """E_{s∼π(u)} E[R | u, s] summed over every ordered prefix, slot by slot."""
        e = np.exp(policy.scores[user] / policy.temperature - (policy.scores[user] / policy.temperature).max())
        c_all = self.attraction[user]
        prefix = np.zeros((1, 0), dtype=np.int64)
        prob, survive, value, used = np.ones(1), np.ones(1), np.zeros(1), np.zeros(1)
        for k in range(self.slots):
            cond = e[None, :] / (e.sum() - used)[:, None]
            if k:
                cond[np.arange(prefix.shape[0])[:, None], prefix] = 0.0
            c = self.theta[k] * c_all
            prob = (prob[:, None] * cond).ravel()
            value = (value[:, None] + survive[:, None] * c[None, :]).ravel()
            survive = (survive[:, None] * (1 - self.interaction * c)[None, :]).ravel()
            used = (used[:, None] + e[None, :]).ravel()
            prefix = np.concatenate([np.repeat(prefix, self.items, axis=0),
                                     np.tile(np.arange(self.items), prefix.shape[0])[:, None]], axis=1)
            keep = prob > 0
            prefix, prob, survive, value, used = prefix[keep], prob[keep], survive[keep], value[keep], used[keep]
        return float(prob @ value)

    def _monte_carlo(self, policy: SlatePolicy, per_user: int = MONTE_CARLO_SLATES) -> tuple[float, float]:
        """The mean of E[R | u, s] over ``per_user`` slates drawn per user (seeded), and its standard error."""
        rng = np.random.default_rng([self.seed, 0x7A0E])
        means, variances = [], []
        for u in range(self.users):
            users = np.full(per_user, u)
            v = self.expected_reward(users, policy.sample(users, rng))
            means.append(v.mean())
            variances.append(v.var(ddof=1) / v.size)
        return float(np.mean(means)), float(math.sqrt(np.sum(variances)) / self.users)

    # -- logs -------------------------------------------------------------------------
    @functools.cached_property
    def _logging_cdf(self) -> np.ndarray:
        """The logging policy's per-slot cumulative probabilities, (U, K, I)."""
        out: np.ndarray = np.cumsum(self.logging.table, axis=2)
        return out

    def sample(self, first: int, n: int) -> dict[str, np.ndarray]:
        """Impressions ``first … first + n − 1``: users (n,), slates (n, K), clicks (n, K), the logging policy's
        per-slot probabilities (n, K). Keyed by (seed, purpose, impression, slot)."""
        seed = self.seed
        impression = np.arange(first, first + n, dtype=np.int64)
        users = np.minimum((keyed_random.uniform(impression, seed, "slate-user") * self.users).astype(np.int64),
                           self.users - 1)
        cdf = self._logging_cdf
        slates = np.empty((n, self.slots), dtype=np.int64)
        for k in range(self.slots):
            u = keyed_random.uniform(impression, seed, "slate-item", k)
            for user in np.unique(users):
                rows = users == user
                slates[rows, k] = np.searchsorted(cdf[user, k], u[rows], side="right")
        slates = np.minimum(slates, self.items - 1)
        c = self.theta * self.attraction[users[:, None], slates]
        clicks = np.zeros((n, self.slots))
        browsing = np.ones(n, dtype=bool)
        for k in range(self.slots):
            clicks[:, k] = browsing & (keyed_random.uniform(impression, seed, "slate-click", k) < c[:, k])
            leaves = (clicks[:, k] > 0) & (keyed_random.uniform(impression, seed, "slate-leave", k) < self.interaction)
            browsing &= ~leaves
        return {"impression": impression, "users": users, "slates": slates, "clicks": clicks,
                "propensity": self.logging.probabilities(slates, users).marginal}  # type: ignore[dict-item]


def slate_table(world: SlateWorld, first: int, n: int) -> pa.Table:
    """Impressions ``first … first + n − 1`` as a slate log: one row per slot (row_id = impression·K + slot)."""
    draw = world.sample(first, n)
    k = world.slots
    rows = n * k
    table = pa.table({
        "row_id": pa.array(draw["impression"].repeat(k) * k + np.tile(np.arange(k), n)),
        "features": pa.ListArray.from_arrays(pa.array(np.arange(rows + 1, dtype=np.int32)),
                                             pa.array(draw["users"].repeat(k).astype(np.int32))),
        "action": pa.array(draw["slates"].ravel().astype(np.int32)),
        "reward": pa.array(draw["clicks"].ravel()),
        "propensity": pa.array(draw["propensity"].ravel()),
        "slot": pa.array(np.tile(np.arange(k, dtype=np.int32), n)),
        "impression": pa.array(draw["impression"].repeat(k)),
    })
    return with_log_metadata(table, world.users, world.items)


def _write_part(fs, path: str, world: SlateWorld, start: int, n: int) -> None:
    """Impressions ``start`` … ``start + n − 1`` of ``world`` (:func:`slate_table`), written atomically to ``path``."""
    with atomic_open(fs, path, "wb") as f:
        pq.write_table(slate_table(world, start, n), f, compression="zstd")


def generate_slates(url: str, world: SlateWorld, *, impressions: int, impressions_per_part: int = 50_000,
                    overwrite: bool = False, storage_options: dict | None = None, client: object = None,
                    progress: bool = False) -> dict:
    """Write a slate log of ``impressions`` impressions from ``world`` to ``url`` (an impression's rows in one part,
    the parts written in parallel on ``client``'s workers, else locally) and return its manifest (also
    ``_manifest.json``), with the true values of the logging and target policies; each policy is written as
    ``_policy_NAME.npz`` beside the parts (``--policy slate:URL/_policy_NAME.npz``)."""
    if impressions < 1 or impressions_per_part < 1:
        raise ParameterError("`impressions` and `impressions_per_part` must be positive integers")
    fs, root = url_to_fs(url, storage_options)
    prepare_output_folder(url, fs, root, overwrite=overwrite, writer="dr_scale.synthetic.slates")
    bounds = np.linspace(0, impressions, -(-impressions // impressions_per_part) + 1).astype(np.int64)
    tasks = [dask.delayed(_write_part, pure=True)(fs, posixpath.join(root, f"part-{j:05d}.parquet"), world,
                                                  int(bounds[j]), int(bounds[j + 1] - bounds[j]))
             for j in range(bounds.size - 1)]
    with incomplete_on_interrupt(url):
        compute(*tasks, client=client, progress=progress)
    truths = {}
    for name, policy in world.policies().items():
        save_slate_policy(policy, posixpath.join(url, f"_policy_{name}.npz"), storage_options)
        truths[name] = world.truth(policy)
    manifest = {"generator": "dr_scale.synthetic.slates", "impressions": impressions,
                "parts": bounds.size - 1,
                "world": {"users": world.users, "items": world.items, "slots": world.slots,
                          "position_bias": world.position_bias, "interaction": world.interaction,
                          "seed": world.seed},
                "truth": {name: {"value": v, "stderr": se} for name, (v, se) in truths.items()}}
    publish_folder(fs, root, json.dumps(manifest, indent=2))
    return manifest
