"""Learned linear policies and their files: the argmax (``linear:``) and softmax (``softmax:``) of x·coef + b."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from dr_scale.core.errors import ParameterError, UserError
from dr_scale.io.parameter_files import (
    ParameterFileError,
    checked_linear,
    file_metadata,
    read_linear_file,
    spread_rows,
    stored_layout,
    used_rows,
    write_npz,
)
from dr_scale.logs.contract import Partition
from dr_scale.policies.base import Policy, PolicyMismatch, parameters_digest
from dr_scale.policies.distributions import ActionDistribution, ChosenActions, DenseProbs


@dataclass(eq=False)
class LinearPolicy(Policy):
    """A learned linear policy: π(x) = argmax_a s_a(x),  s_a(x) = x·coef[:, a] + intercept[a].

    Ties go to the first (lowest) action; the ``excluded_actions`` (e.g. actions the log it was learned
    on never took: ``dr-scale learn`` excludes them unless ``--allow-unlogged-actions``) are never
    chosen, the argmax running over the others. Spec ``linear:POLICY.npz``, the file ``dr-scale learn``
    writes (:meth:`save`, :meth:`load`). A log with fewer features than the policy reads the
    absent ones as 0; a feature index beyond the policy's, or a log with another number of
    actions, is a :class:`LogDataError`. ``str(policy)`` carries the parameters' sha256, so a
    re-learned file is another policy. Learned on a log with an action vocabulary (its metadata's
    ``"actions"``), it is reordered to another log's vocabulary by :meth:`resolve`.

    Parameters
    ----------
    coef : numpy.ndarray, shape (d, k)
        The weights, finite.
    intercept : numpy.ndarray, shape (k,)
        The per-action intercepts, finite.
    metadata : dict, optional
        What the learner recorded (saved as JSON).
    source : str, default "<in memory>"
        Where the parameters came from, for messages.
    excluded_actions : tuple of int, default ()
        Actions the policy never chooses (saved in the file as ``excluded_actions``); not all k.

    See Also
    --------
    SoftmaxPolicy : The same scores as a stochastic policy.
    dr_scale.learn_policy : Learns one from a log.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa, scipy.sparse as sp
    >>> from dr_scale import Partition
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))  # 3 rows, d = 2 features
    >>> part = Partition("<example>", row_id=np.arange(3), X=X, action=np.array([0, 1, 2]),
    ...                  reward=np.array([1.0, 0.0, 1.0]), propensity=np.full(3, 1 / 3),
    ...                  table=pa.table({"target_probs": [[0.2, 0.3, 0.5], [1.0, 0.0, 0.0], [0.0, 0.5, 0.5]]}))
    >>> policy = LinearPolicy(coef=np.array([[1.0, 0.0, 0.5], [0.0, 2.0, 0.5]]), intercept=np.array([0.0, -0.5, 0.0]))
    >>> policy.scores(X).tolist()
    [[1.0, -0.5, 0.5], [0.0, 1.5, 0.5], [1.0, 1.5, 1.0]]
    >>> policy.distribution(part, 3).actions.tolist()
    [0, 1, 1]
    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     policy.save(os.path.join(folder, "policy.npz"))
    ...     again = LinearPolicy.load(os.path.join(folder, "policy.npz"))
    >>> again.digest == policy.digest
    True
    """

    coef: np.ndarray
    intercept: np.ndarray
    metadata: dict = field(default_factory=dict)
    source: str = "<in memory>"
    excluded_actions: tuple = ()
    needs_features = True

    def __post_init__(self) -> None:
        self.coef, self.intercept = checked_linear(self.coef, self.intercept, f"policy {self.source}")
        self.n_actions = self.coef.shape[1]
        excluded = np.asarray(self.excluded_actions).reshape(-1)
        if excluded.size and (excluded.dtype.kind not in "iu" or excluded.min() < 0
                              or excluded.max() >= self.n_actions or np.unique(excluded).size >= self.n_actions):
            raise ParameterFileError(f"policy {self.source}: 'excluded_actions' must be distinct actions in "
                                     f"[0, {self.n_actions}), not all of them; got {excluded.tolist()}")
        self.excluded_actions = tuple(sorted({int(a) for a in excluded}))
        self.digest = parameters_digest(self.coef, self.intercept,
                                        *([np.array(self.excluded_actions)] if self.excluded_actions else []))

    def choice_scores(self, X: sp.csr_matrix | np.ndarray, source: str = "<X>",
                      row_id: np.ndarray | None = None) -> np.ndarray:
        """:meth:`scores` with the excluded actions' set to −∞: what the argmax (and a softmax) chooses among."""
        scores = self.scores(X, source, row_id)
        if self.excluded_actions:
            scores[:, list(self.excluded_actions)] = -np.inf
        return scores

    @property
    def n_features(self) -> int:
        """d, the coefficients' rows."""
        return int(self.coef.shape[0])

    def scores(self, X: sp.csr_matrix | np.ndarray, source: str = "<X>",
               row_id: np.ndarray | None = None) -> np.ndarray:
        """s_a(x_i) = x_i·coef[:, a] + intercept[a], (n, k); X (n, d') with d' ≤ d (absent features are 0).

        Parameters
        ----------
        X : scipy.sparse.csr_matrix or numpy.ndarray, shape (n, d')
            The rows' features.
        source : str, default "<X>"
            Where X came from, for the message if it has a feature beyond the policy's d.
        row_id : numpy.ndarray of int, optional
            The rows' ids, for that message.

        Returns
        -------
        numpy.ndarray
            (n, k) float scores.
        """
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
        out: np.ndarray = scores
        return out

    def resolve(self, actions: list | None) -> LinearPolicy:
        """This policy on a log whose action values are ``actions`` (id order): learned on a log with a vocabulary
        (its metadata's ``"actions"``, which ``dr-scale learn`` records), its columns are reordered so that each
        action id names the same action value here; values it was not learned on, or that this log lacks, are an
        error naming both. Without a vocabulary on either side the ids are taken as they are."""
        own = self.metadata.get("actions")
        if actions is None or not isinstance(own, list):
            return self
        own, here = [str(a) for a in own], [str(a) for a in actions]
        if own == here:
            return self
        missing, extra = [a for a in own if a not in here], [a for a in here if a not in own]
        if missing or extra or len(own) != len(here):
            def listed(values: list) -> str:
                """The first five ``values`` as text."""
                return ", ".join(map(repr, values[:5])) + (" …" if len(values) > 5 else "")

            raise UserError(f"policy {self.source} was learned on a log with other actions: "
                            + "; ".join(filter(None, [f"this log has no {listed(missing)}" if missing else "",
                                                      f"the policy has no {listed(extra)}" if extra else ""]))
                            + "; learn it on a log with this log's actions")
        order = [own.index(a) for a in here]  # the policy's column of the value this log numbers i
        return LinearPolicy(self.coef[:, order], self.intercept[order], {**self.metadata, "actions": here},
                            self.source, tuple(here.index(own[a]) for a in self.excluded_actions))

    def predict(self, X: sp.csr_matrix | np.ndarray) -> np.ndarray:
        """The actions argmax_a s_a(x_i), (n,); ties to the lowest action (numpy's argmax).

        Parameters
        ----------
        X : scipy.sparse.csr_matrix or numpy.ndarray, shape (n, d')
            The rows' features, d' ≤ d.

        Returns
        -------
        numpy.ndarray
            (n,) int actions.
        """
        out: np.ndarray = np.argmax(self.choice_scores(X), axis=1)
        return out

    def distribution(self, part: Partition, k: int) -> ActionDistribution:
        """π(x_i) = argmax_a s_a(x_i), the first a among ties (:meth:`choice_scores`)."""
        self._check_k(k, part)
        return ChosenActions(np.argmax(self.choice_scores(part.X, part.source, part.row_id), axis=1), k)

    def _check_k(self, k: int, part: Partition) -> None:
        if k != self.n_actions:
            raise PolicyMismatch(part.source, "action", f"the log has {k} actions, the policy {self.source} has "
                               f"{self.n_actions}")

    def save(self, url: str, storage_options: dict | None = None) -> None:
        """Write the ``.npz`` (coef, intercept, metadata as JSON) atomically, sized by use: where some features weigh
        0 for every action (features no training row had), ``coef`` holds the other rows only, ``features`` their
        sorted ids and ``n_features`` d — a policy learned on a few of 2^18 hashed features is a file of those.

        Parameters
        ----------
        url : str
            The file to write, any fsspec URL.
        storage_options : dict, optional
            fsspec's options for ``url`` (credentials otherwise from the environment).
        """
        excluded = {"excluded_actions": np.array(self.excluded_actions, dtype=np.int64)} if self.excluded_actions \
            else {}
        used = used_rows(self.coef)
        rows = {} if used.size == self.n_features else {"coef": self.coef[used], "features": used,
                                                         "n_features": np.array(self.n_features, dtype=np.int64)}
        write_npz(url, storage_options, **{"coef": self.coef, **rows}, intercept=self.intercept,
                  metadata=np.array(json.dumps(self.metadata)), **excluded)

    @classmethod
    def load(cls, url: str, storage_options: dict | None = None) -> LinearPolicy:
        """Read a policy saved by :meth:`save`; anything else is a ``ParameterFileError`` naming the file.

        Parameters
        ----------
        url : str
            The ``.npz`` file, any fsspec URL.
        storage_options : dict, optional
            fsspec's options for ``url``.

        Returns
        -------
        LinearPolicy
            The policy, ``source`` its URL.
        """
        arrays = read_linear_file(url, storage_options, f"policy {url}")
        meta = file_metadata(arrays, f"policy {url}")
        coef = arrays["coef"]
        stored = stored_layout(arrays, f"policy {url}", coef.shape[0])
        if stored is not None:  # written sized by use: the other features' rows are 0
            coef = spread_rows(coef, *stored)
        return cls(coef, arrays["intercept"], meta, url, tuple(arrays.get("excluded_actions", ())))

    def __str__(self) -> str:
        """The spec and the parameters' digest: a re-learned file is another policy (report caches key on this)."""
        return f"linear:{self.source} (sha256 {self.digest[:12]})"


@dataclass(eq=False)
class SoftmaxPolicy(Policy):
    """A stochastic policy from a linear policy's scores: π(a|x) = exp(s_a(x)/T) / Σ_b exp(s_b(x)/T).

    Spec ``softmax:POLICY.npz:T``. As T → 0 it approaches the linear policy's argmax; as T → ∞
    the uniform policy.

    Parameters
    ----------
    linear : LinearPolicy
        The policy whose scores s_a(x) = x·coef[:, a] + intercept[a] are used.
    temperature : float
        T > 0, finite.

    See Also
    --------
    LinearPolicy : The deterministic policy of the same scores.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa, scipy.sparse as sp
    >>> from dr_scale import Partition
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))  # 3 rows, d = 2 features
    >>> part = Partition("<example>", row_id=np.arange(3), X=X, action=np.array([0, 1, 2]),
    ...                  reward=np.array([1.0, 0.0, 1.0]), propensity=np.full(3, 1 / 3),
    ...                  table=pa.table({"target_probs": [[0.2, 0.3, 0.5], [1.0, 0.0, 0.0], [0.0, 0.5, 0.5]]}))
    >>> linear = LinearPolicy(coef=np.array([[1.0, 0.0, 0.5], [0.0, 2.0, 0.5]]), intercept=np.array([0.0, -0.5, 0.0]))
    >>> probs = SoftmaxPolicy(linear, temperature=0.5).distribution(part, 3).probs
    >>> probs.round(3).tolist()
    [[0.705, 0.035, 0.259], [0.042, 0.844, 0.114], [0.212, 0.576, 0.212]]
    >>> probs.argmax(axis=1).tolist() == linear.distribution(part, 3).actions.tolist()
    True
    """

    linear: LinearPolicy
    temperature: float
    needs_features = True

    def __post_init__(self) -> None:
        if not isinstance(self.linear, LinearPolicy):
            raise ParameterError(f"`linear` must be a LinearPolicy (e.g. LinearPolicy.load(path)), got "
                                 f"{type(self.linear).__name__} {self.linear!r:.60}")
        if not (np.isfinite(self.temperature) and self.temperature > 0):
            raise UserError(f"policy softmax:{self.linear.source}:{self.temperature}: the temperature T must be a "
                            f"positive finite number, got {self.temperature}")
        self.n_actions = self.linear.n_actions

    def resolve(self, actions: list | None) -> SoftmaxPolicy:
        """The same temperature over the linear policy's columns for this log's actions
        (:meth:`LinearPolicy.resolve`)."""
        linear = self.linear.resolve(actions)
        return self if linear is self.linear else SoftmaxPolicy(linear, self.temperature)

    def distribution(self, part: Partition, k: int) -> ActionDistribution:
        """Scores shifted by their row maximum before dividing by T: the logits are ≤ 0 and the largest is 0, so
        no temperature, however small, overflows (a tiny T gives the argmax, ties shared)."""
        self.linear._check_k(k, part)
        scores = self.linear.choice_scores(part.X, part.source, part.row_id)  # an excluded action: probability 0
        with np.errstate(over="ignore", under="ignore"):
            logits = (scores - scores.max(axis=1, keepdims=True)) / self.temperature
            probs = np.exp(logits)
        return DenseProbs(probs / probs.sum(axis=1, keepdims=True))

    def __str__(self) -> str:
        return f"softmax:{self.linear.source}:{self.temperature!r} (sha256 {self.linear.digest[:12]})"
