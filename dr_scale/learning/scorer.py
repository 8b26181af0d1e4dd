"""Policies over the items' features: the greedy policy of a shared reward model (the direct method), and a linear
scorer fitted to every action's DR-, IPS- or DM-imputed reward (:func:`learn_item_scorer`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import scipy.sparse as sp

from dr_scale.core.errors import ParameterError
from dr_scale.policies.target import ItemScorerPolicy
from dr_scale.reward.shared import SharedRidgeRewardModel


def greedy_scorer(model: SharedRidgeRewardModel, top_k: int = 1, temperature: float = 1.0) -> ItemScorerPolicy:
    """The policy that takes the top K actions by a shared model's ρ̂(x, a) (K = 1: π(x) = argmax_a ρ̂(x, a)).

    ρ̂(x, a) − b − x·β_x = x·B·f_a + f_a·β_f is an :class:`~dr_scale.policies.target.ItemScorerPolicy`'s
    score with coef = B and bias_a = f_a·β_f (:mod:`dr_scale.reward.shared`): the direct method's greedy
    policy, a linear scorer over the items' features; saved, ``scorer:POLICY.npz`` reads it.

    Parameters
    ----------
    model : SharedRidgeRewardModel
        ρ̂.
    top_k : int, default 1
        K.
    temperature : float, default 1.0
        The softmax temperature over the top K (no effect at K = 1).

    Returns
    -------
    ItemScorerPolicy

    Examples
    --------
    >>> import numpy as np
    >>> F = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> model = SharedRidgeRewardModel(0.5, np.zeros(2), np.array([0.0, -2.0]), np.eye(2), F)
    >>> X = np.array([[1.0, 0.0], [0.0, 3.0]])
    >>> greedy_scorer(model).scores(X).argmax(axis=1).tolist(), model.predict(X).argmax(axis=1).tolist()
    ([0, 1], [0, 1])
    """
    return ItemScorerPolicy(model.interaction, model.item_features, model.item_features @ model.beta_f, top_k,
                            temperature, source="<greedy scorer of a shared ridge model>")


def _flat(model: SharedRidgeRewardModel) -> np.ndarray:
    """θ = (b, β_x, β_f, vec B), the layout of :func:`dr_scale.reward.shared.fit_shared_ridge`."""
    return np.concatenate([[model.intercept], model.beta_x, model.beta_f, model.interaction.ravel()])


def _context(part, d: int) -> sp.csr_matrix:
    X = sp.csr_matrix(part.X)
    if X.shape[1] < d:
        X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], d))
    return X


def _all_pairs_gram(X: sp.csr_matrix, v: np.ndarray, d: int, k: int, s1: np.ndarray, s2: np.ndarray) -> np.ndarray:
    """Σ_i Σ_a φ(x_i, a) φ(x_i, a)·v over the rows of ``X`` and all k actions, from the catalogue's sums
    S₁ = Σ_a f_a and S₂ = Σ_a f_a f_aᵀ: with c_i = b + x_i·β_x and g_i = β_f + Bᵀx_i, φ(x_i, a)·v = c_i + f_a·g_i,
    and Σ_a φ(x_i, a)(c_i + f_a·g_i) is (u_i, x_i u_i, h_i, x_i ⊗ h_i) with u_i = k c_i + S₁·g_i and
    h_i = c_i S₁ + S₂ g_i — O(n·d·D_A), never (n, k)."""
    da = s1.size
    b, bx, bf, B = v[0], v[1:1 + d], v[1 + d:1 + d + da], v[1 + d + da:].reshape(d, da)
    c = b + X @ bx
    g = bf + np.asarray(X @ B)
    u = k * c + g @ s1
    h = c[:, None] * s1 + g @ s2
    return np.concatenate([[u.sum()], X.T @ u, h.sum(axis=0), np.asarray(X.T @ h).ravel()])


def learn_item_scorer(parts: Callable[[], Iterable], item_features, n_features: int, *, method: str = "dr",
                      reward_model: SharedRidgeRewardModel | None = None, lam: float | None = None,
                      model_lam: float = 100.0, tol: float = 1e-8, max_iter: int = 500, top_k: int = 1,
                      temperature: float = 1.0) -> ItemScorerPolicy:
    """A linear scorer over the items' features fitted to every action's imputed reward: π(x) = argmax_a s(x, a).

    The reduction of Dudík, Langford & Li (2011, Sec. 4) with a score shared across actions: every row's
    reward is imputed for *every* action a (:mod:`dr_scale.learning.impute`), for DR

        Γ_a(x_i) = ρ̂(x_i, a) + 1{a = a_i} (r_i − ρ̂(x_i, a_i)) / p_i,

    (IPS: ρ̂ = 0; DM: no correction), and the score s(x, a) = θ·φ(x, a), φ(x, a) = (1, x, f_a, x ⊗ f_a) as in
    :mod:`dr_scale.reward.shared`, is the ridge fit to Γ over all n·k pairs,

        min_θ Σ_i Σ_a (Γ_a(x_i) − θ·φ(x_i, a))² + λ ‖θ‖²   (the intercept not penalised).

    With ρ̂ = θ₀·φ a shared ridge model, the normal equations are (G + λI)θ = G θ₀ + Σ_i φ(x_i, a_i) δ_i with
    G = Σ_i Σ_a φφᵀ and δ_i = (r_i − ρ̂(x_i, a_i)) / p_i; G v is one pass over the rows through the
    catalogue's sums Σ_a f_a and Σ_a f_a f_aᵀ, so neither (n, k) nor Γ is formed. Solved by conjugate
    gradients, one pass per iteration. The policy takes the top K actions by s (its context-only terms do not
    change the order): an :class:`~dr_scale.policies.target.ItemScorerPolicy` with coef = B, bias_a = f_a·β_f.

    Parameters
    ----------
    parts : callable returning an iterable of Partition
        The logged rows, read anew for each pass.
    item_features : array-like, shape (k, D_A)
        f_a per action (the log's catalogue, dense).
    n_features : int
        d.
    method : {"dr", "ips", "dm"}, default "dr"
        The imputation.
    reward_model : SharedRidgeRewardModel or None
        ρ̂ for DR and DM (default: :func:`~dr_scale.reward.shared.fit_shared_ridge` on ``parts`` with
        ``model_lam``; not cross-fitted).
    lam : float or None
        The scorer's λ > 0 (default: k · n / 10, a tenth of the pairs' count).
    model_lam : float, default 100.0
        The fitted ρ̂'s λ.
    tol, max_iter
        CG stops when ‖residual‖ ≤ tol · ‖right-hand side‖, or after ``max_iter`` passes.
    top_k, temperature
        The policy's K and softmax temperature (K = 1: the argmax).

    Returns
    -------
    ItemScorerPolicy
        With ``metadata``: the method, λ, the rows, the passes.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp, pyarrow as pa
    >>> from dr_scale.logs.contract import Partition
    >>> rng = np.random.default_rng(0)
    >>> X = sp.csr_matrix(rng.integers(0, 2, (2000, 3)).astype(float))
    >>> F = rng.standard_normal((50, 2))                      # k = 50 items, D_A = 2
    >>> B = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])   # the reward's x·B·f_a
    >>> a = rng.integers(0, 50, 2000)                          # uniform logging, p = 1/50
    >>> r = np.einsum("nd,nd->n", np.asarray(X @ B), F[a]) + 0.1 * rng.standard_normal(2000)
    >>> part = Partition("<p>", np.arange(2000), X, a, r, np.full(2000, 1 / 50), pa.table({}))
    >>> policy = learn_item_scorer(lambda: [part], F, 3)
    >>> best = np.asarray(X @ B) @ F.T                         # the true expected rewards, (n, k)
    >>> chosen = policy.decisions(part, 50).actions[:, 0]
    >>> bool(best[np.arange(2000), chosen].mean() > 0.9 * best.max(axis=1).mean())
    True
    """
    from dr_scale.learning.impute import METHODS
    from dr_scale.reward.shared import fit_shared_ridge

    if method not in METHODS:
        raise ParameterError(f"`method` must be one of {', '.join(METHODS)}, got {method!r}")
    F = np.asarray(item_features.toarray() if sp.issparse(item_features) else item_features, dtype=np.float64)
    k, da = F.shape
    d = int(n_features)
    size = 1 + d + da + d * da
    s1, s2 = F.sum(axis=0), F.T @ F
    if method != "ips" and reward_model is None:
        reward_model = fit_shared_ridge(parts, F, d, lam=model_lam, tol=tol, max_iter=max_iter)
    theta0 = _flat(reward_model) if method != "ips" else np.zeros(size)
    if theta0.size != size:
        raise ParameterError(f"`reward_model` has {theta0.size} parameters, the log's d = {d} and D_A = {da} "
                             f"need {size}")

    def gram(v):
        out, rows = np.zeros(size), 0
        for part in parts():
            out += _all_pairs_gram(_context(part, d), v, d, k, s1, s2)
            rows += len(part)
        return out, rows

    rhs, rows = gram(theta0) if method != "ips" else (np.zeros(size), 0)
    if method != "dm":  # Σ_i φ(x_i, a_i) δ_i
        for part in parts():
            X = _context(part, d)
            fitted = 0.0 if method == "ips" else reward_model.predict_pairs(X, part.action[:, None])[:, 0]
            delta = (part.reward - fitted) / part.propensity
            rows = rows if method != "ips" else rows + len(part)
            fl = F[part.action]
            rhs += np.concatenate([[delta.sum()], X.T @ delta, fl.T @ delta,
                                   np.asarray(X.T @ (fl * delta[:, None])).ravel()])
    lam = float(k * rows / 10) if lam is None else float(lam)
    if not lam > 0:
        raise ParameterError(f"`lam` must be positive, got {lam}")
    penalty = np.full(size, lam)
    penalty[0] = 0.0
    theta, r = np.zeros(size), rhs.copy()
    p, rs, passes, target = r.copy(), r @ r, 0, tol * np.sqrt(rhs @ rhs)
    while np.sqrt(rs) > target and passes < max_iter:
        Ap = gram(p)[0] + penalty * p
        passes += 1
        alpha = rs / (p @ Ap)
        theta += alpha * p
        r -= alpha * Ap
        new = r @ r
        p, rs = r + (new / rs) * p, new
    beta_f, B = theta[1 + d:1 + d + da], theta[1 + d + da:].reshape(d, da)
    meta = {"method": method, "learner": "scorer", "lam": lam, "rows": int(rows), "n_features": d, "n_actions": k,
            "action_features": da, "passes": passes, "converged": bool(np.sqrt(rs) <= target)}
    if method != "ips":
        meta["reward_model"] = dict(getattr(reward_model, "metadata", {}) or {})
    return ItemScorerPolicy(B, F, F @ beta_f, top_k, temperature, source="<learned scorer>", metadata=meta)


def learn_scorer_from_log(logs, *, method: str = "dr", reward_model=None, lam: float | None = None,
                          model_lam: float = 100.0, top_k: int = 1, max_iter: int = 500, n_features: int | None = None,
                          storage_options: dict | None = None) -> ItemScorerPolicy:
    """:func:`learn_item_scorer` on the log at ``logs`` with its action catalogue, one part in memory at a time.

    Parameters
    ----------
    logs : str
        The log (any fsspec URL; ``LogFilter(...).on(url)``: its rows only), with ``_actions.parquet``.
    method, lam, model_lam, top_k, max_iter
        As :func:`learn_item_scorer`'s.
    reward_model : SharedRidgeRewardModel, str or None
        ρ̂ for DR and DM, or its ``.npz`` path (default: a shared ridge model fitted on the log).
    n_features : int or None
        d (default: the log's metadata).
    storage_options : dict or None
        fsspec's options for ``logs`` and ``reward_model``.

    Returns
    -------
    ItemScorerPolicy
    """
    from dr_scale.core.errors import UserError
    from dr_scale.logs.contract import list_parts, log_metadata, read_catalogue, read_partition

    fs, paths = list_parts(logs, storage_options)  # a missing log is said as such, before its catalogue
    catalogue = read_catalogue(logs, storage_options)
    if catalogue is None:
        raise UserError(f"{logs}: the log has no action catalogue (_actions.parquet): a scorer over the items' "
                        "features needs one (dr-scale import with an [actions] table, or generate bandit "
                        "--action-features)")
    meta = log_metadata(fs, paths[0])
    d = n_features or meta.get("n_features")
    if d is None:
        raise UserError("the number of features d is unknown: give --n-features, or write the log with "
                        "dr_scale.n_features metadata")
    k = catalogue.n_actions

    def parts():
        return (read_partition(fs, p, n_features=d, n_actions=k) for p in paths)

    if isinstance(reward_model, str):
        reward_model = SharedRidgeRewardModel.load(reward_model, storage_options)
    policy = learn_item_scorer(parts, catalogue.features, d, method=method, reward_model=reward_model, lam=lam,
                               model_lam=model_lam, max_iter=max_iter, top_k=top_k)
    policy.metadata["logs"] = str(logs)
    return policy
