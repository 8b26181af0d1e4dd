"""Reward models ρ̂_a(x): anything with ``predict(X, actions=None, row_id=None) -> (n, k)``.

The protocol (:class:`RewardModel`): ``predict(X)`` returns ρ̂ for every action; a model
whose ``predict`` also takes ``actions`` computes only those columns
(:func:`predict_columns`), and one that takes ``row_id`` can predict each row with a
model that did not see it (cross-fitting). Models with ``predict(X)`` alone still work.

:class:`LinearRewardModel` is ρ̂_a(x) = x·w_a + b_a, the form of the paper's ridge
models, saved as a small ``.npz`` (no pickle) so a file from a colleague is data,
not code. A cross-fitted file (``dr-scale fit --folds K``) also holds K fold models:
fold model j was fitted on the rows whose fold is not j, where row i's fold is

    fold(i) = ⌊K · u(row_id_i)⌋,    u = keyed_random.uniform(row_id, seed, "cross-fit fold")

(:func:`fold_of`), so :meth:`LinearRewardModel.predict` given the rows' ids predicts
row i with fold model fold(i), which never saw row i. Without row ids (rows from
outside the fitted log), it uses the full-data model.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeAlias

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from scipy.special import expit

from dr_scale.core.errors import ParameterError
from dr_scale.crossfit.folded import (  # noqa: F401 — re-exported where first defined
    FoldedLinearModel,
    _linear,
    checked_actions,
    checked_row_id,
    file_kind,
    load_model_file,
    predict_by_fold,
    register_kind,
    save_model,
)
from dr_scale.crossfit.parts import FOLD_PURPOSE, fold_of  # noqa: F401 — re-exported where first defined

if TYPE_CHECKING:
    from dr_scale.logs.filters import LogFilter

#: A batch's features x_i: a sparse (CSR) matrix or a dense array, (n, d).
Features: TypeAlias = sp.csr_matrix | np.ndarray


class RewardModel(Protocol):
    """The reward model ρ̂_a(x) ≈ E[r | x, a] that DM and DR use (Dudík, Langford & Li 2011, Sec. 2.1).

    Anything with ``predict(X) -> (n, k)`` is one (a protocol: no base class to inherit);
    ``actions`` and ``row_id`` are optional extras a model may take (:func:`predict_columns`
    passes them only where ``predict`` accepts them).

    See Also
    --------
    LinearRewardModel : The ridge model ``dr-scale fit`` writes.
    dr_scale.fit_reward_model : Fits one from a log.

    Examples
    --------
    A model predicting 0.5 for every action is a reward model:

    >>> import numpy as np
    >>> class Half:
    ...     def predict(self, X):
    ...         return np.full((X.shape[0], 3), 0.5)
    >>> predict_columns(Half(), np.zeros((2, 4)), actions=np.array([2])).tolist()
    [[0.5], [0.5]]
    """

    def predict(self, X: Features, actions: np.ndarray | None = None, row_id: np.ndarray | None = None
                ) -> np.ndarray:
        """ρ̂_a(x_i): (n, k), or (n, len(actions)) for the given actions' columns.

        Parameters
        ----------
        X : scipy.sparse.csr_matrix or numpy.ndarray, shape (n, d)
            The rows' features.
        actions : numpy.ndarray of int, optional
            The columns wanted; None for all k.
        row_id : numpy.ndarray of int, optional
            The rows' ids, for a cross-fitted model to predict each row with a model that did not see it.

        Returns
        -------
        numpy.ndarray
            (n, k) predictions, or (n, len(actions)).
        """


def on_other_half(model: Any, read: LogFilter | None) -> bool:
    """Whether the rows ``read`` (a :class:`~dr_scale.logs.filters.LogFilter` or None) are the other half of the
    keyed split ``model`` was fitted on (its ``log_filter`` metadata), which no model saw."""
    recorded = (getattr(model, "metadata", None) or {}).get("log_filter")
    return read is not None and read.other_half_of(recorded)


def checks_fitted_log(model: Any) -> bool:
    """Whether :func:`check_fitted_log` checks ``model``: cross-fitted (fold models), its fit's fingerprint
    recorded."""
    return bool(getattr(model, "folds", 0)) and "fingerprint" in (getattr(model, "metadata", None) or {})


def check_fitted_log(model: Any, fingerprint: str, name: str, read: LogFilter | None = None,
                     refit: str = "dr-scale fit --folds K") -> None:
    """Refuse a cross-fitted ``model`` on rows other than those it was fitted on: a
    :class:`~dr_scale.core.errors.ParameterError` (naming ``allow_other_log``) when the rows read, whose
    fingerprint (``rows:hash``, :class:`dr_scale.crossfit.parts.Extent`) is ``fingerprint``, are not its own —
    there row ids may name rows a fold model saw, and cross-fitting would be silently lost. The one rule of
    ``evaluate``, ``learn`` and their APIs: no check for a model without folds or without a recorded
    fingerprint, nor on the other half of the keyed split it was fitted on (``read``, a
    :class:`~dr_scale.logs.filters.LogFilter`: :meth:`~dr_scale.logs.filters.LogFilter.other_half_of`), whose
    rows no model saw. ``name``: the model, and ``refit``: how to fit one on this log, for the message."""
    if not checks_fitted_log(model) or on_other_half(model, read):
        return
    meta = model.metadata
    if fingerprint != meta["fingerprint"]:
        raise ParameterError(f"{name} is cross-fitted on another log (fingerprint {meta['fingerprint']}; this log's "
                             f"is {fingerprint}): its fold models would predict rows they may have seen, and "
                             f"cross-fitting would be silently lost. Refit it on this log ({refit}), or pass "
                             "`allow_other_log` to use it anyway")


def check_model_actions(model: Any, actions: list | None, name: str) -> None:
    """Refuse ``model`` on a log whose action vocabulary ``actions`` (id order; None: none) is not the one it
    was fitted on (its metadata's ``"actions"``, which ``dr-scale fit`` records): its column a would predict
    another action than the log's action a. A :class:`~dr_scale.core.errors.ParameterError` naming ``name``."""
    own = (getattr(model, "metadata", None) or {}).get("actions")
    if actions is None or not isinstance(own, list) or [str(a) for a in own] == [str(a) for a in actions]:
        return

    def listed(values: list) -> str:
        """The first six ``values`` as text."""
        return ", ".join(map(repr, values[:6])) + (" …" if len(values) > 6 else "")

    raise ParameterError(f"{name} was fitted on a log whose actions are {listed(own)}; this log's are "
                         f"{listed(list(actions))}: its columns would predict other actions here; refit it on "
                         "this log")


def checked_training_arrays(X: Features, action: ArrayLike, reward: ArrayLike,
                            n_actions: int | None) -> tuple[np.ndarray, np.ndarray, int]:
    """(action, reward, k) for fitting on in-memory arrays: equal lengths, integer actions in [0, k), finite
    rewards; else a :class:`~dr_scale.core.errors.ParameterError` naming the argument."""
    action, reward = np.asarray(action), np.asarray(reward)
    n = X.shape[0]
    for name, values in (("action", action), ("reward", reward)):
        if values.ndim != 1 or values.shape[0] != n:
            raise ParameterError(f"`{name}` has {values.shape[0] if values.ndim == 1 else values.shape} value(s) for "
                                 f"the {n} rows of `X`: give one per row")
    if action.size and action.dtype.kind not in "iu":
        if action.dtype.kind != "f" or not np.array_equal(action, np.floor(action)):
            raise ParameterError(f"`action` must be integers (action ids), got {action.dtype}")
    action = action.astype(np.int64)
    if action.size and action.min() < 0:
        raise ParameterError(f"`action` must be ≥ 0, got {int(action.min())}")
    if reward.dtype.kind not in "biuf":
        raise ParameterError(f"`reward` must be numbers, got {reward.dtype}")
    reward = reward.astype(np.float64)
    if not np.isfinite(reward).all():
        raise ParameterError("`reward` has a NaN or infinite value")
    k = int(n_actions or (action.max() + 1 if action.size else 0))
    if k < 1:
        raise ParameterError("`n_actions` is unknown: no rows and no `n_actions`")
    if action.size and action.max() >= k:
        raise ParameterError(f"`action` {int(action.max())} is out of range for `n_actions` = {k}")
    return action, reward, k


@register_kind
@dataclass
class LinearRewardModel(FoldedLinearModel):
    """A linear reward model: ρ̂_a(x) = x·coef[:, a] + intercept[a], the form of the paper's ridge models.

    A cross-fitted model also has ``fold_coef`` (K, d, k) and ``fold_intercept`` (K, k),
    the fold models, and ``fold_seed``, the key of :func:`fold_of`: given the rows' ids,
    :meth:`predict` predicts row i with fold model fold(row_id_i) = ⌊K · u(row_id_i)⌋, which
    was fitted without it; without ids, with the full-data model. ``metadata`` is what
    the fit recorded (λ, rows per action, folds, the data's fingerprint …). Saved as a
    ``.npz`` of arrays and JSON (:meth:`save`, :meth:`load`), never a pickle.

    Parameters
    ----------
    (the parameters of FoldedLinearModel)

    See Also
    --------
    RewardModel : The protocol it implements.
    dr_scale.fit_reward_model : Fits one from a log.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> model = LinearRewardModel(coef=np.array([[0.2, 0.5], [0.4, -0.1]]), intercept=np.array([0.1, 0.3]))
    >>> model.predict(X).round(2).tolist()
    [[0.3, 0.8], [0.5, 0.2], [0.7, 0.7]]
    >>> model.predict(X, actions=np.array([1])).round(2).tolist()
    [[0.8], [0.2], [0.7]]

    Cross-fitted with K = 2 (fold model 1 doubles the weights): row id 6 is in fold 0,
    ids 7 and 8 in fold 1.

    >>> crossfit = LinearRewardModel(model.coef, model.intercept, fold_coef=np.stack([model.coef, 2 * model.coef]),
    ...                              fold_intercept=np.stack([model.intercept, model.intercept]))
    >>> fold_of(np.array([6, 7, 8]), folds=2).tolist(), crossfit.folds
    ([0, 1, 1], 2)
    >>> crossfit.predict(X, row_id=np.array([6, 7, 8])).round(2).tolist()
    [[0.3, 0.8], [0.9, 0.1], [1.3, 1.1]]
    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     crossfit.save(os.path.join(folder, "model.npz"))
    ...     again = LinearRewardModel.load(os.path.join(folder, "model.npz"))
    >>> again.folds, bool(np.array_equal(again.fold_coef, crossfit.fold_coef))
    (2, True)
    """

    WHAT: ClassVar[str] = "reward model"

    @staticmethod
    def link(scores: np.ndarray) -> np.ndarray:
        """The predictions from the linear scores: themselves (a logistic model's: σ of them)."""
        return scores

    def predict(self, X: Features, actions: np.ndarray | None = None, row_id: np.ndarray | None = None
                ) -> np.ndarray:
        """ρ̂ for the rows of X: (n, k), or (n, len(actions)) for the given actions' columns only.

        With ``row_id`` and fold models, row i is predicted by fold model fold(row_id_i)
        (cross-fitting: a model that did not see the row); otherwise by the full-data model.

        Parameters
        ----------
        X : scipy.sparse.csr_matrix or numpy.ndarray, shape (n, d)
            The rows' features.
        actions : numpy.ndarray of int, optional
            The columns wanted; None for all k.
        row_id : numpy.ndarray of int, optional
            The rows' ids (used by a cross-fitted model).

        Returns
        -------
        numpy.ndarray
            (n, k) float predictions, or (n, len(actions)); a logistic model's in (0, 1).
        """
        X, actions, row_id = self.checked_call(X, actions, row_id)
        if actions is not None and actions.size == 0:
            return np.zeros((X.shape[0], 0))
        cols = slice(None) if actions is None else actions
        return self.by_fold(X, row_id, self.n_actions if actions is None else len(actions),
                            lambda coef, intercept, rows: self.link(_linear(rows, coef[:, cols], intercept[cols])))

    def predict_pairs(self, X: Features, actions: np.ndarray, row_id: np.ndarray | None = None) -> np.ndarray:
        """ρ̂_{a_ij}(x_i) for each row's own listed actions: (n, K) for (n, K) ``actions``, as :meth:`predict` gives
        them, bit for bit, without the other actions' columns.

        For sparse X, each stored entry x_it of row i is weighed by its row's action's (and fold model's) weight,
        v_t = x_it · coef[t, a_ij], and the v_t are summed along the row in X's order — the sum X·coef[:, a]
        computes for that row — then intercept[a_ij] is added: O(nnz · K), where the columns of the distinct
        actions cost O(nnz · distinct). Dense X: those columns (:func:`pairs_by_columns`).
        """
        actions = np.asarray(actions)
        if actions.ndim != 2:
            raise ParameterError(f"`actions` must be (n, K): each row's listed actions, got shape {actions.shape}")
        n, width = actions.shape
        if np.shape(X)[0] != n:
            raise ParameterError(f"`actions` has {n} row(s) for the {np.shape(X)[0]} rows of `X`: give one per row")
        if not sp.issparse(X):
            return pairs_by_columns(self, X, actions, row_id)
        X, flat, row_id = self.checked_call(X, actions.ravel(), row_id)
        assert flat is not None  # given actions come back checked
        X = sp.csr_matrix(X)
        chosen = flat.reshape(n, width)
        coef, intercept, fold = self.coef, self.intercept, None
        if row_id is not None and self.fold_coef is not None and self.fold_intercept is not None and self.folds:
            coef, intercept = self.fold_coef, self.fold_intercept
            fold = fold_of(row_id, self.folds, self.fold_seed)[:, None]
        m, k = X.shape[1], self.n_actions
        kind = np.int32 if coef.size < 2 ** 31 else np.int64
        first, bias_at = chosen.astype(kind), chosen  # row i's weight and bias indices: (f·m)·k + a and f·k + a
        if fold is not None:
            first, bias_at = first + (fold * (m * k)).astype(kind), chosen + fold * k
        weights, biases = np.ascontiguousarray(coef).ravel(), np.asarray(intercept).ravel()
        per_row = np.diff(X.indptr)
        at = np.multiply(X.indices, k, dtype=kind)  # entry t's weight for action a of fold f: (f·m + t)·k + a
        out = np.empty((n, width))
        for j in range(width):
            entries = np.repeat(first[:, j], per_row)
            entries += at
            out[:, j] = sp.csr_matrix((X.data, entries, X.indptr), shape=(n, weights.size)) @ weights
            out[:, j] += biases.take(bias_at[:, j])
        return self.link(out)

    @classmethod
    def load(cls, url: str, storage_options: dict | None = None) -> LinearRewardModel:
        """Read a linear model's file saved by :meth:`save`; anything else is a ``ParameterFileError`` naming the file
        (a reward model of any kind loads by :func:`dr_scale.reward.files.load_reward_model`).

        The file's ``kind`` decides the class: ``LinearRewardModel.load`` of a logistic model's file returns a
        :class:`LogisticRewardModel`; ``LogisticRewardModel.load`` takes logistic files only.

        Parameters
        ----------
        url : str
            The ``.npz`` file, any fsspec URL.
        storage_options : dict, optional
            fsspec's options for ``url``.

        Returns
        -------
        LinearRewardModel
            The model, with its fold models and metadata if the file has them.
        """
        kinds = (LinearRewardModel.KIND, LogisticRewardModel.KIND) if cls is LinearRewardModel else (cls.KIND,)
        out: LinearRewardModel = load_model_file(url, storage_options, cls.WHAT, kinds)
        return out


@register_kind
@dataclass
class LogisticRewardModel(LinearRewardModel):
    """A logistic reward model for 0/1 rewards: ρ̂_a(x) = σ(x·coef[:, a] + intercept[a]), σ(z) = 1/(1 + e^{−z}).

    The fields (``coef`` and ``intercept`` on the logit scale), fold models, cross-fitted prediction by row id and
    ``.npz`` are those of :class:`LinearRewardModel` (the file records ``kind = "logistic"``); the predictions lie
    in (0, 1), inside the range of 0/1 rewards, where a linear model's can fall below 0 on rare clicks. Fitted per
    action by L2-regularised logistic regression (``dr-scale fit --model logistic``,
    :func:`dr_scale.fit_reward_model` with ``FitSettings(model="logistic")``), as Open Bandit Pipeline's reward
    models for clicks are.

    Parameters
    ----------
    (the parameters of FoldedLinearModel)

    See Also
    --------
    LinearRewardModel : The ridge model, for rewards other than 0/1.
    dr_scale.fit_reward_model : Fits one from a log.

    Examples
    --------
    >>> import numpy as np
    >>> model = LogisticRewardModel(coef=np.array([[2.0, 0.0], [0.0, -1.0]]), intercept=np.array([-2.0, 0.0]))
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> model.predict(X).round(3).tolist()
    [[0.5, 0.5], [0.119, 0.269]]
    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     model.save(os.path.join(folder, "model.npz"))
    ...     again = LinearRewardModel.load(os.path.join(folder, "model.npz"))  # the file says which class
    >>> type(again).__name__, again.predict(X).round(3).tolist()
    ('LogisticRewardModel', [[0.5, 0.5], [0.119, 0.269]])
    """

    KIND: ClassVar[str] = "logistic"
    link = staticmethod(expit)

    def parameters(self) -> tuple[np.ndarray, ...]:
        """The arrays that determine the predictions, and the model's kind (a digest tells it from a linear
        model with the same arrays)."""
        return (*super().parameters(), np.frombuffer(self.KIND.encode(), np.uint8))


def predict_columns(model: RewardModel, X: Features, actions: np.ndarray,
                    row_id: np.ndarray | None = None) -> np.ndarray:
    """ρ̂_a(x_i) for the given actions only: (n, len(actions)).

    A model whose ``predict`` takes ``actions`` computes just those columns; any other
    model predicts all k and the columns are picked. ``row_id`` goes to a model whose
    ``predict`` takes it (a cross-fitted model predicts each row with a model that did
    not see it).
    """
    if actions.size == 0:
        return np.zeros((X.shape[0], 0))
    parameters = inspect.signature(model.predict).parameters
    kwargs = {"row_id": row_id} if row_id is not None and "row_id" in parameters else {}
    if "actions" in parameters:
        return np.asarray(model.predict(X, actions=actions, **kwargs), dtype=np.float64)
    return np.asarray(model.predict(X, **kwargs), dtype=np.float64)[:, actions]


def mean_over_actions(model: RewardModel, X: Features, k: int, row_id: np.ndarray | None = None,
                      cells: int = 1 << 20) -> np.ndarray:
    """(1/k) Σ_a ρ̂_a(x_i), (n,): the model's value of the uniform policy, without an (n, k) array.

    The actions' columns are predicted a block at a time (:func:`predict_columns`), at most ``cells``
    predictions at once (8 MB), and summed: memory O(n) beside the block, whatever k.

    Examples
    --------
    >>> import numpy as np
    >>> model = LinearRewardModel(coef=np.array([[1.0, 2.0, 3.0]]), intercept=np.array([0.0, 0.0, 3.0]))
    >>> mean_over_actions(model, np.array([[1.0], [2.0]]), 3, cells=2).tolist()  # (x + 2x + 3x + 3) / 3
    [3.0, 5.0]
    """
    n = X.shape[0]
    step = max(1, cells // max(n, 1))
    total = np.zeros(n)
    for start in range(0, k, step):
        total += predict_columns(model, X, np.arange(start, min(k, start + step)), row_id).sum(axis=1)
    return total / k


def predict_pairs(model: RewardModel, X: Features, actions: np.ndarray, row_id: np.ndarray | None = None,
                  chunk: int = 256) -> np.ndarray:
    """ρ̂_{a_ij}(x_i) for each row's own listed actions: (n, K) for (n, K) ``actions``, never (n, k).

    A model with a ``predict_pairs(X, actions, row_id=…)`` method computes them itself. Otherwise, when the
    rows list few distinct actions their columns are predicted for every row (:func:`predict_columns`); else
    ``chunk`` rows at a time, each chunk's distinct actions only, so memory stays O(chunk² · K), whatever k.

    Examples
    --------
    >>> import numpy as np
    >>> model = LinearRewardModel(coef=np.array([[1.0, 2.0, 3.0]]), intercept=np.zeros(3))
    >>> predict_pairs(model, np.array([[1.0], [2.0]]), np.array([[2, 0], [1, 1]])).tolist()
    [[3.0, 1.0], [4.0, 4.0]]
    """
    actions = np.asarray(actions)
    if hasattr(model, "predict_pairs"):
        return np.asarray(model.predict_pairs(X, actions, row_id=row_id), dtype=np.float64)
    return pairs_by_columns(model, X, actions, row_id, chunk)


def pairs_by_columns(model: RewardModel, X: Features, actions: np.ndarray, row_id: np.ndarray | None = None,
                     chunk: int = 256) -> np.ndarray:
    """:func:`predict_pairs` from the columns of the rows' distinct actions (:func:`predict_columns`): for every
    row when the rows list few, else ``chunk`` rows at a time, each chunk's distinct actions only."""
    n, width = actions.shape
    out = np.empty((n, width))
    distinct = np.unique(actions)
    if distinct.size <= max(64, width):
        columns = predict_columns(model, X, distinct, row_id)
        return np.take_along_axis(columns, np.searchsorted(distinct, actions), axis=1)
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        block = actions[lo:hi]
        distinct = np.unique(block)
        columns = predict_columns(model, X[lo:hi], distinct, None if row_id is None else row_id[lo:hi])
        out[lo:hi] = np.take_along_axis(columns, np.searchsorted(distinct, block), axis=1)
    return out
