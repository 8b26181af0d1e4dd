"""The visits experiment's pieces: generator, sampler formula, keyed memberships, principal component, part reading."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_binary
from scipy.stats import norm

from dr_scale.core import keyed_random
from dr_scale.experiments.visits.data import part_from_arrays
from dr_scale.experiments.visits.pca import RowSample, first_component
from dr_scale.experiments.visits.sampler import logging_actions, memberships, propensity
from dr_scale.logs.sparse import features_to_csr
from dr_scale.outofcore.passes import PartSet
from dr_scale.synthetic import visits as generate


def _identity(x):
    return x




# -- generator ----------------------------------------------------------------------------
@pytest.mark.parametrize("cdf", [generate.global_model(0, 5000).cdf,
                                 np.array([[1e-7, 2e-7, 3e-7, 0.5, 1.0], [0.2, 0.4, 0.6, 0.8, 1.0]])])
def test_feature_draws_are_the_inverse_cdf(cdf):
    gm = generate.GlobalModel(cdf, np.zeros(cdf.shape[1]))
    u = np.r_[np.random.default_rng(0).random(200_000), 0.0, cdf.ravel(), np.nextafter(cdf.ravel(), 0),
              np.nextafter(1.0, 0)]
    for g in range(cdf.shape[0]):
        np.testing.assert_array_equal(gm.draw_features(g, u),
                                      np.minimum(np.searchsorted(cdf[g], u, side="right"), cdf.shape[1] - 1))


def test_generated_parts_hold_distinct_sorted_features_and_depend_on_seed_and_part_only():
    gm = generate.global_model(3, 200)
    table = generate.generate_part(3, 2, 1000, 500, gm)
    assert table.column("row_id").to_pylist() == list(range(1000, 1500))
    assert table.schema.metadata[b"dr_scale.n_features"] == b"200"
    X = features_to_csr(table.column("features"), 200)
    keys = np.repeat(np.arange(500), np.diff(X.indptr)) * 200 + X.indices
    assert np.all(np.diff(keys) > 0)  # each row's features distinct and in increasing order
    assert X.nnz > 500 * 20
    assert table.equals(generate.generate_part(3, 2, 1000, 500, generate.global_model(3, 200)))
    assert not table.column("visits").equals(generate.generate_part(3, 1, 1000, 500, gm).column("visits"))


# -- sampler ------------------------------------------------------------------------------
def test_propensity_matches_the_papers_formula():
    t = np.random.default_rng(0).normal(0.3, 0.7, 10_000)
    m, mbar = t.min(), t.mean()
    direct = np.minimum(norm.pdf(t, loc=m + (mbar - m) / 3, scale=(mbar - m) / 4), 1.0)
    got = propensity(t, m, mbar)
    keep = direct > 1e-250
    np.testing.assert_allclose(got[keep], direct[keep], rtol=1e-12)
    gaussian = np.exp(-0.5 * ((t - (m + (mbar - m) / 3)) / ((mbar - m) / 4)) ** 2)
    np.testing.assert_allclose(propensity(t, m, mbar, "gaussian")[gaussian > 1e-250], gaussian[gaussian > 1e-250],
                               rtol=1e-12)
    assert np.all((got > 0) & (got <= 1))
    with pytest.raises(ValueError, match="kernel"):
        propensity(t, m, mbar, "box")


def test_memberships_are_iid_bernoulli_and_independent_of_partitioning_and_repetitions():
    row_id = np.arange(1_000_000, 1_200_000, dtype=np.int64)
    f, R = 0.01, 100
    rows, reps = memberships(row_id, f, R, seed=3, fraction_index=2)
    n = row_id.size
    # total count: Binomial(n R, f); each repetition's count: Binomial(n, f) — 4.5 standard errors
    assert abs(rows.size - n * R * f) < 4.5 * np.sqrt(n * R * f * (1 - f))
    per_rep = np.bincount(reps, minlength=R)
    assert np.all(np.abs(per_rep - n * f) < 4.5 * np.sqrt(n * f * (1 - f)) + 1)
    # pairs of repetitions are independent: co-membership rate f² (4.5 s.e.)
    both = np.intersect1d(rows[reps == 0], rows[reps == 1]).size
    assert abs(both - n * f * f) < 4.5 * np.sqrt(n * f * f) + 1
    # the same draws for any split of the rows, and repetition r < 50 does not depend on R
    r1, p1 = memberships(row_id[:70_000], f, R, 3, 2)
    r2, p2 = memberships(row_id[70_000:], f, R, 3, 2)
    split_rows, split_reps = np.r_[r1, r2 + 70_000], np.r_[p1, p2]
    assert np.all(np.diff(reps) >= 0)  # grouped by repetition
    order, split_order = np.lexsort((rows, reps)), np.lexsort((split_rows, split_reps))  # compared as sets
    np.testing.assert_array_equal(split_rows[split_order], rows[order])
    np.testing.assert_array_equal(split_reps[split_order], reps[order])
    r50, p50 = memberships(row_id, f, 50, 3, 2)
    np.testing.assert_array_equal(r50, rows[reps < 50])
    np.testing.assert_array_equal(p50, reps[reps < 50])
    # other seeds and fraction indices give other subsamples
    assert not np.array_equal(memberships(row_id, f, R, 4, 2)[0][:100], rows[:100])


def test_logging_draws_are_bernoulli_p_and_keyed_by_repetition():
    row_id = np.arange(300_000, dtype=np.int64)
    p = np.full(row_id.size, 0.3)
    reps = row_id % 3
    a = logging_actions(p, row_id, reps, seed=1, fraction_index=0)
    assert abs(a.mean() - 0.3) < 4.5 * np.sqrt(0.21 / a.size)
    # the draw of a row depends on its repetition, not on the other rows
    sub = slice(1000, 1100)
    np.testing.assert_array_equal(logging_actions(p[sub], row_id[sub], reps[sub], 1, 0), a[sub])
    # one vectorised draw with per-row stream keys equals one keyed draw per repetition
    for r in range(3):
        np.testing.assert_array_equal(a[reps == r], keyed_random.bernoulli(p[reps == r], row_id[reps == r], 1,
                                                                           "logging", 0, r))



@pytest.mark.parametrize("column, values, reason, row", [
    ("visits", [1.0, -2.0, 3.0], "visits must be finite and non-negative", 11),
    ("visits", [1.0, None, 3.0], "null values", 11),
    ("row_id", [10, None, 12], "null values", None),
    ("features", [[0, 1], [2, 7], [3]], "feature index out of range [0, 5)", 11),
    ("features", [[0, 1], None, [3]], "null feature lists", 11),
])
def test_a_bad_part_is_an_error_naming_file_column_and_row(tmp_path, column, values, reason, row):
    import fsspec
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dr_scale.experiments.visits.data import read_visits_part
    from dr_scale.logs.contract import LogDataError

    data = {"row_id": [10, 11, 12], "features": [[0, 1], [2], [3]], "visits": [1.0, 2.0, 3.0], column: values}
    path = str(tmp_path / "part-00000.parquet")
    pq.write_table(pa.table({"row_id": pa.array(data["row_id"], pa.int64()),
                             "features": pa.array(data["features"], pa.list_(pa.int32())),
                             "visits": pa.array(data["visits"], pa.float64())}), path)
    with pytest.raises(LogDataError) as err:
        read_visits_part(fsspec.filesystem("file"), path, 5)
    assert (err.value.source, err.value.column, err.value.reason, err.value.row_id) == (path, column, reason, row)
    assert path in str(err.value) and f"column '{column}'" in str(err.value)

# -- principal component -------------------------------------------------------------------------
def test_first_component_matches_eigh_of_the_dense_covariance():
    X = random_binary(3000, 60, 0.08, seed=1)
    parts = [part_from_arrays(np.arange(i, i + 500), X[i:i + 500], np.zeros(500)) for i in range(0, 3000, 500)]
    comp = first_component(PartSet.build(_identity, [(p,) for p in parts]), tol=1e-12)
    dense = X.toarray()
    values, vectors = np.linalg.eigh(np.cov(dense, rowvar=False, bias=True))
    expected = vectors[:, -1] * np.sign(vectors[:, -1].sum())
    assert comp.variance == pytest.approx(values[-1], rel=1e-10)
    np.testing.assert_allclose(comp.vector, expected, atol=1e-8)
    assert comp.vector.sum() > 0 and np.linalg.norm(comp.vector) == pytest.approx(1.0)


def test_the_lanczos_start_sample_is_the_same_for_any_partitioning():
    X = random_binary(3000, 60, 0.08, seed=2)
    row_id = np.random.default_rng(3).permutation(10**6)[:3000]
    keys = keyed_random.uniform(row_id, 0, "principal-component-start")
    whole = RowSample.of(400, keys, X)
    merged = sum((RowSample.of(400, keys[i:i + 700], X[i:i + 700]) for i in range(700, 3000, 700)),
                 RowSample.of(400, keys[:700], X[:700]))
    expected = np.argsort(keys)[:400]  # the 400 rows with the smallest keys, in key order
    for sample in (whole, merged):
        np.testing.assert_array_equal(sample.keys, keys[expected])
        assert (sample.X != X[expected]).nnz == 0
