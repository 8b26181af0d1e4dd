"""Policies over the items' features: the greedy policy of a shared reward model (the direct method), and a linear
scorer fitted to every action's DR-, IPS- or DM-imputed reward (:func:`learn_item_scorer`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import scipy.sparse as sp

from dr_scale.core.errors import ParameterError
from dr_scale.policies import ItemScorerPolicy
from dr_scale.reward.shared import SharedRidgeRewardModel, fold_rows, phi, phi_t


def greedy_scorer(model: SharedRidgeRewardModel, top_k: int = 1, temperature: float = 1.0) -> ItemScorerPolicy:
    """The policy that takes the top K actions by a shared model's ρ̂(x, a) (K = 1: π(x) = argmax_a ρ̂(x, a)).

    ρ̂(x, a) − b − x·β_x = x·B·f_a + f_a·β_f is an :class:`~dr_scale.policies.ItemScorerPolicy`'s
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
    sized = model.sized()  # the policy's coef over the model's features × item columns, f_a over those columns
    return ItemScorerPolicy(sized.interaction, sized.item_features, sized.item_features @ sized.beta_f, top_k,
                            temperature, source="<greedy scorer of a shared ridge model>", features=sized.features,
                            dimension=sized.n_features)


def _all_pairs_gram(X: sp.csr_matrix, v: np.ndarray, d: int, k: int, s1: np.ndarray, s2: np.ndarray) -> np.ndarray:
    """Σ_i Σ_a φ(x_i, a) φ(x_i, a)·v over the rows of ``X`` and all k actions, from the catalogue's sums
    S₁ = Σ_a f_a and S₂ = Σ_a f_a f_aᵀ: with c_i = b + x_i·β_x and g_i = β_f + Bᵀx_i, φ(x_i, a)·v = c_i + f_a·g_i,
    and Σ_a φ(x_i, a)(c_i + f_a·g_i) is (u_i, x_i u_i, h_i, x_i ⊗ h_i) with u_i = k c_i + S₁·g_i and
    h_i = c_i S₁ + S₂ g_i — O(n·d·D_A), never (n, k)."""
    da = s1.size
    b, bx, bf, B = v[0], v[1:1 + d], v[1 + d:1 + d + da], v[1 + d + da:].reshape(d, da)
    c = b + X @ bx
    g = bf + np.asarray(X @ B)
    u = k * c + np.einsum("na,a->n", g, s1)  # numpy's loops, not BLAS: the same bits in any process
    h = c[:, None] * s1 + np.einsum("na,ab->nb", g, s2)
    return np.concatenate([[u.sum()], X.T @ u, h.sum(axis=0), np.asarray(X.T @ h).ravel()])


def catalogue_sums(item_features: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Σ_a f_a, Σ_a f_a f_aᵀ, Σ_a f_a²) over the catalogue: computed once, by the driver, so every pass's tasks
    use the same bits."""
    F = item_features
    return F.sum(axis=0), F.T @ F, (F * F).sum(axis=0)


def scorer_sums(part, theta0: np.ndarray | None, item_features: np.ndarray, sums: tuple, d: int, k: int,
                groups: int, method: str) -> tuple:
    """The statistics of the scorer's ridge fit over the part's n·k pairs (x_i, a): (pairs, Σ Γ, Σ φ, Σ φ², Σ Γ φ)
    with φ = (x, f_a, x ⊗ f_a) — the pair sums through the catalogue's Σ_a f_a and Σ_a f_a f_aᵀ — and Γ the imputed
    rewards; ``theta0`` (G, 1 + D): ρ̂'s (b, β_x, β_f, vec B) per fold group (the fold model that did not see the
    rows; one group without folds), None for IPS."""
    F = item_features
    theta: np.ndarray = np.empty((groups, 0)) if theta0 is None else theta0  # IPS has no ρ̂ (never read)
    s1, s2, sf2 = sums
    da = F.shape[1]
    size = d + da + d * da
    rows, sy = 0.0, 0.0
    sx, sxx, xy = np.zeros(size), np.zeros(size), np.zeros(size)
    for f in range(groups):
        X, a, y = fold_rows(part, f, k, d)
        n = X.shape[0]
        if not n:
            continue
        lo = int(part.start[f * k])
        rows += n
        sum_x, sum_x2 = np.asarray(X.sum(axis=0)).ravel(), np.asarray(X.multiply(X).sum(axis=0)).ravel()
        sx += np.concatenate([k * sum_x, n * s1, np.outer(sum_x, s1).ravel()])
        sxx += np.concatenate([k * sum_x2, n * sf2, np.outer(sum_x2, sf2).ravel()])
        if method != "ips":  # Σ_a φ(x_i, a) ρ̂(x_i, a) and Σ_a ρ̂(x_i, a), ρ̂ = θ₀·(1, φ)
            g = _all_pairs_gram(X, theta[f], d, k, s1, s2)
            sy += g[0]
            xy += g[1:]
        if method != "dm":  # the correction on the logged pair: δ_i = (r_i − ρ̂(x_i, a_i)) / p_i
            Fl = F[a]
            fitted = 0.0 if method == "ips" else theta[f, 0] + phi(X, Fl, theta[f, 1:])
            delta = (y - fitted) / part.propensity[lo:lo + n]
            sy += float(delta.sum())
            xy += phi_t(X, Fl, delta)
    return np.array([rows * k]), np.array([sy]), sx[None, :], sxx[None, :], xy[None, :], rows


def add_scorer_gram(total, part, P: np.ndarray, sums: tuple, d: int, k: int) -> np.ndarray:
    """total (1, D) += Σ_i Σ_a φ(x_i, a) φ(x_i, a)·P over the part's rows and all k actions
    (:func:`_all_pairs_gram`)."""
    if total is None:
        total = np.zeros_like(P)
    X = part.blocks(0, part.start.size - 1, d)
    if X.shape[0]:
        total[0] += _all_pairs_gram(X, np.r_[0.0, P[0]], d, k, sums[0], sums[1])[1:]
    return total


def learn_scorer_on_parts(parts, n_features: int, item_features: Any, *, method: str = "dr",
                          reward_model: SharedRidgeRewardModel | None = None, lam: float | None = None,
                          rtol: float = 1e-8, max_iter: int = 500, top_k: int = 1, temperature: float = 1.0,
                          progress: bool = False, features: np.ndarray | None = None) -> ItemScorerPolicy:
    """:func:`learn_item_scorer`'s fit on parts grouped by (fold, action) over ρ̂'s folds (its fold models impute
    the rows they did not see): the statistics in one pass, then :func:`dr_scale.outofcore.ridge.fit`'s conjugate
    gradients, one pass per iteration — the per-action fitters' engine, on the local scheduler or a cluster.

    Sized by use with ``features``: the parts' columns are those sorted context ids of the d = ``n_features``
    (:func:`~dr_scale.crossfit.parts.used_features`), ρ̂ is laid over them
    (:meth:`~dr_scale.reward.shared.SharedRidgeRewardModel.over`) and so is the policy's coef, m × D_A; a feature
    no row has would weigh 0 (its sums are 0 and its penalty pulls it there)."""
    from dr_scale.learning.impute import METHODS
    from dr_scale.outofcore import ridge

    if method not in METHODS:
        raise ParameterError(f"`method` must be one of {', '.join(METHODS)}, got {method!r}")
    F = np.asarray(item_features.toarray() if sp.issparse(item_features) else item_features, dtype=np.float64)
    k, da = F.shape
    d = int(n_features) if features is None else features.size  # the parts' columns
    theta0, groups = None, 1
    if method != "ips":
        if not isinstance(reward_model, SharedRidgeRewardModel) or reward_model.LINK != "identity":
            raise ParameterError("`reward_model` must be a shared ridge model (dr-scale fit --model shared-ridge): the "
                                 "scorer sums its ρ̂ over all items through the catalogue's sums, which a logistic "
                                 "link or a per-action model does not allow")
        if (reward_model.n_features, reward_model.n_item_features) != (int(n_features), da):
            raise ParameterError(f"`reward_model` is over d = {reward_model.n_features} context features and D_A = "
                                 f"{reward_model.n_item_features} item features, the log's are d = {int(n_features)} "
                                 f"and D_A = {da}")
        reward_model = reward_model.over(features)  # θ₀ in the scorer's layout: the parts' columns × all D_A
        own = reward_model.theta()
        groups = max(reward_model.folds, 1)
        theta0 = reward_model.fold_theta if reward_model.folds else own[None, :]
    sums = catalogue_sums(F)
    n, sy, sx, sxx, xy, rows = parts.sum(scorer_sums, theta0, F, sums, d, k, groups, method, progress=progress)
    stats = ridge.RidgeStats(n, sx, sxx, sy, xy)
    lam = float(k * rows / 10) if lam is None else float(lam)
    if not lam > 0:
        raise ParameterError(f"`lam` must be positive, got {lam}")

    def gram(P):
        """Σ_i Σ_a φ(x_i, a) φ(x_i, a)ᵀ P over the parts (zero for P = 0): one pass."""
        if not P.any():
            return np.zeros_like(P)
        return parts.accumulate(add_scorer_gram, P, sums, d, k)

    fit = ridge.fit(gram, stats, lam, rtol=rtol, max_iter=max_iter, progress=progress)
    beta_f, B = fit.coef[0, d:d + da], fit.coef[0, d + da:].reshape(d, da)
    meta = {"method": method, "learner": "scorer", "lam": lam, "rows": int(rows), "n_features": int(n_features),
            "n_actions": k, "action_features": da, "passes": int(fit.iterations) + 1,
            "converged": bool(fit.converged[0])}
    layout: dict[str, Any] = {}
    if features is not None:
        meta["used_features"] = int(features.size)
        layout = {"features": features, "dimension": int(n_features)}
    if method != "ips":
        assert reward_model is not None  # checked above
        meta["reward_model"] = dict(getattr(reward_model, "metadata", {}) or {})
        meta["reward_model_folds"] = reward_model.folds
    return ItemScorerPolicy(B, F, F @ beta_f, top_k, temperature, source="<learned scorer>", metadata=meta, **layout)


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

    With ρ̂ = θ₀·φ a shared ridge model, Σ_a φ(x_i, a) Γ_a(x_i) = Σ_a φ φᵀ θ₀ + φ(x_i, a_i) δ_i with
    δ_i = (r_i − ρ̂(x_i, a_i)) / p_i, and Σ_a φ φᵀ v is computed per row through the catalogue's sums Σ_a f_a and
    Σ_a f_a f_aᵀ, so neither (n, k) nor Γ is formed. Solved by :func:`dr_scale.outofcore.ridge.fit`'s conjugate
    gradients, one pass per iteration (:func:`learn_scorer_on_parts`); a cross-fitted ρ̂ imputes each row by the
    fold model that did not see it. The policy takes the top K actions by s (its context-only terms do not
    change the order): an :class:`~dr_scale.policies.ItemScorerPolicy` with coef = B, bias_a = f_a·β_f.

    Parameters
    ----------
    parts : callable returning an iterable of Partition
        The logged rows (in memory), read once.
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
    >>> chosen = policy.distribution(part, 50).actions[:, 0]
    >>> bool(best[np.arange(2000), chosen].mean() > 0.9 * best.max(axis=1).mean())
    True
    """
    from dr_scale.crossfit.parts import used_features
    from dr_scale.crossfit.settings import FitSettings
    from dr_scale.reward.shared import fit_shared_on_parts, in_memory_parts

    F = np.asarray(item_features.toarray() if sp.issparse(item_features) else item_features, dtype=np.float64)
    folds = getattr(reward_model, "folds", 0) or None
    held, rows = in_memory_parts(parts(), F.shape[0], folds, getattr(reward_model, "fold_seed", 0))
    held, ids = used_features(held, n_features)
    if method != "ips" and reward_model is None:
        reward_model = fit_shared_on_parts(held, rows, n_features, F, FitSettings(
            lam=model_lam, rtol=tol, max_iter=max_iter, model="ridge", spill="memory"), features=ids)
    return learn_scorer_on_parts(held, n_features, F, method=method, reward_model=reward_model, lam=lam, rtol=tol,
                                 max_iter=max_iter, top_k=top_k, temperature=temperature, features=ids)


def learn_scorer_from_log(logs, *, method: str = "dr", reward_model=None, lam: float | None = None,
                          model_lam: float = 100.0, top_k: int = 1, max_iter: int = 500, n_features: int | None = None,
                          storage_options: dict | None = None, client=None, folds: int | None = None,
                          spill: str = "disk", rtol: float = 1e-8, progress: bool = False,
                          allow_other_log: bool = False) -> ItemScorerPolicy:
    """:func:`learn_item_scorer` on the log at ``logs`` with its action catalogue, out of core on the pass engine:
    the parts read once and kept between passes (in memory, spilled to local files, or on a Dask cluster's workers),
    so a run on a cluster gives the same bits as a local one.

    Parameters
    ----------
    logs : str or OpenedLog
        The log (any fsspec URL, or opened with its filter, :func:`~dr_scale.logs.opened.open_log`: its rows only),
        with ``_actions.parquet``.
    method, lam, model_lam, top_k, max_iter
        As :func:`learn_item_scorer`'s.
    reward_model : SharedRidgeRewardModel, str or None
        ρ̂ for DR and DM, or its ``.npz`` path (default: a shared ridge model fitted on the log, in the same passes'
        engine, cross-fitted over ``folds`` folds if given).
    n_features : int or None
        d (default: the log's metadata, else the data).
    storage_options : dict or None
        fsspec's options for ``logs`` and ``reward_model``.
    client : distributed.Client or None
        Run on this Dask cluster (default: Dask's local threaded scheduler).
    folds : int or None
        K ≥ 2: the fitted ρ̂'s fold models impute the rows they did not see (default: no folds).
    spill : str
        Where a local run keeps the parts between passes: ``"disk"``, ``"memory"`` or a folder.
    rtol : float
        Every conjugate-gradient solve stops at ‖residual‖ ≤ rtol ‖rhs‖.
    progress : bool
        Show each stage's progress on stderr.
    allow_other_log : bool
        Use a cross-fitted ``reward_model`` fitted on other rows.

    Returns
    -------
    ItemScorerPolicy
    """
    from dr_scale.crossfit.parts import read_grouped_parts, used_features
    from dr_scale.crossfit.settings import FitSettings
    from dr_scale.io.cache import spill_root
    from dr_scale.logs.opened import open_log
    from dr_scale.outofcore.compute import check_client
    from dr_scale.outofcore.passes import spill_folder
    from dr_scale.reward.models import check_fitted_log
    from dr_scale.reward.shared import check_model_catalogue, fit_shared_on_parts, log_and_catalogue

    check_client(client)
    logs = open_log(logs, storage_options)
    fs, paths, catalogue = log_and_catalogue(logs, storage_options, "a scorer over the items' features needs one")
    name = "the reward model"
    if isinstance(reward_model, str):
        name = f"the reward model {reward_model}"
        reward_model = SharedRidgeRewardModel.load(reward_model, storage_options)
    if method == "ips":
        reward_model = None
    check_model_catalogue(reward_model, catalogue, name)
    settings = FitSettings(lam=model_lam, folds=folds, rtol=rtol, max_iter=max_iter, model="ridge", spill=spill)
    given = reward_model is not None
    group_folds = (reward_model.folds or None) if given else settings.folds
    seed = reward_model.fold_seed if given else settings.seed
    d, k = logs.dimensions(n_features, catalogue.n_actions)
    F = catalogue.features.toarray()
    with spill_folder(spill, client, disk=spill_root()) as folder:
        parts, extent, d, k, _ = read_grouped_parts(fs, paths, d, k, group_folds, seed, client=client,
                                                    progress=progress, folder=folder, logs=str(logs))
        if given and not allow_other_log:
            check_fitted_log(reward_model, f"{extent.n}:{extent.fingerprint:016x}", name,
                             logs.log_filter, refit="dr-scale fit --model shared-ridge --folds K")
        parts, ids = used_features(parts, d)
        if method != "ips" and not given:
            reward_model = fit_shared_on_parts(parts, extent.n, d, F, settings, progress=progress, name=str(logs),
                                               features=ids)
        policy = learn_scorer_on_parts(parts, d, F, method=method, reward_model=reward_model, lam=lam, rtol=rtol,
                                       max_iter=max_iter, top_k=top_k, progress=progress, features=ids)
        del parts
    policy.metadata["logs"] = str(logs)
    return policy
