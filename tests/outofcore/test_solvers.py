"""The out-of-core core: sparse products into running sums, Lanczos, the many-fits ridge."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from conftest import random_binary

from dr_scale.logs.sparse import binary_csr
from dr_scale.outofcore import products, ridge
from dr_scale.outofcore.lanczos import leading_eigenpair
from dr_scale.outofcore.passes import PartSet, tree_nodes
from dr_scale.outofcore.products import add_transposed_product


# -- products -------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", ["scipy's in-place kernel", "public product"])
def test_add_transposed_product_adds_the_transposed_product_in_place(kernel, monkeypatch):
    if kernel == "public product":
        monkeypatch.setattr(products, "_csc_matvec", None)
    else:
        assert products._csc_matvec is not None  # the scipy this suite runs on has it
    A = random_binary(300, 40, 0.1, seed=5)
    A = binary_csr(A.indptr.astype(np.int32), A.indices.astype(np.int32), A.shape[1])
    y = np.random.default_rng(6).normal(size=300)
    out = np.random.default_rng(7).normal(size=40)
    expected = out + A.toarray().T @ y
    assert add_transposed_product(out, A, y) is out
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    block = out[10:30]  # a contiguous slice of a larger sum, as the per-fit blocks are
    add_transposed_product(block, A[:, :20], y)
    np.testing.assert_allclose(out[10:30], expected[10:30] + A[:, :20].toarray().T @ y, rtol=1e-12)


# -- Lanczos --------------------------------------------------------------------------------
@pytest.mark.parametrize("spread", [1.0, 0.01])  # well separated, or a top eigenvalue 1% above the next
def test_lanczos_finds_the_leading_eigenpair(spread):
    rng = np.random.default_rng(4)
    Q, _ = np.linalg.qr(rng.normal(size=(80, 80)))
    values = np.r_[np.linspace(0.0, 1.0, 79), 1.0 + spread]
    A = (Q * values) @ Q.T
    products = []
    theta, v = leading_eigenpair(lambda x: products.append(1) or A @ x, rng.normal(size=80), tol=1e-12)
    assert theta == pytest.approx(values[-1], rel=1e-12)
    assert np.linalg.norm(A @ v - theta * v) <= 1e-12 * theta * 10
    assert abs(v @ Q[:, -1]) == pytest.approx(1.0, abs=1e-10)
    assert len(products) <= (25 if spread == 1.0 else 70)  # it stops once the Ritz residual is small (19, 63 here)


# -- ridge ------------------------------------------------------------------------------------
def normal_equations(X, y, lam):
    """[b, w] from scipy.linalg.solve of the normal equations with an unpenalized intercept."""
    A = np.column_stack([np.ones(X.shape[0]), X])
    G = A.T @ A + lam * np.diag(np.r_[0.0, np.ones(X.shape[1])])
    return scipy.linalg.solve(G, A.T @ y, assume_a="pos")


@pytest.mark.parametrize("n", [5, 40, 2000])
def test_ridge_matches_the_normal_equations(n):
    X = random_binary(n, 80, 0.1, seed=n)
    y = np.random.default_rng(n).poisson(20, n) + 5.0 * X[:, :5].sum(axis=1).A1
    fitted = ridge.fit_in_memory(X, y, lam=2.0, rtol=1e-13)
    expected = normal_equations(X.toarray(), y, 2.0)
    assert fitted.converged.all()
    got = np.r_[fitted.intercept, fitted.coef[0]]
    assert np.linalg.norm(got - expected) <= 1e-8 * np.linalg.norm(expected)


def test_blocked_fits_equal_separate_fits_and_handle_empty_and_single_rows():
    X = random_binary(600, 50, 0.1, seed=5)
    y = np.random.default_rng(5).gamma(2.0, 10.0, 600)
    subsets = [np.arange(0, 300), np.arange(200, 600, 2), np.array([], dtype=int), np.array([7])]
    F, d = len(subsets), X.shape[1]
    stats = ridge.RidgeStats(np.array([s.size for s in subsets], float),
                             np.array([X[s].sum(axis=0).A1 for s in subsets]),
                             np.array([X[s].multiply(X[s]).sum(axis=0).A1 for s in subsets]),
                             np.array([y[s].sum() for s in subsets]),
                             np.array([X[s].T @ y[s] for s in subsets]))

    def gram(P):
        return np.array([X[s].T @ (X[s] @ P[k]) for k, s in enumerate(subsets)])

    fitted = ridge.fit(gram, stats, lam=1.5, rtol=1e-13)
    for k in (0, 1):
        expected = normal_equations(X[subsets[k]].toarray(), y[subsets[k]], 1.5)
        np.testing.assert_allclose(np.r_[fitted.intercept[k], fitted.coef[k]], expected, rtol=1e-8, atol=1e-10)
    assert fitted.intercept[2] == 0 and not fitted.coef[2].any()  # no rows: ρ̂ ≡ 0
    assert fitted.intercept[3] == pytest.approx(y[7]) and not fitted.coef[3].any()  # one row: ρ̂ ≡ y
    assert fitted.coef.shape == (F, d)
    with pytest.raises(ValueError, match="positive"):
        ridge.fit(gram, stats, lam=0.0)


# -- summing passes ---------------------------------------------------------------------------
@pytest.mark.parametrize("n_parts", [1, 2, 7, 13, 40])
def test_tree_nodes_are_contiguous_runs_of_near_equal_size(n_parts):
    for n_tasks in range(1, 50):
        nodes = tree_nodes(n_parts, n_tasks)
        assert len(nodes) == min(n_parts, n_tasks)
        assert nodes[0][0] == 0 and nodes[-1][1] == n_parts
        assert all(a[1] == b[0] for a, b in zip(nodes, nodes[1:]))
        widths = [hi - lo for lo, hi in nodes]
        assert min(widths) >= 1 and max(widths) <= 2 * -(-n_parts // len(nodes))


def pairwise(terms):
    """The summation tree's order written out: [lo, hi) = [lo, mid) + [mid, hi), mid = ⌊(lo + hi)/2⌋."""
    if len(terms) == 1:
        return terms[0]
    mid = len(terms) // 2
    return pairwise(terms[:mid]) + pairwise(terms[mid:])


@pytest.mark.slow
def test_a_sum_has_the_same_bits_for_any_number_of_tasks():
    import dask

    rng = np.random.default_rng(1)
    terms = [rng.normal(size=500) * 10.0 ** rng.integers(-9, 9, size=500) for _ in range(13)]
    parts = PartSet(terms)
    expected = pairwise(terms)
    assert not np.array_equal(expected, np.sum(terms, axis=0))  # the order shows in the bits
    for n_tasks in range(1, 16):
        with dask.config.set(num_workers=n_tasks):
            np.testing.assert_array_equal(parts.sum(np.multiply, 1.0), expected)
            np.testing.assert_array_equal(parts.accumulate(lambda total, part: part * 1.0), expected)
            total, derived = parts.sum_and_derive(lambda total, part: (part * 1.0, part.shape[0]))
            np.testing.assert_array_equal(total, expected)
            assert [d.compute() for d in derived.parts] == [500] * 13


@pytest.mark.parametrize("n_tasks", [1, 2, 5])
def test_pending_sums_wait_in_files_with_the_trees_bits_and_a_task_holds_one_array(tmp_path, monkeypatch, n_tasks):
    import dask

    from dr_scale.outofcore import passes

    monkeypatch.setattr(passes, "PARK_BYTES", 1000)  # every pending term of 500 floats is parked
    rng = np.random.default_rng(2)
    terms = [rng.normal(size=500) * 10.0 ** rng.integers(-9, 9, size=500) for _ in range(13)]
    parts = PartSet(terms, spill=str(tmp_path))
    made = []

    def add_term(total, part):
        """The part's term into ``total``, counting the arrays a task makes."""
        if total is None:
            made.append(1)
            total = np.zeros_like(part)
        total += part
        return total

    parked = []
    put = passes.Pending.put
    monkeypatch.setattr(passes.Pending, "put", lambda self, value: parked.append(put(self, value)) or parked[-1])
    with dask.config.set(num_workers=n_tasks, scheduler="sync"):
        np.testing.assert_array_equal(parts.accumulate(add_term), pairwise(terms))
        assert len(made) == n_tasks  # one per task, not one per level of its subtree
        files = sorted(tmp_path.iterdir())
        np.testing.assert_array_equal(parts.sum(np.multiply, 1.0), pairwise(terms))
        np.testing.assert_array_equal(parts.accumulate(add_term), pairwise(terms))
    assert any(isinstance(p, passes.Parked) for p in parked)
    depth = max(hi - lo for lo, hi in tree_nodes(13, n_tasks)).bit_length()
    assert 0 < len(files) <= n_tasks * depth  # a stack of files per task, not a file per pending sum
    assert sorted(tmp_path.iterdir()) == files  # overwritten by the later passes
