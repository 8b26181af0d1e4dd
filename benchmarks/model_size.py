"""Model files sized by the features in use against the dense layout, on the Open Bandit Dataset sample.

    cd .. && PYTHONPATH=dr-scale python dr-scale/benchmarks/model_size.py BASE [HASH_BITS] [FOLDS]

BASE is a checkout whose fitters store every coefficient of the hashed space (the dense baseline, e.g.
``git worktree add ../dense 12fbadd``; run from outside this checkout: ``python -c`` puts the working folder
first on the children's path). Imports tests/fixtures/obd (10,000 rows, 80 items; obd.toml with
``hash_bits`` = HASH_BITS, default 18) once, then runs ``dr-scale fit LOGS --out … --folds FOLDS`` and
``dr-scale fit-propensity LOGS --out … --folds FOLDS`` (default 5) in a child process with this checkout and with
BASE on PYTHONPATH, one after the other, and ``dr-scale learn LOGS --out … --method dr --folds FOLDS`` likewise: wall,
CPU and peak RSS of each child (``wait4``), the file's size.
Then, in this process, both files of each kind are loaded (the dense one converted on load, which gives the same
predictions term for term) and compared: the largest difference of the cross-fitted predictions on every row, and
of the DM, DR and SNDR estimates of the uniform policy; for the learned policies, the largest difference of their
coefficients and the rows where their actions differ. Ratios are this checkout's figures over BASE's.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from dr_scale.logs.importing import import_log
from dr_scale.logs.reading import read_log
from dr_scale.ope.evaluation import Evaluation, evaluate_partitions
from dr_scale.policies import LinearPolicy
from dr_scale.propensity.model import PropensityModel
from dr_scale.reward.files import load_reward_model

HERE = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = HERE / "tests" / "fixtures" / "obd"
CLI = "from dr_scale.cli import console; console()"


def run(checkout: str, *args: str) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS GiB) of ``dr-scale ARGS`` in a child with ``checkout`` on PYTHONPATH."""
    env = {**os.environ, "PYTHONPATH": checkout}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", CLI, *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    err = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"dr-scale {' '.join(args[:2])} with {checkout} failed:\n{err.decode()[-2000:]}")
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 2**20


def main(base: str, hash_bits: int = 18, folds: int = 5) -> None:
    folder = pathlib.Path(tempfile.mkdtemp(prefix="dr-scale-model-size-"))
    try:
        for name in ("all.csv.gz", "item_context.csv"):
            shutil.copy(FIXTURES / name, folder / name)
        spec = re.sub(r"hash_bits = \d+", f"hash_bits = {hash_bits}", (FIXTURES / "obd.toml").read_text())
        (folder / "obd.toml").write_text(spec)
        logs = str(folder / "logs")
        import_log(str(folder / "all.csv.gz"), str(folder / "obd.toml"), logs)
        parts = read_log(logs)
        print(f"OBD sample, hash_bits = {hash_bits}, fit, fit-propensity and learn with --folds {folds}; "
              f"load average {os.getloadavg()[0]:.1f}")
        print(f"{'':<26}{'file MB':>12}{'wall s':>9}{'CPU s':>8}{'peak RSS GiB':>14}")
        commands = (("fit", load_reward_model), ("fit-propensity", PropensityModel.load), ("learn", LinearPolicy.load))
        extra = {"learn": ("--method", "dr")}
        figures = {}  # every child first: a child forked from this process after it loaded a model would start at
        for command, _ in commands:  # this process's resident size (ru_maxrss is kept across fork and exec)
            for label, checkout in (("sized by use", str(HERE)), ("dense (BASE)", base)):
                out = folder / f"{command}-{label.split()[0]}.npz"
                wall, cpu, rss = run(checkout, command, logs, "--out", str(out), "--folds", str(folds),
                                     *extra.get(command, ()))
                figures[command, label] = (out.stat().st_size / 1e6, wall, cpu, rss)
        for command, load in commands:
            models = {}
            for label in ("sized by use", "dense (BASE)"):
                models[label] = load(str(folder / f"{command}-{label.split()[0]}.npz"))
                size, wall, cpu, rss = figures[command, label]
                print(f"{command + ', ' + label:<26}{size:>12.3f}{wall:>9.1f}{cpu:>8.1f}{rss:>14.3f}")
            (s0, w0, c0, r0), (s1, w1, c1, r1) = figures[command, "sized by use"], figures[command, "dense (BASE)"]
            print(f"{command + ', ratio':<26}{s0 / s1:>12.2e}{w0 / w1:>9.2f}{c0 / c1:>8.2f}{r0 / r1:>14.2f}")
            sized, dense = models["sized by use"], models["dense (BASE)"]
            if command == "learn":
                changed = sum(int((sized.predict(p.X) != dense.predict(p.X)).sum()) for p in parts)
                print(f"  largest difference of the coefficients: {np.abs(sized.coef - dense.coef).max():.2e}; "
                      f"rows whose action differs: {changed}")
                continue
            diff = 0.0
            for part in parts:
                if command == "fit":
                    a, b = sized.predict(part.X, row_id=part.row_id), dense.predict(part.X, row_id=part.row_id)
                else:
                    a, b = (m.predict_proba(part.X, row_id=part.row_id) for m in (sized, dense))
                diff = max(diff, float(np.abs(a - b).max()))
            print(f"  {sized.coef.shape[0]} used features of d = {sized.n_features}; largest difference of the "
                  f"cross-fitted predictions: {diff:.2e}")
            if command == "fit":
                estimates = [evaluate_partitions(read_log(logs), Evaluation("uniform", ["DM", "DR", "SNDR"],
                                                                            reward_model=m)).estimates
                             for m in (sized, dense)]
                print("  uniform policy: " + ", ".join(
                    f"{name} {estimates[0][name].value:.9f} (difference "
                    f"{abs(estimates[0][name].value - estimates[1][name].value):.1e})"
                    for name in ("DM", "DR", "SNDR")))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:]))
