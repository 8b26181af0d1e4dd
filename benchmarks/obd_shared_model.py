"""The shared ridge model against the per-action model on the Open Bandit Dataset sample with its item catalogue.

    PYTHONPATH=. python benchmarks/obd_shared_model.py [HASH_BITS]

Imports tests/fixtures/obd (10,000 rows, 80 items, uniform logging; obd.toml with ``hash_bits`` set to
HASH_BITS, default 10, so that d · D_A interactions stay small) into a temporary folder, splits its rows
by the keyed train/test split (``LogFilter(split=…)``, 20% test) and fits on the training rows:

* the per-action models, ridge ρ̂_a(x) = b_a + x·w_a and logistic σ(b_a + x·w_a) (``fit_reward_model``,
  λ auto: the fitter's own out-of-fold search), 80 × (d + 1) parameters each;
* the shared ridge model ρ̂(x, a) = b + x·β_x + f_a·β_f + x·B·f_a (``fit_shared_ridge``) over the catalogue's
  hashed item features (the columns some item has), λ chosen from a grid by the squared error on a
  keyed 20% of the training rows, then refitted on all of them;
* the training rows' mean click rate (the constant).

Prints each model's parameter count and its held-out squared error and log loss (predictions clipped to
[1e-4, 1 − 1e-4]) on the test rows, and the shared model's paired differences from the others with their
standard errors (the test rows hold about ten clicks: the differences are small against their errors).
"""

from __future__ import annotations

import pathlib
import re
import shutil
import sys
import tempfile

import numpy as np

from dr_scale.logs.contract import read_catalogue, read_log
from dr_scale.logs.filters import LogFilter
from dr_scale.logs.importer import import_log
from dr_scale.reward.fitting import FitSettings, fit_reward_model
from dr_scale.reward.shared import fit_shared_ridge

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "obd"
GRID = (1.0, 10.0, 100.0, 1000.0, 1e4, 1e5)
CLIP = 1e-4


def losses(reward: np.ndarray, predicted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the squared error and the log loss of the clipped prediction."""
    p = np.clip(predicted, CLIP, 1 - CLIP)
    return (reward - predicted) ** 2, -(reward * np.log(p) + (1 - reward) * np.log(1 - p))


def errors(reward: np.ndarray, predicted: np.ndarray) -> tuple[float, float]:
    """(mean squared error, mean log loss of the clipped predictions)."""
    se, ll = losses(reward, predicted)
    return float(se.mean()), float(ll.mean())


def main(hash_bits: int = 10) -> None:
    # a fixed folder: the import keys each row's row_id by its file's path, so the keyed split is the same each run
    folder = pathlib.Path(tempfile.gettempdir()) / "dr-scale-obd-shared"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    try:
        for name in ("all.csv.gz", "item_context.csv"):
            shutil.copy(FIXTURES / name, folder / name)
        spec = re.sub(r"hash_bits = \d+", f"hash_bits = {hash_bits}", (FIXTURES / "obd.toml").read_text())
        (folder / "obd.toml").write_text(spec)
        logs = str(folder / "logs")
        import_log(str(folder / "all.csv.gz"), str(folder / "obd.toml"), logs)
        catalogue = read_catalogue(logs)
        used = np.flatnonzero(np.asarray(abs(catalogue.features).sum(axis=0)).ravel() > 0)
        F = catalogue.features[:, used].toarray()  # the item features some item has: D_A columns
        train = read_log(logs, log_filter=LogFilter(split="train"))
        test = read_log(logs, log_filter=LogFilter(split="test"))
        d = 2 ** hash_bits
        X_test = _stack([p.X for p in test], d)
        a_test = np.concatenate([p.action for p in test])
        r_test = np.concatenate([p.reward for p in test])
        n_train = sum(len(p) for p in train)

        rows = {}
        for kind in ("ridge", "logistic"):  # per action, λ auto (the fitter's own out-of-fold search)
            model = fit_reward_model(LogFilter(split="train").on(logs), FitSettings(lam="auto", model=kind))
            rows[f"per-action {kind}"] = (model.coef.size + model.intercept.size,
                                          model.predict(X_test)[np.arange(len(a_test)), a_test],
                                          f"λ = {model.metadata['lam']:g}")

        inner_fit = list(train)
        scores = {}
        for lam in GRID:  # λ by a keyed 20% of the training rows (row_id mod 5), fitted on the other 80%
            model = fit_shared_ridge(lambda: [_rows(p, p.row_id % 5 != 0) for p in inner_fit], F, d, lam=lam,
                                     tol=1e-8)
            held = [_rows(p, p.row_id % 5 == 0) for p in inner_fit]
            pred = np.concatenate([model.predict_pairs(h.X, h.action[:, None])[:, 0] for h in held])
            scores[lam] = errors(np.concatenate([h.reward for h in held]), pred)[0]
        lam = min(scores, key=scores.get)
        shared = fit_shared_ridge(lambda: train, F, d, lam=lam, tol=1e-8)
        size = 1 + d + F.shape[1] + d * F.shape[1]
        rows["shared ridge"] = (size, shared.predict_pairs(X_test, a_test[:, None])[:, 0],
                                f"λ = {lam:g} of {GRID}, D_A = {F.shape[1]}, {shared.metadata['passes']} passes")
        mean = sum(float(p.reward.sum()) for p in train) / n_train
        rows["constant (training mean)"] = (1, np.full(len(r_test), mean), "")

        print(f"OBD sample, hash_bits = {hash_bits} (d = {d}), {catalogue.n_actions} items; "
              f"{n_train} training rows, {len(r_test)} test rows ({int(r_test.sum())} clicks)")
        print(f"{'model':<26} {'parameters':>10} {'squared error':>14} {'log loss':>9}  notes")
        for name, (count, predicted, note) in rows.items():
            se, ll = errors(r_test, predicted)
            print(f"{name:<26} {count:>10} {se:>14.6f} {ll:>9.5f}  {note}")
        n = len(r_test)
        for name, other in (("shared ridge", "per-action ridge"), ("shared ridge", "per-action logistic"),
                            ("shared ridge", "constant (training mean)")):
            base = losses(r_test, rows[other][1])
            diff = [m - b for m, b in zip(losses(r_test, rows[name][1]), base, strict=True)]
            print(f"{name} − {other}, paired over the test rows: squared error "
                  f"{diff[0].mean():+.6f} ± {diff[0].std(ddof=1) / np.sqrt(n):.6f}, log loss "
                  f"{diff[1].mean():+.5f} ± {diff[1].std(ddof=1) / np.sqrt(n):.5f} (± one standard error)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _stack(matrices, d):
    import scipy.sparse as sp

    return sp.vstack([sp.csr_matrix((m.data, m.indices, m.indptr), shape=(m.shape[0], d)) for m in matrices]).tocsr()


def _rows(part, keep):
    """The partition's rows where ``keep``."""
    import dataclasses

    idx = np.flatnonzero(keep)
    return dataclasses.replace(part, row_id=part.row_id[idx], X=part.X[idx], action=part.action[idx],
                               reward=part.reward[idx], propensity=part.propensity[idx], table=part.table.take(idx))


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:2]))
