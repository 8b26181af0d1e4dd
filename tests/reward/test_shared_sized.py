"""The shared models sized by use: fitted on a log, they hold β_x and B's rows for the context features the rows have
and β_f, B's columns for the catalogue columns some item has, in memory and in the file, and predict as the model
fitted over all d × D_A does; dense files load converted; bad ids are refused in one line."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp

from dr_scale.crossfit.engine import fit_parts
from dr_scale.crossfit.settings import FitSettings
from dr_scale.io.parameter_files import ParameterFileError
from dr_scale.logs.catalogue import Catalogue
from dr_scale.logs.reading import read_log
from dr_scale.logs.sparse import csr_to_features
from dr_scale.logs.writing import write_log
from dr_scale.reward.files import load_reward_model
from dr_scale.reward.shared import (
    SharedLogisticRewardModel,
    SharedObjective,
    SharedRidgeRewardModel,
    check_model_catalogue,
    fit_shared_model,
    in_memory_parts,
)

D, DA, K = 300, 9, 30
USED = np.array([2, 5, 11, 40, 41, 97, 150, 151, 200, 233, 260, 299])  # the context features the rows have
PRESENT = np.array([1, 4, 8])  # the catalogue columns some item has


def _log(folder, binary: bool, seed: int = 0) -> tuple[str, np.ndarray, sp.csr_matrix, np.ndarray]:
    """A log of 1200 rows over d = 300 features (12 of them used) with a catalogue of 30 items × 9 columns (3 of
    them non-zero): (its URL, its catalogue, X, row ids)."""
    rng = np.random.default_rng(seed)
    n = 1200
    small = sp.random(n, USED.size, density=0.4, format="csr", random_state=seed, data_rvs=lambda m: np.ones(m))
    X = sp.csr_matrix((small.data, USED[small.indices], small.indptr), shape=(n, D))
    F = np.zeros((K, DA))
    F[:, PRESENT] = rng.standard_normal((K, PRESENT.size)).astype(np.float32)
    a = rng.integers(0, K, n)
    z = 0.3 + X @ rng.normal(0, 0.5, D) + F[a] @ rng.standard_normal(DA) + np.einsum(
        "nd,nd->n", np.asarray(X @ rng.normal(0, 0.3, (D, DA))), F[a])
    r = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(float) if binary else z + rng.normal(0, 0.3, n)
    row_id = np.arange(n) * 3 + 1
    table = pa.table({"row_id": row_id, "features": csr_to_features(X), "action": a.astype(np.int32), "reward": r,
                      "propensity": np.full(n, 1 / K)})
    url = str(folder / "log")
    write_log(table, url, n_parts=3, n_features=D, n_actions=K, catalogue=Catalogue(sp.csr_matrix(F)))
    return url, F, X, row_id


def _dense_fit(url: str, F: np.ndarray, settings: FitSettings, logistic: bool) -> SharedRidgeRewardModel:
    """The same fit over all d × D_A: the engine's shared objective on the log's parts as read (features not
    renumbered) over every catalogue column."""
    held, rows = in_memory_parts(read_log(url, n_features=D), K, settings.folds, settings.seed)
    model: SharedRidgeRewardModel = fit_parts(held, rows, D, K, settings, SharedObjective(
        F, np.arange(DA), DA, logistic=logistic))
    assert model.features is None and model.beta_x.size == D and model.interaction.shape == (D, DA)
    return model


@pytest.mark.slow
@pytest.mark.parametrize("logistic", [False, True], ids=["ridge", "logistic"])
def test_fit_on_a_log_holds_the_used_rows_and_columns_and_predicts_as_the_dense_fit(tmp_path, logistic):
    url, F, X, row_id = _log(tmp_path, logistic)
    # λ = 20 keeps the problem well conditioned: CG's residual below 1e-13 ‖rhs‖ (L-BFGS's gradient below
    # 1e-11) puts both fits within ~1e-14 (~1e-11) of the exact θ, so their predictions agree to 1e-12 (1e-10)
    settings = FitSettings(lam=20.0, folds=2, seed=3, rtol=1e-11 if logistic else 1e-13, max_iter=1000,
                           model="logistic" if logistic else "ridge")
    model = fit_shared_model(url, settings)
    assert isinstance(model, SharedLogisticRewardModel) is logistic
    np.testing.assert_array_equal(model.features, USED)
    np.testing.assert_array_equal(model.item_columns, PRESENT)
    m, c = USED.size, PRESENT.size
    assert (model.n_features, model.n_item_features) == (D, DA)
    assert model.beta_x.shape == (m,) and model.interaction.shape == (m, c) and model.item_features.shape == (K, c)
    assert model.fold_theta.shape == (2, 1 + m + c + m * c)
    assert model.metadata["used_features"] == m and model.metadata["used_action_features"] == c
    dense = _dense_fit(url, F, settings, logistic)
    # the dense θ's entries of the features no row has and the columns no item has stay 0 (zero gradient)
    tol = 1e-10 if logistic else 1e-12
    spread = model.over()
    np.testing.assert_allclose(spread.theta(), dense.theta(), rtol=0, atol=tol)
    np.testing.assert_allclose(spread.fold_theta, dense.fold_theta, rtol=0, atol=tol)
    for ids in (None, row_id):  # the full-data model, and each row's fold model
        np.testing.assert_allclose(model.predict(X, row_id=ids), dense.predict(X, row_id=ids), rtol=0, atol=tol)
        pairs = (np.arange(len(row_id))[:, None] + np.array([0, 5])) % K
        np.testing.assert_allclose(model.predict_pairs(X, pairs, row_id=ids), dense.predict_pairs(X, pairs, row_id=ids),
                                   rtol=0, atol=tol)
    np.testing.assert_allclose(model.predict(X[:, :100].toarray()), dense.predict(X[:, :100].toarray()), rtol=0,
                               atol=tol)  # a dense X of fewer columns: the others 0


def test_the_file_holds_the_used_rows_and_columns_with_their_ids(tmp_path):
    url, F, X, row_id = _log(tmp_path, False)
    model = fit_shared_model(url, FitSettings(lam=2.0, folds=2, seed=3, model="ridge"))
    path = tmp_path / "shared.npz"
    model.save(str(path))
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    m, c = USED.size, PRESENT.size
    assert arrays["beta_x"].shape == (m,) and arrays["beta_f"].shape == (c,)
    assert arrays["interaction"].shape == (m, c) and arrays["item_features"].shape == (K, c)
    assert arrays["fold_theta"].shape == (2, 1 + m + c + m * c)
    np.testing.assert_array_equal(arrays["features"], USED)
    np.testing.assert_array_equal(arrays["item_columns"], PRESENT)
    assert (int(arrays["n_features"]), int(arrays["n_item_features"])) == (D, DA)
    again = load_reward_model(str(path))
    assert type(again) is SharedRidgeRewardModel
    for ids in (None, row_id):  # the same arrays: the same bits
        np.testing.assert_array_equal(again.predict(X, row_id=ids), model.predict(X, row_id=ids))
    check_model_catalogue(again, Catalogue(sp.csr_matrix(F)), "the model")  # its catalogue
    other = F.copy()
    other[3, 0] = 1.0  # a column the model does not hold
    with pytest.raises(Exception, match="fitted over another action catalogue .* other values"):
        check_model_catalogue(again, Catalogue(sp.csr_matrix(other)), "the model")


def _dense_file(path, model: SharedRidgeRewardModel) -> None:
    """``model`` written dense, over all d × D_A, without ids: a file of the layout before sizing by use."""
    import json

    np.savez(path, intercept=np.array(model.intercept), beta_x=model.beta_x, beta_f=model.beta_f,
             interaction=model.interaction, item_features=model.item_features, fold_theta=model.fold_theta,
             fold_seed=np.array(model.fold_seed), metadata=np.array(json.dumps(model.metadata)),
             kind=np.array("shared"), link=np.array(model.LINK))


@pytest.mark.parametrize("cls", [SharedRidgeRewardModel, SharedLogisticRewardModel])
def test_a_dense_file_loads_sized_by_use(tmp_path, cls):
    rng = np.random.default_rng(4)
    d, da, k = 20, 5, 6
    F = np.zeros((k, da))
    F[:, [0, 3]] = rng.standard_normal((k, 2))
    weights = np.zeros((d, 1 + da))
    weights[[1, 7, 8]] = rng.standard_normal((3, 1 + da))
    weights[12, 2] = 5.0  # a weight on a column no item has: adds 0, dropped with its feature
    folds = np.zeros((2, 1 + d + da + d * da))
    folds[:, 1 + d + da + 9 * da + 3] = 1.5  # fold models: feature 9, column 3
    dense = cls(0.25, weights[:, 0], rng.standard_normal(da), weights[:, 1:], F, {"rows": 10}, folds, 7)
    _dense_file(tmp_path / "old.npz", dense)
    model = load_reward_model(str(tmp_path / "old.npz"))
    assert type(model) is cls and model.fold_seed == 7 and model.metadata == {"rows": 10}
    np.testing.assert_array_equal(model.features, [1, 7, 8, 9])
    np.testing.assert_array_equal(model.item_columns, [0, 3])
    assert (model.n_features, model.n_item_features, model.interaction.shape) == (d, da, (4, 2))
    X = sp.random(50, d, density=0.5, format="csr", random_state=1)
    row_id = np.arange(50)
    for ids in (None, row_id):
        np.testing.assert_allclose(model.predict(X, row_id=ids), dense.predict(X, row_id=ids), rtol=0, atol=1e-12)
    model.save(str(tmp_path / "new.npz"))  # written sized, read as it was
    again = load_reward_model(str(tmp_path / "new.npz"))
    np.testing.assert_array_equal(again.predict(X, row_id=row_id), model.predict(X, row_id=row_id))


@pytest.mark.parametrize(("key", "value", "says"), [
    ("features", np.array([1, 0]), "'features' must be increasing ids in [0, n_features = 20)"),
    ("features", np.array([3, 20]), "'features' must be increasing ids in [0, n_features = 20)"),
    ("features", np.array([3]), "'features' must be 2 integer ids (one per entry of 'beta_x')"),
    ("item_columns", np.array([-1]), "'item_columns' must be increasing ids in [0, n_item_features = 4)"),
    ("item_columns", np.array([0.5]), "'item_columns' must be 1 integer ids (one per column of 'item_features')"),
    ("n_features", None, "'features' and 'n_features' go together"),
    ("n_item_features", np.array(0), "'n_item_features' must be one integer d ≥ 1"),
])
def test_a_file_with_bad_ids_is_refused_in_one_line(tmp_path, key, value, says):
    model = SharedRidgeRewardModel(0.0, np.ones(2), np.ones(1), np.ones((2, 1)), np.ones((3, 1)),
                                   features=np.array([3, 9]), dimension=20, item_columns=np.array([2]),
                                   item_dimension=4)
    path = tmp_path / "m.npz"
    model.save(str(path))
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    if value is None:
        del arrays[key]
    else:
        arrays[key] = value
    np.savez(path, **arrays)
    with pytest.raises(ParameterFileError) as info:
        load_reward_model(str(path))
    assert says in str(info.value) and str(path) in str(info.value) and "\n" not in str(info.value)
