"""Fitting the shared model, ridge min_θ Σ_i (r_i − b − φ_i·θ)² + λ‖θ‖² or its logistic form (:mod:`.objective`), by
the cross-fitting driver: on a log over its action catalogue, out of core (:func:`fit_shared_model`;
``fit --model shared``), or on in-memory partitions (:func:`fit_shared_ridge`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from dr_scale.core.errors import ParameterError
from dr_scale.crossfit.engine import fit_log, fit_parts
from dr_scale.crossfit.parts import LogPart, used_features
from dr_scale.crossfit.settings import FitSettings, Stages
from dr_scale.outofcore.passes import PartSet
from dr_scale.reward.shared.catalogue import log_and_catalogue
from dr_scale.reward.shared.model import SharedRidgeRewardModel
from dr_scale.reward.shared.objective import SharedModels

if TYPE_CHECKING:
    from distributed import Client

    from dr_scale.logs.contract import Partition
    from dr_scale.logs.opened import OpenedLog


def fit_shared_on_parts(parts: PartSet, n_rows: float, n_features: int, item_features: np.ndarray,
                        settings: FitSettings, *, progress: bool = False, stages: Stages | None = None,
                        name: str = "the log", features: np.ndarray | None = None) -> SharedRidgeRewardModel:
    """The shared model on parts grouped by (fold, action) over ``settings.folds`` folds
    (:func:`dr_scale.crossfit.parts.read_grouped_parts`), ``n_rows`` rows in all, by the cross-fitting driver
    (:func:`dr_scale.crossfit.engine.fit_parts`): ridge or logistic as ``settings.model`` says (None: logistic when
    every reward is 0 or 1); λ as ``settings.lam`` says (``"auto"``: the grid's λ with the least out-of-fold loss on
    the keyed sample); then the K fold models and the full-data model in the same passes. Over the catalogue's
    present columns (the model's ``item_columns``) and the parts' columns: with ``features``, the parts' columns
    are those sorted context ids of the d = ``n_features`` (renumbered by
    :func:`~dr_scale.crossfit.parts.used_features`, whose ids they are) and the model is laid over them; without,
    the parts' ``n_features`` columns as they are.
    """
    family = SharedModels(item_features, name)
    width = int(n_features) if features is None else features.size
    model: SharedRidgeRewardModel = fit_parts(parts, n_rows, width, family.item_features.shape[0],
                                              settings, family, progress=progress, stages=stages)
    if features is None:
        return model
    model.metadata.update(n_features=int(n_features), used_features=int(features.size))
    return replace(model, features=features, dimension=int(n_features))


def fit_shared_model(logs: str | OpenedLog, settings: FitSettings | None = None, *, client: Client | None = None,
                     storage_options: dict | None = None,
                     progress: bool = False) -> SharedRidgeRewardModel:
    """The reward model shared across actions on the log at ``logs`` over its action catalogue, out of core: the
    parts read once, kept between passes (in memory, spilled to local files, or on a Dask cluster's workers) and one
    pass per conjugate-gradient iteration (ridge) or L-BFGS step (logistic) — the per-action fitters' engine, so a
    run on a cluster gives the same bits as a local one. Sized by use: fitted on the context features the rows
    have (:func:`~dr_scale.crossfit.parts.used_features`, the model's ``features``) and the catalogue columns some
    item has non-zero (the model's ``item_columns``), so its sums, directions and θ hold 1 + m + c + m·c numbers.

    Ridge: min_θ Σ_i (r_i − b − φ_i·θ)² + λ‖θ‖² (the module docstring); logistic (0/1 rewards):
    min_θ Σ_i [log(1 + e^{z_i}) − r_i z_i] + (λ/2)‖θ‖², z_i = b + φ_i·θ — scikit-learn's
    ``LogisticRegression(C=1/λ)`` on the explicit φ.

    Parameters
    ----------
    logs : str or OpenedLog
        The log (any fsspec URL, or opened with a filter, :func:`~dr_scale.logs.opened.open_log`: its rows only),
        with ``_actions.parquet``.
    settings : FitSettings or None
        λ (or ``"auto"``), folds, seed, rtol, spill as for the per-action models; ``model``: ``"ridge"``,
        ``"logistic"`` or None (logistic when every reward is 0 or 1). Default ``FitSettings()``.
    client : distributed.Client or None
        Run on this Dask cluster (default: Dask's local threaded scheduler).
    storage_options : dict or None
        fsspec's options for ``logs``.
    progress : bool
        Show each stage's progress on stderr.

    Returns
    -------
    SharedRidgeRewardModel or SharedLogisticRewardModel
        With the K fold models if ``settings.folds``; ``metadata`` records λ (and its search), the passes, the
        rows, the log's fingerprint and actions.

    Examples
    --------
    >>> import tempfile
    >>> from dr_scale.crossfit.settings import FitSettings
    >>> from dr_scale.synthetic.item_world import generate_item_bandit
    >>> folder = tempfile.TemporaryDirectory()
    >>> _ = generate_item_bandit(folder.name + "/log", rows=2000, seed=1, features=100, actions=200,
    ...                          action_features=4, embedding_categories=5)
    >>> model = fit_shared_model(folder.name + "/log", FitSettings(lam=10.0, folds=2))
    >>> type(model).__name__, model.folds, model.metadata["model_chosen_by"]
    ('SharedLogisticRewardModel', 2, 'every reward is 0 or 1')
    >>> folder.cleanup()
    """
    from dr_scale.logs.opened import open_log

    if settings is not None and not isinstance(settings, FitSettings):
        raise ParameterError(f"`settings` must be a FitSettings, got {type(settings).__name__}")
    logs = open_log(logs, storage_options)  # listed once: the catalogue check, the fit and the vocabulary share it
    _, _, catalogue = log_and_catalogue(logs, storage_options, "a model shared across actions needs their features")
    k = catalogue.n_actions
    if settings is not None and settings.n_actions is not None and settings.n_actions != k:
        raise ParameterError(f"`n_actions` is {settings.n_actions}, but the log's action catalogue lists {k} actions")
    model: SharedRidgeRewardModel = fit_log(logs, settings, SharedModels(catalogue.features, str(logs)),
                                            client=client, storage_options=storage_options, progress=progress,
                                            n_actions=k)
    model.metadata["logs"] = str(logs)
    vocabulary = logs.vocabulary
    if vocabulary is not None:
        model.metadata["actions"] = vocabulary
    return model


def fit_shared_from_log(logs: str | OpenedLog, *, lam: float = 1.0, tol: float = 1e-8, max_iter: int = 500,
                        n_features: int | None = None, storage_options: dict | None = None) -> SharedRidgeRewardModel:
    """The shared ridge model on the log at ``logs`` at penalty ``lam``: :func:`fit_shared_model` with
    ``FitSettings(lam=lam, rtol=tol, max_iter=max_iter, n_features=n_features, model="ridge")`` on the local
    scheduler (``fit --model shared-ridge``).

    Parameters
    ----------
    logs : str
        The log (any fsspec URL), with ``_actions.parquet``.
    lam, tol, max_iter
        λ > 0; conjugate gradients stop at ‖residual‖ ≤ tol · ‖rhs‖ or after ``max_iter`` passes.
    n_features : int or None
        d (default: the log's metadata, else the data).
    storage_options : dict or None
        fsspec's options for ``logs``.

    Returns
    -------
    SharedRidgeRewardModel
    """
    return fit_shared_model(logs, FitSettings(lam=lam, rtol=tol, max_iter=max_iter, n_features=n_features,
                                              model="ridge"), storage_options=storage_options)


def in_memory_parts(parts: Iterable[Partition], n_actions: int, folds: int | None = None,
                    seed: int = 0) -> tuple[PartSet, int]:
    """(a :class:`~dr_scale.outofcore.passes.PartSet` on the local scheduler, rows) of in-memory
    :class:`~dr_scale.logs.contract.Partition` objects, grouped by (fold, action) as the log's parts are."""
    from dr_scale.crossfit.parts import group
    from dr_scale.outofcore.passes import given

    grouped_parts = []
    for part in parts:
        X = sp.csr_matrix(part.X, dtype=np.float64)
        grouped_parts.append(group(LogPart(np.asarray(part.row_id), X.indptr, X.indices, X.data,
                                           np.asarray(part.action), np.asarray(part.reward, dtype=np.float64),
                                           np.asarray(part.propensity, dtype=np.float64)), folds, n_actions, seed))
    return PartSet.build(given, [(p,) for p in grouped_parts]), sum(len(p) for p in grouped_parts)


def fit_shared_ridge(parts: Callable[[], Iterable], item_features: np.ndarray, n_features: int, lam: float = 1.0,
                     tol: float = 1e-10, max_iter: int = 500) -> SharedRidgeRewardModel:
    """Ridge on φ(x_i, a_i) = (x_i, f_{a_i}, x_i ⊗ f_{a_i}) with an unpenalised intercept, on in-memory parts:
    :func:`fit_shared_on_parts` (the pass engine on the local scheduler) with ``FitSettings(lam=lam, rtol=tol,
    max_iter=max_iter, model="ridge")``.

    Parameters
    ----------
    parts : callable returning an iterable of Partition
        The logged rows (``lambda: read_log(url)``), read once.
    item_features : numpy.ndarray, shape (k, D_A)
        f_a per action.
    n_features : int
        d.
    lam : float, default 1.0
        λ > 0.
    tol : float
        Conjugate gradients stop when ‖residual‖ ≤ tol · ‖rhs‖ (:func:`dr_scale.outofcore.ridge.fit`).
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
    F = np.asarray(item_features, dtype=np.float64)
    held, rows = in_memory_parts(parts(), F.shape[0])
    held, ids = used_features(held, n_features)
    return fit_shared_on_parts(held, rows, n_features, F,
                               FitSettings(lam=lam, rtol=tol, max_iter=max_iter, model="ridge", spill="memory"),
                               features=ids)
