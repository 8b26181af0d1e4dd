"""A ridge reward model shared across actions: context × action-feature interactions plus both main effects.

    ρ̂(x, a) = b + x·β_x + f_a·β_f + x·B·f_a

with f_a the action's features (the log's action catalogue, :class:`~dr_scale.logs.contract.Catalogue`),
so the parameter count, 1 + d + D_A + d·D_A, does not grow with the number of actions k. Fitted by
ridge regression on the logged rows' features φ(x_i, a_i) = (x_i, f_{a_i}, x_i ⊗ f_{a_i}),

    min_θ Σ_i (r_i − b − φ_i·θ)² + λ ‖θ‖²     (the intercept b not penalised),

by conjugate gradients on the normal equations, each iteration one pass over the parts that
computes Φᵀ(Φ v) without forming Φ or ΦᵀΦ (memory O(part + d·D_A)). Predictions for a
policy's listed actions only (:meth:`SharedRidgeRewardModel.predict_pairs`).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from dr_scale.core.errors import ParameterError
from dr_scale.io.atomic import atomic_write, url_to_fs

#: The ``kind`` a shared model's ``.npz`` records.
KIND = "shared"


def is_shared_file(url: str, storage_options: dict | None = None) -> bool:
    """Whether the ``.npz`` at ``url`` is a shared model's (its ``kind``); False for anything unreadable."""
    try:
        fs, path = url_to_fs(url, storage_options)
        with fs.open(path, "rb") as f, np.load(f, allow_pickle=False) as z:
            return "kind" in z.files and str(z["kind"]) == KIND
    except Exception:  # noqa: BLE001 - not a shared model's file: the linear loader says what it is
        return False


@dataclass(eq=False)
class SharedRidgeRewardModel:
    """ρ̂(x, a) = b + x·β_x + f_a·β_f + x·B·f_a (the module docstring); ``predict`` and ``predict_pairs``.

    Parameters
    ----------
    intercept : float
        b.
    beta_x : numpy.ndarray, shape (d,)
        The context's main effect.
    beta_f : numpy.ndarray, shape (D_A,)
        The action features' main effect.
    interaction : numpy.ndarray, shape (d, D_A)
        B.
    item_features : numpy.ndarray, shape (k, D_A)
        f_a per action.
    metadata : dict, optional
        What the fitter recorded.

    Examples
    --------
    >>> import numpy as np
    >>> F = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # k = 3 actions, D_A = 2
    >>> model = SharedRidgeRewardModel(0.5, np.array([1.0, 0.0]), np.array([0.0, 2.0]),
    ...                                np.array([[1.0, 0.0], [0.0, 0.0]]), F)
    >>> model.predict(np.array([[1.0, 0.0]])).tolist()  # 0.5 + 1 + f_a·(0, 2) + f_a[0]
    [[2.5, 3.5, 4.5]]
    >>> model.predict_pairs(np.array([[1.0, 0.0]]), np.array([[2, 0]])).tolist()
    [[4.5, 2.5]]
    """

    intercept: float
    beta_x: np.ndarray
    beta_f: np.ndarray
    interaction: np.ndarray
    item_features: np.ndarray
    metadata: dict = field(default_factory=dict)

    def __post_init__(self):
        self.beta_x = np.asarray(self.beta_x, dtype=np.float64)
        self.beta_f = np.asarray(self.beta_f, dtype=np.float64)
        self.interaction = np.asarray(self.interaction, dtype=np.float64)
        self.item_features = np.asarray(self.item_features, dtype=np.float64)
        d, da = self.interaction.shape
        if self.beta_x.shape != (d,) or self.beta_f.shape != (da,) or self.item_features.shape[1:] != (da,):
            raise ParameterError("`interaction` must be (d, D_A), `beta_x` (d,), `beta_f` (D_A,) and "
                                 "`item_features` (k, D_A)")

    @property
    def n_features(self) -> int:
        return self.beta_x.size

    @property
    def n_actions(self) -> int:
        return self.item_features.shape[0]

    def _context(self, X):
        X = sp.csr_matrix(X) if sp.issparse(X) else np.asarray(X, dtype=np.float64)
        if X.shape[1] > self.n_features:
            raise ParameterError(f"`X` has {X.shape[1]} features, the model {self.n_features}")
        d = X.shape[1]
        return np.asarray(X @ self.beta_x[:d]), np.asarray(X @ self.interaction[:d])

    def predict(self, X, actions=None, row_id=None) -> np.ndarray:
        """ρ̂(x_i, a) for every action, or the given ones: (n, k) or (n, len(actions))."""
        main, projected = self._context(X)
        F = self.item_features if actions is None else self.item_features[np.asarray(actions)]
        return self.intercept + main[:, None] + (F @ self.beta_f)[None, :] + projected @ F.T

    def predict_pairs(self, X, actions: np.ndarray, row_id=None) -> np.ndarray:
        """ρ̂(x_i, a_ij) for each row's own actions, (n, K) for (n, K) ``actions``: O(n·K·D_A), never (n, k)."""
        main, projected = self._context(X)
        F = self.item_features[np.asarray(actions)]  # (n, K, D_A)
        return self.intercept + main[:, None] + F @ self.beta_f + np.einsum("nkd,nd->nk", F, projected)

    def parameters(self) -> tuple[np.ndarray, ...]:
        """The arrays that determine the predictions (for digests: a report's state cache keys on them)."""
        return (np.array([self.intercept]), self.beta_x, self.beta_f, self.interaction, self.item_features)

    def save(self, url: str, storage_options: dict | None = None) -> None:
        """Write the ``.npz`` atomically, its ``kind`` :data:`KIND` (``LinearRewardModel.load`` dispatches on it)."""
        buf = io.BytesIO()
        np.savez(buf, intercept=np.array(self.intercept), beta_x=self.beta_x, beta_f=self.beta_f,
                 interaction=self.interaction, item_features=self.item_features,
                 metadata=np.array(json.dumps(self.metadata)), kind=np.array(KIND))
        fs, path = url_to_fs(url, storage_options)
        atomic_write(fs, path, buf.getvalue())

    @classmethod
    def load(cls, url: str, storage_options: dict | None = None) -> SharedRidgeRewardModel:
        """Read a model saved by :meth:`save`; anything else is a ``ParameterFileError`` naming the file."""
        from dr_scale.io.parameter_files import ParameterFileError

        where = f"reward model {url}"
        fs, path = url_to_fs(url, storage_options)
        if not fs.exists(path) or fs.isdir(path):
            raise ParameterFileError(f"{where}: no such file")
        try:
            with fs.open(path, "rb") as f:
                a = dict(np.load(io.BytesIO(f.read()), allow_pickle=False))
        except Exception as exc:  # noqa: BLE001 - any reader failure is a bad file
            raise ParameterFileError(f"{where}: not a readable .npz file ({type(exc).__name__}: {exc})") from None
        missing = [k for k in ("intercept", "beta_x", "beta_f", "interaction", "item_features") if k not in a]
        if missing or str(a.get("kind", KIND)) != KIND:
            raise ParameterFileError(f"{where}: not a shared reward model (kind {str(a.get('kind', 'linear'))!r}"
                                     + (f", no {', '.join(missing)}" if missing else "") + ")")
        try:
            return cls(float(a["intercept"]), a["beta_x"], a["beta_f"], a["interaction"], a["item_features"],
                       json.loads(str(a["metadata"])) if "metadata" in a else {})
        except (ParameterError, ValueError) as exc:
            raise ParameterFileError(f"{where}: {exc}") from None


def _operator(X, F_logged: np.ndarray):
    """(Φ v, Φᵀ u) for the rows' φ_i = (1, x_i, f_i, x_i ⊗ f_i), v laid out as (b, β_x, β_f, vec B)."""
    d, da = X.shape[1], F_logged.shape[1]

    def forward(v):
        b, bx, bf, B = v[0], v[1:1 + d], v[1 + d:1 + d + da], v[1 + d + da:].reshape(d, da)
        return b + X @ bx + F_logged @ bf + np.einsum("nd,nd->n", np.asarray(X @ B), F_logged)

    def backward(u):
        return np.concatenate([[u.sum()], X.T @ u, F_logged.T @ u, np.asarray(X.T @ (F_logged * u[:, None])).ravel()])

    return forward, backward


def fit_shared_ridge(parts: Callable[[], Iterable], item_features: np.ndarray, n_features: int, lam: float = 1.0,
                     tol: float = 1e-10, max_iter: int = 500) -> SharedRidgeRewardModel:
    """Ridge on φ(x_i, a_i) = (x_i, f_{a_i}, x_i ⊗ f_{a_i}) with an unpenalised intercept, by conjugate gradients.

    Parameters
    ----------
    parts : callable returning an iterable of Partition
        The logged rows, read anew for each pass (``lambda: read_log(url)`` in memory, or a generator
        reading one part at a time).
    item_features : numpy.ndarray, shape (k, D_A)
        f_a per action.
    n_features : int
        d.
    lam : float, default 1.0
        λ > 0.
    tol : float
        CG stops when ‖residual‖ ≤ tol · ‖Φᵀr‖.
    max_iter : int
        At most this many passes.

    Returns
    -------
    SharedRidgeRewardModel
        With ``metadata`` recording λ, the passes and the rows.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp, pyarrow as pa
    >>> from dr_scale.logs.contract import Partition
    >>> rng = np.random.default_rng(0)
    >>> X = sp.csr_matrix(rng.integers(0, 2, (500, 3)).astype(float))
    >>> F = rng.standard_normal((20, 2))
    >>> a = rng.integers(0, 20, 500)
    >>> r = 0.3 + X @ np.array([0.1, 0.0, -0.2]) + np.einsum("nd,nd->n", np.asarray(X @ np.ones((3, 2))), F[a])
    >>> part = Partition("<p>", np.arange(500), X, a, r, np.full(500, 0.05), pa.table({}))
    >>> model = fit_shared_ridge(lambda: [part], F, 3, lam=1e-6)
    >>> bool(np.allclose(model.interaction, 1.0, atol=1e-4)), round(model.intercept, 3)
    (True, 0.3)
    """
    item_features = np.asarray(item_features, dtype=np.float64)
    d, da = n_features, item_features.shape[1]
    size = 1 + d + da + d * da
    penalty = np.full(size, float(lam))
    penalty[0] = 0.0

    def apply(v):
        out, rhs, rows = np.zeros(size), np.zeros(size), 0
        for part in parts():
            X = sp.csr_matrix(part.X)
            if X.shape[1] < d:
                X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], d))
            forward, backward = _operator(X, item_features[part.action])
            out = out + backward(forward(v))
            rhs = rhs + backward(part.reward)
            rows += len(part)
        return out + penalty * v, rhs, rows

    theta = np.zeros(size)
    _, b, rows = apply(theta)
    r = b.copy()
    p = r.copy()
    rs = r @ r
    target = tol * np.sqrt(b @ b)
    passes = 1
    for _ in range(max_iter):
        if np.sqrt(rs) <= target:
            break
        Ap, _, _ = apply(p)
        passes += 1
        alpha = rs / (p @ Ap)
        theta += alpha * p
        r -= alpha * Ap
        new = r @ r
        p = r + (new / rs) * p
        rs = new
    return SharedRidgeRewardModel(float(theta[0]), theta[1:1 + d], theta[1 + d:1 + d + da],
                                  theta[1 + d + da:].reshape(d, da), item_features,
                                  {"lambda": lam, "passes": passes, "rows": rows, "kind": "shared ridge"})


def fit_shared_from_log(logs, *, lam: float = 1.0, tol: float = 1e-8, max_iter: int = 500,
                        n_features: int | None = None, storage_options: dict | None = None) -> SharedRidgeRewardModel:
    """:func:`fit_shared_ridge` on the log at ``logs`` over its action catalogue's features, one part in memory
    at a time (each CG iteration one pass over the parts).

    Parameters
    ----------
    logs : str
        The log (any fsspec URL; ``LogFilter(...).on(url)``: its rows only), with ``_actions.parquet``.
    lam, tol, max_iter
        As :func:`fit_shared_ridge`'s.
    n_features : int or None
        d (default: the log's metadata).
    storage_options : dict or None
        fsspec's options for ``logs``.

    Returns
    -------
    SharedRidgeRewardModel
        Its ``metadata`` records λ, the passes, the rows and the log.
    """
    from dr_scale.core.errors import UserError
    from dr_scale.logs.contract import list_parts, log_metadata, read_catalogue, read_partition

    fs, paths = list_parts(logs, storage_options)  # a missing log is said as such, before its catalogue
    catalogue = read_catalogue(logs, storage_options)
    if catalogue is None:
        raise UserError(f"{logs}: the log has no action catalogue (_actions.parquet): a model shared across actions "
                        "needs their features (dr-scale import with an [actions] table, or generate bandit "
                        "--action-features)")
    d = n_features or log_metadata(fs, paths[0]).get("n_features")
    if d is None:
        raise UserError("the number of features d is unknown: give --n-features, or write the log with "
                        "dr_scale.n_features metadata")
    k = catalogue.n_actions

    def parts():
        return (read_partition(fs, p, n_features=d, n_actions=k) for p in paths)

    model = fit_shared_ridge(parts, catalogue.features.toarray(), d, lam=lam, tol=tol, max_iter=max_iter)
    model.metadata.update(logs=str(logs), n_features=d, n_actions=k, action_features=catalogue.features.shape[1])
    return model
