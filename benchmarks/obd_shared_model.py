"""The shared ridge model against the per-action models on the Open Bandit Dataset sample with its item catalogue.

    PYTHONPATH=. python benchmarks/obd_shared_model.py [HASH_BITS] [FOLDS]

Imports tests/fixtures/obd (10,000 rows, 80 items, uniform logging; obd.toml with ``hash_bits`` set to
HASH_BITS, default 10, so that the d · D_A interactions stay small) into a temporary folder and
cross-validates over FOLDS (default 5) folds of the rows (row_id mod FOLDS): each fold's rows are
predicted by models fitted on the other folds' rows (written as a log with the catalogue),

* the per-action models, ridge ρ̂_a(x) = b_a + x·w_a and logistic σ(b_a + x·w_a) (``fit_reward_model``,
  λ auto: the fitter's own out-of-fold search), 80 × (d + 1) parameters each;
* the shared models over the log's catalogue (``fit_shared_model``): ridge ρ̂(x, a) = b + x·β_x + f_a·β_f +
  x·B·f_a and logistic σ(b + x·β_x + f_a·β_f + x·B·f_a), λ auto from GRID (the fitter's own out-of-fold
  squared error or log loss on 5 keyed folds of the training rows); their parameters counted over the item
  features some item has (the others' weights are 0);
* the training rows' mean click rate (the constant).

Every row is thus predicted once, out of fold. Prints each model's parameter count, its squared error
and log loss (predictions clipped to [1e-4, 1 − 1e-4]) over the 10,000 rows, and the shared model's
paired differences from the others with their standard errors (the sample has a few dozen clicks).
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
import shutil
import sys
import tempfile

import numpy as np
import pyarrow.parquet as pq

from dr_scale.logs.catalogue import read_catalogue
from dr_scale.logs.importing import import_log
from dr_scale.logs.listing import list_parts, log_metadata
from dr_scale.logs.reading import read_log
from dr_scale.logs.writing import write_log
from dr_scale.reward.fitting import FitSettings, fit_reward_model
from dr_scale.reward.shared import fit_shared_model

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "obd"
GRID = (1.0, 10.0, 100.0, 1000.0, 1e4, 1e5)
CLIP = 1e-4
NAMES = ("per-action ridge", "per-action logistic", "shared ridge", "shared logistic", "constant (training mean)")


def losses(reward: np.ndarray, predicted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the squared error and the log loss of the clipped prediction."""
    p = np.clip(predicted, CLIP, 1 - CLIP)
    return (reward - predicted) ** 2, -(reward * np.log(p) + (1 - reward) * np.log(1 - p))


def _rows(part, keep):
    """The partition's rows where ``keep``."""
    idx = np.flatnonzero(keep)
    return dataclasses.replace(part, row_id=part.row_id[idx], X=part.X[idx], action=part.action[idx],
                               reward=part.reward[idx], propensity=part.propensity[idx], table=part.table.take(idx))


def main(hash_bits: int = 10, folds: int = 5) -> None:
    # a fixed folder: the import keys each row's row_id by its file's path, so the folds are the same each run
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
        fs, paths = list_parts(logs)
        meta = log_metadata(fs, paths[0])
        d, k = meta["n_features"], catalogue.n_actions
        table = pq.read_table(paths)
        parts = read_log(logs, n_features=d)
        reward = np.concatenate([p.reward for p in parts])
        row_id = np.concatenate([p.row_id for p in parts])
        predicted = {name: np.full(reward.size, np.nan) for name in NAMES}
        sizes, notes = {}, {name: [] for name in NAMES}
        for j in range(folds):
            fold_log = str(folder / f"train-{j}")
            keep = table.column("row_id").to_numpy() % folds != j
            write_log(table.filter(keep), fold_log, n_features=d, n_actions=k, catalogue=catalogue)
            train = read_log(fold_log, n_features=d)
            test = [_rows(p, p.row_id % folds == j) for p in parts]
            for kind in ("ridge", "logistic"):
                model = fit_reward_model(fold_log, FitSettings(lam="auto", model=kind))
                name = f"per-action {kind}"
                sizes[name] = model.coef.size + model.intercept.size
                notes[name].append(f"{model.metadata['lam']:g}")
                _fill(predicted[name], row_id, test,
                      lambda t, m=model: m.predict(t.X)[np.arange(len(t)), t.action])
            for kind in ("ridge", "logistic"):
                name = f"shared {kind}"
                shared = fit_shared_model(fold_log, FitSettings(lam="auto", lam_grid=GRID, model=kind))
                sizes[name] = 1 + d + F.shape[1] + d * F.shape[1]
                notes[name].append(f"{shared.metadata['lam']:g}")
                _fill(predicted[name], row_id, test,
                      lambda t, m=shared: m.predict_pairs(t.X, t.action[:, None])[:, 0])
            mean = float(np.concatenate([p.reward for p in train]).mean())
            sizes["constant (training mean)"] = 1
            _fill(predicted["constant (training mean)"], row_id, test, lambda t, c=mean: np.full(len(t), c))
        assert all(np.isfinite(p).all() for p in predicted.values())
        print(f"OBD sample, hash_bits = {hash_bits} (d = {d}), {k} items with D_A = {F.shape[1]} used item features; "
              f"{reward.size} rows ({int(reward.sum())} clicks), each predicted out of fold ({folds} folds)")
        print(f"{'model':<26} {'parameters':>10} {'squared error':>14} {'log loss':>9}  λ per fold")
        for name in NAMES:
            se, ll = losses(reward, predicted[name])
            print(f"{name:<26} {sizes[name]:>10} {se.mean():>14.6f} {ll.mean():>9.5f}  {', '.join(notes[name])}")
        n = reward.size
        for shared in ("shared ridge", "shared logistic"):
            for other in NAMES:
                if other.startswith("shared"):
                    continue
                diff = [m - b for m, b in zip(losses(reward, predicted[shared]), losses(reward, predicted[other]),
                                              strict=True)]
                print(f"{shared} − {other}, paired: squared error {diff[0].mean():+.6f} ± "
                      f"{diff[0].std(ddof=1) / np.sqrt(n):.6f}, log loss {diff[1].mean():+.5f} ± "
                      f"{diff[1].std(ddof=1) / np.sqrt(n):.5f} (± one standard error)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _fill(out: np.ndarray, row_id: np.ndarray, test: list, predict) -> None:
    """``out`` at the positions of the test rows' ids, from ``predict(part)`` per test part."""
    order = np.argsort(row_id)
    for t in test:
        if len(t):
            out[order[np.searchsorted(row_id[order], t.row_id)]] = predict(t)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
