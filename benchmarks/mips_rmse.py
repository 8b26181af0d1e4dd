"""IPS, SNIPS, MIPS and SNMIPS over many logs of one generated item world: bias, std and rmse.

    PYTHONPATH=. python benchmarks/mips_rmse.py LOG [LOGS]

LOG is written by ``dr-scale generate bandit --action-features …``; its rows are split into LOGS
(default 100) disjoint logs of consecutive row ids — independent logs of the same world — and each is
evaluated for the target policy (``sparse:target_topk``); each estimate's error is measured against
the mean of its rows' ``target_expected_reward``. Prints each estimator's bias, std and rmse, and
MIPS's rmse over IPS's.
"""

from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dr_scale import Evaluation, evaluate_partitions
from dr_scale.logs.catalogue import read_catalogue
from dr_scale.logs.listing import list_parts
from dr_scale.logs.reading import partition_from_table

NAMES = ["IPS", "SNIPS", "MIPS", "SNMIPS"]


def main(log: str, logs: int = 100) -> None:
    fs, paths = list_parts(log)
    catalogue = read_catalogue(log)
    table = pa.concat_tables([pq.read_table(fs.open(p, "rb")) for p in paths]).sort_by("row_id")
    evaluation = Evaluation("sparse:target_topk", NAMES, n_actions=catalogue.n_actions, catalogue=catalogue)
    bounds = np.linspace(0, table.num_rows, logs + 1).astype(int)
    errors = {name: [] for name in NAMES}
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        piece = table.slice(lo, hi - lo)
        part = partition_from_table(piece, f"<rows {lo}–{hi}>")
        truth = piece.column("target_expected_reward").to_numpy().mean()
        result = evaluate_partitions([part], evaluation)
        for name in NAMES:
            errors[name].append(result.estimates[name].value - truth)
    print(f"{logs} logs of {table.num_rows // logs:,} rows, {catalogue.n_actions:,} actions, "
          f"{catalogue.n_categories} categories")
    rmse = {}
    for name in NAMES:
        e = np.asarray(errors[name])
        rmse[name] = float(np.sqrt(np.nanmean(e ** 2)))
        print(f"{name:7s} bias {np.nanmean(e):+.4f}  std {np.nanstd(e):.4f}  rmse {rmse[name]:.4f}"
              + (f"  ({np.isnan(e).sum()} undefined)" if np.isnan(e).any() else ""))
    print(f"rmse(MIPS) / rmse(IPS) = {rmse['MIPS'] / rmse['IPS']:.3f}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 100)
