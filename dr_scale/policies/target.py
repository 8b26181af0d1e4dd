"""Target policies π(a|x): what the estimators evaluate.

A policy gives its decisions on a :class:`~dr_scale.logs.contract.Partition` (``decisions``):
the (n,) actions of a deterministic policy, or the (n, k) action probabilities of a
stochastic one; ``probs`` gives the (n, k) matrix either way (one-hot rows for a
deterministic policy). Six kinds:

* ``constant:A`` — always action A (the paper's visits experiment uses π ≡ 1);
* ``column:NAME`` — the target action stored per row in an integer column;
* ``probs:NAME`` — the target probabilities stored per row in a list<float> column;
* ``callable:module:function`` — ``function(X, row_id)`` with X the partition's CSR
  features, returning (n,) actions or (n, k) probabilities;
* ``linear:POLICY.npz`` — a learned linear policy π(x) = argmax_a x·coef[:, a] + intercept[a]
  (ties to the lowest action), from the ``.npz`` file ``dr-scale learn`` writes (keys
  ``coef`` (d, k), ``intercept`` (k,) and ``metadata``, a JSON string);
* ``softmax:POLICY.npz:T`` — the same scores as a stochastic policy with temperature
  T > 0: π(a|x) = exp(s_a(x)/T) / Σ_b exp(s_b(x)/T).

The file of a linear or softmax policy may be any fsspec URL (credentials from the
environment); it is read when the spec is parsed, so a missing or malformed file is
an error before any log is read.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from dr_scale.io.atomic import atomic_write, url_to_fs
from dr_scale.core.errors import UserError
from dr_scale.logs.contract import (
    LogDataError,
    Partition,
    check_distributions,
    check_target_actions,
    first_list_length,
    target_actions,
    target_probabilities,
)
from dr_scale.io.parameter_files import ParameterFileError, checked_linear, read_linear_file


def parameters_digest(*arrays: np.ndarray) -> str:
    """sha256 of arrays' shapes and float64 bytes: what a fitted model or policy computes with."""
    h = hashlib.sha256()
    for array in arrays:
        a = np.ascontiguousarray(array, dtype=np.float64)
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def one_hot(actions: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros((actions.shape[0], k))
    out.reshape(-1)[np.arange(actions.shape[0]) * k + actions] = 1.0  # one scatter at flat positions, not out[i, a]
    return out


class PolicyMismatch(LogDataError):
    """The policy does not fit the log (its k actions or d features are not the log's): the policy's
    error, not the partition's — a report names the policy, not every partition."""


class Policy:
    """Base class. ``columns`` are extra log columns the policy reads."""

    columns: tuple[str, ...] = ()
    needs_features = False
    n_actions: int | None = None  # known from the policy itself, where it is

    def decisions(self, part: Partition, k: int) -> np.ndarray:
        """π's decisions on the partition's rows: (n,) actions if π is deterministic, else (n, k) probabilities."""
        raise NotImplementedError

    def probs(self, part: Partition, k: int) -> np.ndarray:
        """π(a|x_i) as an (n, k) matrix."""
        target = self.decisions(part, k)
        return one_hot(target, k) if target.ndim == 1 else target

    def _check_actions(self, actions: np.ndarray, k: int, part: Partition, column: str) -> np.ndarray:
        return check_target_actions(actions, k, part.source, column, part.row_id)


@dataclass
class ConstantPolicy(Policy):
    """π(a|x) = 1{a = action}."""

    action: int

    def decisions(self, part, k):
        return self._check_actions(np.full(len(part), self.action), k, part, "<constant policy>")

    def __str__(self):
        return f"constant:{self.action}"


@dataclass
class ActionColumnPolicy(Policy):
    """π(a|x_i) = 1{a = target_i}, with target_i read from an integer column."""

    column: str = "target_action"

    def __post_init__(self):
        self.columns = (self.column,)

    def decisions(self, part, k):
        return target_actions(part, self.column, k)

    def __str__(self):
        return f"column:{self.column}"


@dataclass
class ProbsColumnPolicy(Policy):
    """π(·|x_i) read from a list<float> column of length k per row."""

    column: str = "target_probs"

    def __post_init__(self):
        self.columns = (self.column,)

    def first_length(self, part) -> int:
        """The length of the first row's list (k, when nothing else tells it)."""
        return first_list_length(part, self.column)

    def decisions(self, part, k):
        return target_probabilities(part, self.column, k)

    def __str__(self):
        return f"probs:{self.column}"


@dataclass
class CallablePolicy(Policy):
    """π from ``module:function(X, row_id)`` returning (n,) actions or (n, k) probabilities."""

    target: str
    needs_features = True

    def __post_init__(self):
        self.function()  # a missing module or function is an error now, not in the first task

    def function(self):
        module, _, name = self.target.partition(":")
        if not module or not name:
            raise UserError(f"policy callable:{self.target}: give callable:module:function")
        try:
            function = getattr(importlib.import_module(module), name)
        except ImportError as exc:
            raise UserError(f"policy callable:{self.target}: cannot import module {module!r} ({exc}); "
                            "is it installed or on PYTHONPATH?") from None
        except AttributeError:
            raise UserError(f"policy callable:{self.target}: module {module!r} has no {name!r}") from None
        except Exception as exc:  # noqa: BLE001 - the module's own import-time failure
            raise UserError(f"policy callable:{self.target}: importing {module!r} failed: "
                            f"{type(exc).__name__}: {exc}") from None
        if not callable(function):
            raise UserError(f"policy callable:{self.target}: {name!r} is not a function")
        return function

    def decisions(self, part, k):
        where = f"<callable:{self.target}>"
        try:
            out = np.asarray(self.function()(part.X, part.row_id))
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - user code: its failure is the user's to fix, named
            raise UserError(f"policy callable:{self.target} raised {type(exc).__name__}: {exc} "
                            f"(on {part.source})") from None
        if out.dtype.kind not in "biuf" or out.ndim not in (1, 2) or out.shape[0] != len(part):
            raise UserError(f"policy callable:{self.target} returned {out.dtype} of shape {out.shape} on "
                            f"{part.source}; expected ({len(part)},) actions or ({len(part)}, {k}) probabilities")
        if out.ndim == 1:
            if out.dtype.kind == "f" and not np.array_equal(out, np.floor(out)):
                raise UserError(f"policy callable:{self.target} returned non-integer actions on {part.source}")
            return self._check_actions(out.astype(np.int64), k, part, where)
        if out.shape != (len(part), k):
            raise UserError(f"policy callable:{self.target} returned shape {out.shape} on {part.source}, "
                            f"expected ({len(part)}, {k})")
        return check_distributions(out.astype(np.float64), part.source, where, part.row_id)

    def __str__(self):
        return f"callable:{self.target}"


@dataclass(eq=False)
class LinearPolicy(Policy):
    """π(x) = argmax_a x·coef[:, a] + intercept[a], the first (lowest) action on ties; coef is (d, k)."""

    coef: np.ndarray
    intercept: np.ndarray
    metadata: dict = field(default_factory=dict)
    source: str = "<in memory>"
    needs_features = True

    def __post_init__(self):
        self.coef, self.intercept = checked_linear(self.coef, self.intercept, f"policy {self.source}")
        self.n_actions = self.coef.shape[1]
        self.digest = parameters_digest(self.coef, self.intercept)

    @property
    def n_features(self) -> int:
        return self.coef.shape[0]

    def scores(self, X, source: str = "<X>", row_id=None) -> np.ndarray:
        """s_a(x_i) = x_i·coef[:, a] + intercept[a], (n, k); X (n, d') with d' ≤ d (absent features are 0)."""
        d = self.n_features
        if X.shape[1] > d:
            X = sp.csr_matrix(X)
            bad = np.flatnonzero(X.indices >= d)
            if bad.size:
                row = int(np.searchsorted(X.indptr, bad[0], side="right") - 1)
                raise PolicyMismatch(source, "features",
                                     f"feature index beyond the policy's {d} features ({self.source})",
                                     int(row_id[row]) if row_id is not None else row)
            X = X[:, :d]
        coef = self.coef if X.shape[1] == d else self.coef[:X.shape[1]]
        with np.errstate(over="ignore", invalid="ignore"):
            scores = np.asarray(X @ coef) + self.intercept
        if not np.isfinite(scores).all():  # coefficients near 1e308: no argmax or softmax means anything
            row = int(np.flatnonzero(~np.isfinite(scores).all(axis=1))[0])
            raise UserError(f"policy {self.source}: its scores x·coef + intercept overflow float64 on {source} "
                            f"(e.g. row_id={int(row_id[row]) if row_id is not None else row}); the coefficients are "
                            f"too large (max |coef| = {np.abs(self.coef).max():.3g}): rescale them")
        return scores

    def predict(self, X) -> np.ndarray:
        """The actions argmax_a s_a(x_i), (n,); ties to the lowest action (numpy's argmax)."""
        return np.argmax(self.scores(X), axis=1)

    def decisions(self, part, k):
        self._check_k(k, part)
        return np.argmax(self.scores(part.X, part.source, part.row_id), axis=1)

    def _check_k(self, k: int, part) -> None:
        if k != self.n_actions:
            raise PolicyMismatch(part.source, "action", f"the log has {k} actions, the policy {self.source} has "
                               f"{self.n_actions}")

    def save(self, url: str, storage_options: dict | None = None) -> None:
        """Write the ``.npz`` (coef, intercept, metadata as JSON) atomically."""
        buf = io.BytesIO()
        np.savez(buf, coef=self.coef, intercept=self.intercept, metadata=np.array(json.dumps(self.metadata)))
        fs, path = url_to_fs(url, storage_options)
        atomic_write(fs, path, buf.getvalue())

    @classmethod
    def load(cls, url: str, storage_options: dict | None = None) -> "LinearPolicy":
        arrays = read_linear_file(url, storage_options, f"policy {url}")
        try:
            meta = json.loads(str(arrays["metadata"])) if "metadata" in arrays else {}
        except ValueError as exc:
            raise ParameterFileError(f"policy {url}: unreadable metadata ({exc})") from None
        return cls(arrays["coef"], arrays["intercept"], meta, url)

    def __str__(self):
        """The spec and the parameters' digest: a re-learned file is another policy (report caches key on this)."""
        return f"linear:{self.source} (sha256 {self.digest[:12]})"


@dataclass(eq=False)
class SoftmaxPolicy(Policy):
    """π(a|x) = exp(s_a(x)/T) / Σ_b exp(s_b(x)/T) over a linear policy's scores s, temperature T > 0."""

    linear: LinearPolicy
    temperature: float
    needs_features = True

    def __post_init__(self):
        if not (np.isfinite(self.temperature) and self.temperature > 0):
            raise UserError(f"policy softmax:{self.linear.source}:{self.temperature}: the temperature T must be a "
                            f"positive finite number, got {self.temperature}")
        self.n_actions = self.linear.n_actions

    def decisions(self, part, k):
        """Scores shifted by their row maximum before dividing by T: the logits are ≤ 0 and the largest is 0, so
        no temperature, however small, overflows (a tiny T gives the argmax, ties shared)."""
        self.linear._check_k(k, part)
        scores = self.linear.scores(part.X, part.source, part.row_id)
        with np.errstate(over="ignore", under="ignore"):
            logits = (scores - scores.max(axis=1, keepdims=True)) / self.temperature
            probs = np.exp(logits)
        return probs / probs.sum(axis=1, keepdims=True)

    def __str__(self):
        return f"softmax:{self.linear.source}:{self.temperature!r} (sha256 {self.linear.digest[:12]})"


def parse_policy(spec: str | Policy) -> Policy:
    """A policy from its command-line spelling (see the module docstring)."""
    if isinstance(spec, Policy):
        return spec
    if not isinstance(spec, str):
        raise UserError(f"bad policy {spec!r}: give a string such as column:target_action")
    kind, _, arg = spec.partition(":")
    if kind == "constant" and arg.isdigit():
        return ConstantPolicy(int(arg))
    if kind == "column":
        return ActionColumnPolicy(arg or "target_action")
    if kind == "probs":
        return ProbsColumnPolicy(arg or "target_probs")
    if kind == "callable" and arg:
        return CallablePolicy(arg)
    if kind == "linear" and arg:
        return LinearPolicy.load(arg)
    if kind == "softmax" and ":" in arg:
        path, _, temperature = arg.rpartition(":")
        try:
            temperature = float(temperature)
        except ValueError:
            raise UserError(f"bad policy {spec!r}: the temperature T of softmax:POLICY.npz:T must be a number") from None
        return SoftmaxPolicy(LinearPolicy.load(path), temperature)
    raise UserError(
        f"bad policy {spec!r}: use constant:A (A ≥ 0), column:NAME, probs:NAME, callable:module:function, "
        "linear:POLICY.npz or softmax:POLICY.npz:T"
    )
