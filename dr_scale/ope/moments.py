"""Mergeable first and second moments of a vector of per-row quantities.

A :class:`Moments` state holds, for m per-row quantities z_i ∈ R^m,

    n,    mean = (1/n) Σ z_i,    comoment = Σ (z_i − mean)(z_i − mean)ᵀ

and merges two states with Chan, Golub & LeVeque's parallel update

    n = n_a + n_b,   δ = mean_b − mean_a,
    mean = mean_a + δ n_b / n,
    comoment = comoment_a + comoment_b + δ δᵀ n_a n_b / n,

which is associative and commutative (up to float rounding) and numerically
stable, unlike raw sums of squares. A state may also carry the range (elementwise
minimum and maximum) of some bounded per-row quantities, which merges exactly; the
empirical-likelihood intervals of :mod:`dr_scale.ope.intervals` need it. This is the statistic every estimator in
:mod:`dr_scale.ope.estimators` reduces to; river's ``stats.Var`` is the same idea for
one variable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Moments:
    """Count, mean vector and co-moment matrix of m per-row quantities; ranges of b others."""

    n: int
    mean: np.ndarray
    comoment: np.ndarray
    low: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (b,) minima of the bounded quantities
    high: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (b,) maxima

    @classmethod
    def empty(cls, m: int, b: int = 0) -> Moments:
        """The state of no rows of m quantities (and b ranges): the identity of ``+``."""
        return cls(0, np.zeros(m), np.zeros((m, m)), np.full(b, np.inf), np.full(b, -np.inf))

    @classmethod
    def of(cls, *columns: np.ndarray, ranges: tuple[np.ndarray, np.ndarray] | None = None) -> Moments:
        """State of the rows of ``columns`` (each of shape (n,)); ``ranges`` = (minima, maxima) of b others."""
        z = np.stack([np.asarray(c, dtype=np.float64) for c in columns])  # (m, n): each quantity contiguous
        n = z.shape[1]
        low, high = ranges if ranges is not None else (np.zeros(0), np.zeros(0))
        if n == 0:
            return cls.empty(z.shape[0], low.size)
        with np.errstate(over="ignore", invalid="ignore"):  # overflow shows as non-finite sums; callers check
            mean = z.mean(axis=1)  # along contiguous rows (not a strided axis-0 mean of an (n, m) stack), pairwise
            z -= mean[:, None]  # centred in place: the stack is this call's own copy (a second (m, n) array costs
            return cls(n, mean, z @ z.T, low, high)  # as much again, most of it the fresh pages' faults)

    @property
    def m(self) -> int:
        """m, the quantities whose moments the state holds."""
        return self.mean.shape[0]

    def __add__(self, other: Moments) -> Moments:
        if not isinstance(other, Moments):
            return NotImplemented
        if self.m != other.m:
            raise ValueError(f"cannot merge moments of {self.m} and {other.m} quantities")
        if other.n == 0:
            return self
        if self.n == 0:
            return other
        n = self.n + other.n
        with np.errstate(over="ignore", invalid="ignore"):  # as in ``of``
            delta = other.mean - self.mean
            mean = self.mean + delta * (other.n / n)
            comoment = self.comoment + other.comoment + np.outer(delta, delta) * (self.n * other.n / n)
        return Moments(n, mean, comoment, np.minimum(self.low, other.low), np.maximum(self.high, other.high))

    def take(self, index) -> Moments:
        """The state of the quantities ``index`` alone (a marginal: exact, no rounding)."""
        index = np.asarray(index)
        return Moments(self.n, self.mean[index], self.comoment[np.ix_(index, index)], self.low, self.high)

    def covariance(self) -> np.ndarray:
        """Sample covariance (denominator n − 1) of the quantities."""
        if self.n < 2:
            return np.full((self.m, self.m), np.nan)
        return self.comoment / (self.n - 1)

    def to_dict(self) -> dict:
        """The state as a JSON-ready dict."""
        return {"n": int(self.n), "mean": self.mean.tolist(), "comoment": self.comoment.tolist(),
                "low": self.low.tolist(), "high": self.high.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> Moments:
        """The state of ``d`` (``from_dict(s.to_dict())`` equals ``s``)."""
        mean = np.asarray(d["mean"], dtype=np.float64)
        comoment = np.asarray(d["comoment"], dtype=np.float64).reshape(mean.size, mean.size)
        return cls(int(d["n"]), mean, comoment, np.asarray(d["low"], dtype=np.float64),
                   np.asarray(d["high"], dtype=np.float64))
