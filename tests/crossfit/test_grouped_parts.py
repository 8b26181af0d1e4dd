"""The reward-model fitter's parts grouped by (fold, action) and ρ̂ cross-fitted on them, against direct in-memory
computations."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from dr_scale.crossfit.engine import search_lambda
from dr_scale.crossfit.settings import FitSettings
from dr_scale.outofcore import ridge
from dr_scale.outofcore.passes import PartSet
from dr_scale.outofcore.products import add_transposed_products
from dr_scale.reward import fitting as grouped
from dr_scale.reward.fitting import Fits, LogPart
from dr_scale.reward.models import fold_of

D, K, FOLDS, SEED = 12, 3, 3, 5


def log_part(n: int, first_row: int, seed: int, values: bool) -> LogPart:
    rng = np.random.default_rng(seed)
    X = sp.random(n, D, density=0.3, format="csr", random_state=rng)
    X.data = rng.uniform(0.5, 2.0, X.nnz) if values else np.ones(X.nnz)
    return LogPart(np.arange(first_row, first_row + n, dtype=np.int64), X.indptr, X.indices,
                   X.data if values else None, rng.integers(0, K, n), rng.random(n), rng.uniform(0.2, 1.0, n))


@pytest.fixture(params=[False, True], ids=["binary", "values"])
def parts(request):
    raw = [log_part(70, 0, 1, request.param), log_part(50, 70, 2, request.param)]
    made = [grouped.grouped(p, fold_of(p.row_id, FOLDS, SEED) * K + p.action, FOLDS * K) for p in raw]
    X = sp.vstack([p.matrix(D) for p in raw]).tocsr()
    cat = {f: np.concatenate([getattr(p, f) for p in raw]) for f in ("row_id", "action", "reward")}
    return made, X, cat


def test_rows_are_grouped_by_fold_and_action_and_keep_their_features(parts):
    made, X, cat = parts
    for part in made:
        fold = fold_of(part.row_id, FOLDS, SEED)
        block = fold * K + part.action
        assert np.all(np.diff(block) >= 0)
        for b in range(FOLDS * K):
            rows = np.flatnonzero(block == b)
            assert (part.start[b], part.start[b + 1]) == (rows[0], rows[-1] + 1) if rows.size else True
            np.testing.assert_array_equal(part.block(b, D).toarray(), X[part.row_id[rows]].toarray())
        assert np.all(np.diff(part.row_id[block == block[0]]) > 0)  # stable: row order kept within a block


def fit_rows(cat, j, a):
    """The rows of fold model j of action a: logged a, outside fold j (j = FOLDS: the full-data model, all folds)."""
    return np.flatnonzero((cat["action"] == a) & (fold_of(cat["row_id"], FOLDS, SEED) != j))


def test_fold_statistics_and_gram_products_equal_direct_sums(parts):
    made, X, cat = parts
    stats = Fits(FOLDS, K, full=True).stats(grouped.block_sums(PartSet(made), D))
    P = np.random.default_rng(3).standard_normal(((FOLDS + 1) * K, D))
    fits = Fits(FOLDS, K, full=True)
    gram = PartSet(made).accumulate(grouped.add_fit_gram, P, fits, np.ones(fits.count, bool))
    for j in range(FOLDS + 1):  # the fold models, then the full-data models (j = FOLDS)
        for a in range(K):
            f, rows = j * K + a, fit_rows(cat, j, a)
            Xs, y = X[rows], cat["reward"][rows]
            assert stats.n[f] == rows.size and stats.sy[f] == pytest.approx(y.sum())
            np.testing.assert_allclose(stats.sx[f], np.asarray(Xs.sum(axis=0)).ravel(), atol=1e-12)
            np.testing.assert_allclose(stats.sxx_diag[f], np.asarray(Xs.multiply(Xs).sum(axis=0)).ravel(), atol=1e-12)
            np.testing.assert_allclose(stats.xy[f], Xs.T @ y, atol=1e-12)
            np.testing.assert_allclose(gram[f], Xs.T @ (Xs @ P[f]), atol=1e-10)


def test_fold_and_full_data_models_equal_in_memory_ridge_and_out_of_fold_errors_are_direct(parts):
    made, X, cat = parts
    partset = PartSet(made)
    fits = Fits(FOLDS, K, full=True)
    fit, intercept = grouped.solve(partset, fits.stats(grouped.block_sums(partset, D)), 2.0, fits, rtol=1e-12,
                                   max_iter=200)
    for j in range(FOLDS + 1):
        for a in range(K):
            rows = fit_rows(cat, j, a)
            direct = ridge.fit_in_memory(X[rows], cat["reward"][rows], 2.0, rtol=1e-12)
            np.testing.assert_allclose(fit.coef[j * K + a], direct.coef[0], atol=1e-8)
            assert intercept[j * K + a] == pytest.approx(direct.intercept[0], abs=1e-8)
    fold = fold_of(cat["row_id"], FOLDS, SEED)
    coef = fit.coef[:FOLDS * K]
    sse, sy, syy = partset.sum(grouped.out_of_fold_errors, coef, intercept[:FOLDS * K], FOLDS)
    predicted = np.array([X[i] @ coef[fold[i] * K + cat["action"][i]] + intercept[fold[i] * K + cat["action"][i]]
                          for i in range(len(fold))]).ravel()
    residual = cat["reward"] - predicted
    np.testing.assert_allclose(sse, np.bincount(cat["action"], residual ** 2, K))
    np.testing.assert_allclose(sy, np.bincount(cat["action"], cat["reward"], K))


@pytest.mark.slow
def test_lambda_is_the_first_minimum_of_the_out_of_fold_error_scanning_down_the_grid(parts):
    made, X, cat = parts
    partset = PartSet(made)
    fits = Fits(FOLDS, K, full=False)
    stats = fits.stats(grouped.block_sums(partset, D))
    grid = (0.01, 1.0, 1e6)
    settings = FitSettings(folds=FOLDS, seed=SEED, lam_grid=grid, rtol=1e-10, max_iter=200)
    _, search, passes = search_lambda(grouped.RidgeObjective(), partset, D, K, settings, progress=False)
    best = search["chosen"]
    errors = []
    for lam in grid:
        fit, intercept = grouped.solve(partset, stats, lam, fits, rtol=1e-10, max_iter=200)
        errors.append(partset.sum(grouped.out_of_fold_errors, fit.coef, intercept, FOLDS)[0].sum())
    scanned = [2, 1] if errors[1] > errors[2] else [2, 1, 0]
    for i in range(3):
        got = search["out_of_fold_sse"][i]
        assert (got is None) == (i not in scanned)
        if got is not None:
            assert sum(got) == pytest.approx(errors[i])
    assert best == min(scanned, key=lambda i: errors[i]) and passes > len(scanned)
    assert search["sample_rows"] == len(cat["row_id"])


def test_an_action_never_logged_in_a_fit_gets_the_pooled_mean():
    part = log_part(60, 0, 4, False)
    part.action[:] = np.where(part.action == 2, 0, part.action)
    made = grouped.group(part, 2, K, SEED)
    partset = PartSet([made])
    fits = Fits(2, K, full=True)
    fit, intercept = grouped.solve(partset, fits.stats(grouped.block_sums(partset, D)), 1.0, fits, rtol=1e-10,
                                   max_iter=100)
    fold = fold_of(part.row_id, 2, SEED)
    for j in range(2):
        assert intercept[j * K + 2] == pytest.approx(part.reward[fold != j].mean())
        assert not fit.coef[j * K + 2].any()
    assert intercept[2 * K + 2] == pytest.approx(part.reward.mean())


def test_sample_keeps_the_grouping_and_is_keyed_by_row_id(parts):
    made, X, cat = parts
    sample = grouped.sample_of(made[0], 0.5, D, SEED)
    assert 0 < len(sample) < len(made[0])
    again = grouped.sample_of(made[0], 0.5, D, SEED)
    np.testing.assert_array_equal(sample.row_id, again.row_id)
    for b in range(FOLDS * K):
        rows = np.isin(made[0].row_id[made[0].start[b]:made[0].start[b + 1]], sample.row_id)
        np.testing.assert_array_equal(sample.row_id[sample.start[b]:sample.start[b + 1]],
                                      made[0].row_id[made[0].start[b]:made[0].start[b + 1]][rows])


def test_transposed_products_add_into_the_output():
    rng = np.random.default_rng(0)
    A = sp.random(40, 9, density=0.3, format="csr", random_state=rng)
    Y, out = rng.standard_normal((40, 4)), rng.standard_normal((9, 4))
    expected = out + A.T @ Y
    assert add_transposed_products(out, A, Y) is out
    np.testing.assert_allclose(out, expected, atol=1e-12)


def test_concatenated_parts_keep_each_blocks_rows_in_order_on_the_features_present(parts):
    made, X, cat = parts
    one, m = grouped.concatenated(made, FOLDS, K, SEED)
    present = np.flatnonzero(np.asarray(X.sum(axis=0)).ravel())
    assert len(one) == len(made[0]) + len(made[1]) and m == present.size
    for b in range(FOLDS * K):
        expected = np.concatenate([p.row_id[p.start[b]:p.start[b + 1]] for p in made])
        np.testing.assert_array_equal(one.row_id[one.start[b]:one.start[b + 1]], expected)
        np.testing.assert_array_equal(one.block(b, m).toarray(), X[expected][:, present].toarray())
