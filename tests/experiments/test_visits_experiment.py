"""The visits experiment end to end on a small generated set.

Checked against a direct in-memory computation of the same subsamples (principal
component by numpy.linalg.eigh, ridge by scipy.linalg.solve of the normal equations,
estimates by dr_scale.ope.estimators' IPS and DoublyRobust with the two-action encoding
a ∈ {0 = not sampled, 1 = sampled}, π ≡ 1); identical for 1 and 8 parts and on a
distributed LocalCluster; and through the command line.
"""

from __future__ import annotations

import json
import os
import posixpath
from pathlib import Path

import dask
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.linalg
from distributed import Client
from scipy.stats import norm

from dr_scale.cli import main
from dr_scale.experiments.visits.experiment import Settings, load_parts, run_experiment
from dr_scale.experiments.visits.sampler import logging_actions, memberships
from dr_scale.logs.sparse import features_to_csr
from dr_scale.logs.writing import write_parquet
from dr_scale.ope.estimators import IPS, DoublyRobust
from dr_scale.outofcore.passes import Spilled, spill_folder, task_count
from dr_scale.synthetic.visits import generate_visits

ROWS, FEATURES = 4000, 200
SETTINGS = Settings(fractions=(0.01, 0.05, 0.3), repetitions=6, seed=7, lam=5.0, rtol=1e-12)
PIPELINE = Path(__file__).resolve().parents[2] / "pipelines" / "visits.toml"


@pytest.fixture(scope="module")
def visits_sets(tmp_path_factory):
    """The same generated rows as 1 part and as 8 parts."""
    root = tmp_path_factory.mktemp("visits")
    one = str(root / "one")
    generate_visits(one, rows=ROWS, features=FEATURES, seed=11, rows_per_part=ROWS)
    table = pq.read_table(posixpath.join(one, "part-00000.parquet"))
    eight = str(root / "eight")
    bounds = np.linspace(0, ROWS, 9).astype(int)
    for i in range(8):
        write_parquet(table.slice(bounds[i], bounds[i + 1] - bounds[i]), posixpath.join(eight, f"part-{i:05d}.parquet"))
    return one, eight, table


@pytest.fixture(scope="module")
def result_one(visits_sets):
    return run_experiment(load_parts(visits_sets[0]), SETTINGS)


def direct(table: pa.Table, s: Settings):
    """The experiment computed in memory, subsample by subsample."""
    X = features_to_csr(table.column("features"), FEATURES).toarray()
    v = table.column("visits").to_numpy().astype(float)
    row_id = table.column("row_id").to_numpy()
    values, vectors = np.linalg.eigh(np.cov(X, rowvar=False, bias=True))
    xbar = vectors[:, -1] * np.sign(vectors[:, -1].sum())
    t = X @ xbar
    m, mbar = t.min(), t.mean()
    p = np.clip(norm.pdf(t, m + (mbar - m) / 3, (mbar - m) / 4), 1e-300, 1.0)
    ips, dr = [], []
    for fi, f in enumerate(s.fractions):
        rows, reps = memberships(row_id, f, s.repetitions, s.seed, fi)
        a = logging_actions(p[rows], row_id[rows], reps, s.seed, fi)
        for r in range(s.repetitions):
            S, aS = rows[reps == r], a[reps == r]
            sampled = S[aS]
            if sampled.size:
                A = np.column_stack([np.ones(sampled.size), X[sampled]])
                G = A.T @ A + s.lam * np.diag(np.r_[0.0, np.ones(FEATURES)])
                coef = scipy.linalg.solve(G, A.T @ v[sampled], assume_a="pos")
            else:
                coef = np.zeros(FEATURES + 1)
            rho = coef[0] + X[S] @ coef[1:]
            arrays = dict(reward=aS * v[S], action=aS.astype(int), propensity=np.where(aS, p[S], 1 - p[S]),
                          target_probs=np.tile([0.0, 1.0], (S.size, 1)))
            ips.append(IPS().estimate(**arrays).value)
            dr.append(DoublyRobust().estimate(**arrays, reward_hat=np.column_stack([np.zeros(S.size), rho])).value)
    return np.array(ips), np.array(dr), v.mean(), p


def test_estimates_match_a_direct_in_memory_computation(visits_sets, result_one):
    ips, dr, truth, p = direct(visits_sets[2], SETTINGS)
    res = result_one
    assert res.truth == pytest.approx(truth, rel=1e-12)
    assert res.calibration["mean_propensity"] == pytest.approx(p.mean(), rel=1e-8)
    np.testing.assert_allclose(res.ips, ips, rtol=1e-9)
    np.testing.assert_allclose(res.dr, dr, rtol=1e-7)
    # per-fraction aggregates from the direct estimates
    R = SETTINGS.repetitions
    for fi, row in enumerate(res.per_fraction()):
        err = dr[fi * R:(fi + 1) * R] - truth
        assert row["dr_bias"] == pytest.approx(err.mean(), rel=1e-6, abs=1e-9)
        assert row["dr_rmse"] == pytest.approx(np.sqrt((err ** 2).mean()), rel=1e-6)
        assert row["ips_rmse"] ** 2 == pytest.approx(row["ips_bias"] ** 2 + row["ips_std"] ** 2, rel=1e-9)


def test_identical_for_one_and_eight_parts(visits_sets, result_one):
    eight = run_experiment(load_parts(visits_sets[1]), SETTINGS)
    assert eight.n_parts == 8 and result_one.n_parts == 1
    np.testing.assert_array_equal(eight.subsample_size, result_one.subsample_size)
    np.testing.assert_array_equal(eight.sampled, result_one.sampled)
    np.testing.assert_allclose(eight.ips, result_one.ips, rtol=1e-12)
    np.testing.assert_allclose(eight.dr, result_one.dr, rtol=1e-9)


@pytest.mark.slow
def test_identical_bits_for_any_number_of_threads(visits_sets):
    """Summing passes split into as many tasks as threads, the ridge into as many blocks of fits: same bits."""
    import dask

    runs = []
    for n_threads in (1, 3, 8):
        with dask.config.set(num_workers=n_threads):
            runs.append(run_experiment(load_parts(visits_sets[1]), SETTINGS))
    for other in runs[1:]:
        for name in ("ips", "dr", "r2"):
            np.testing.assert_array_equal(getattr(other, name), getattr(runs[0], name))
        assert other.ridge_iterations == runs[0].ridge_iterations
        assert other.calibration == runs[0].calibration


def test_identical_when_the_parts_are_spilled_to_disk(visits_sets, result_one, tmp_path):
    with spill_folder(str(tmp_path)) as folder:
        parts = load_parts(visits_sets[1], spill=folder)
        assert all(isinstance(p.compute(), Spilled) for p in parts.parts)  # handles, not arrays, in memory
        spilled = run_experiment(parts, SETTINGS)
        # each part's CSR, its sampled memberships' lifted CSR, and that CSR's piece for each block of fits
        assert len(os.listdir(folder)) == 8 * (2 + min(task_count(), SETTINGS.n_fits))
    assert [n for n in os.listdir(tmp_path) if not n.endswith("global.lock")] == []  # the spill folder is removed
    memory = run_experiment(load_parts(visits_sets[1]), SETTINGS)
    np.testing.assert_array_equal(spilled.subsample_size, memory.subsample_size)
    np.testing.assert_array_equal(spilled.ips, memory.ips)
    np.testing.assert_array_equal(spilled.dr, memory.dr)
    np.testing.assert_allclose(spilled.dr, result_one.dr, rtol=1e-9)


def test_identical_on_a_distributed_local_cluster(visits_sets, result_one, local_cluster):
    with Client(local_cluster, set_as_default=False) as client:
        res = run_experiment(load_parts(visits_sets[1], client=client), SETTINGS)
    np.testing.assert_array_equal(res.subsample_size, result_one.subsample_size)
    np.testing.assert_allclose(res.dr, result_one.dr, rtol=1e-9)


@pytest.mark.slow
def test_command_line_run_and_generate(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DR_SCALE_CACHE", str(tmp_path / "cache"))  # generate's spill folder goes there
    out = tmp_path / "out"
    assert main(["run", str(PIPELINE), "--no-progress", "--set", "rows=3000", "--set", f"features={FEATURES}",
                 "--set", "repetitions=3", "--set", f"cache={tmp_path / 'cache'}", "--set", f"out={out}"]) == 0
    res = json.loads((out / "results.json").read_text())
    assert [r["fraction"] for r in res["per_fraction"]] == [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05]
    assert res["rows"] == 3000 and len(res["per_fit"]["dr"]) == 18
    for name in ("results.csv", "rmse.png", "bias.png", "summary.md"):
        assert (out / name).stat().st_size > 0
    assert (out / "rmse.png").read_bytes()[:4] == b"\x89PNG"
    summary = (out / "summary.md").read_text()
    better = sum(r["dr_rmse"] < r["ips_rmse"] for r in res["per_fraction"])
    assert f"at {better} of 6 fractions" in summary
    assert f"{100 * res['mean_dr_rmse_reduction']:.1f}% on average" in summary
    assert f"({3000 / 3854689:.3g} × the paper's N = 3,854,689" in summary
    for r in res["per_fraction"]:
        assert f"| {r['fraction']:g} | {r['mean_subsample']:.1f} | {r['mean_sampled']:.1f} |" in summary
    assert f"DR's mean rmse reduction {100 * res['mean_dr_rmse_reduction']:.1f}%" in capsys.readouterr().out
    assert main(["generate", "visits", "--rows", "2000", "--features", "120", "--out", str(tmp_path / "gen"),
                 "--no-progress"]) == 0
    visits = pq.read_table(tmp_path / "gen", columns=["visits"]).column("visits").to_numpy()
    assert f"true mean visits      {visits.mean():8.3f}" in capsys.readouterr().out
    assert main(["run", str(PIPELINE), "--no-progress", "--set", "bogus=1"]) == 2


def test_logged_view_is_a_valid_log_matching_the_full_data_pass(visits_sets, tmp_path, capsys):
    from dr_scale.experiments.visits.experiment import fit_sampler
    from dr_scale.experiments.visits.logged import full_data_sums, logging_draw, write_logged_view
    from dr_scale.logs.reading import read_log
    from dr_scale.ope.estimators import IPS

    parts = load_parts(visits_sets[1])
    comp, m, mbar = fit_sampler(parts)
    out = str(tmp_path / "logged")
    assert write_logged_view(parts, out, comp.vector, m, mbar, seed=3) == ROWS
    log = read_log(out, n_features=FEATURES, n_actions=2)  # validates the core contract
    assert sum(len(p) for p in log) == ROWS
    reward = np.concatenate([p.reward for p in log])
    action = np.concatenate([p.action for p in log])
    propensity = np.concatenate([p.propensity for p in log])
    est = IPS().estimate(reward=reward, action=action, propensity=propensity,
                         target_probs=np.tile([0.0, 1.0], (ROWS, 1)))
    # the full-data pass gives the same IPS, and DR with ρ̂ ≡ 0 equals IPS
    sums = parts.sum(full_data_sums, comp.vector, m, mbar, np.zeros(FEATURES), 0.0, 3)
    assert sums[1] / sums[0] == pytest.approx(est.value, rel=1e-12)
    assert sums[2] == pytest.approx(sums[1], rel=1e-12)
    # and with a ρ̂, DR's sum is Σ ρ̂ + a (v − ρ̂)/p computed directly from dense rows
    coef = np.random.default_rng(4).normal(0.0, 2.0, FEATURES)
    direct = 0.0
    for part in dask.compute(*parts.parts):
        p, a = logging_draw(part, comp.vector, m, mbar, 3)
        rho = part.X.toarray() @ coef + 5.0
        direct += np.sum(rho + a * (part.visits - rho) / p)
    dr = parts.sum(full_data_sums, comp.vector, m, mbar, coef, 5.0, 3)[2]
    assert dr == pytest.approx(direct, rel=1e-12) and dr != pytest.approx(sums[2], rel=1e-3)
    assert main(["evaluate", out, "--policy", "constant:1", "--no-progress"]) == 0
    assert "IPS" in capsys.readouterr().out
