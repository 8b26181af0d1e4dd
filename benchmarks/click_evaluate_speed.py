"""``evaluate --estimators DM,IPS,DR --fit-reward-model`` on a generated click log, this tree against another (the
baseline), in one run.

    PYTHONPATH=. python benchmarks/click_evaluate_speed.py LOGS BASELINE_TREE [EXTRA_OPTIONS ...]

LOGS: e.g. ``dr-scale generate bandit --rows 10000000 --features 262144 --actions 10 --click-rate 0.005
--out data/click-10M``; BASELINE_TREE: a checkout of the baseline (``git worktree add ../base COMMIT``). Runs the
command once with each tree's code (``--policy uniform``, the default reward model and folds of each, then
with EXTRA_OPTIONS, e.g. ``--folds 5``, on both), and prints the wall-clock seconds, the CPU seconds of the run's
process (user + system: what a busy machine's other work moves least) and their ratios.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time

COMMAND = ["evaluate", "--policy", "uniform", "--estimators", "DM,IPS,DR", "--fit-reward-model", "--no-progress"]


def timed(tree: str, logs: str, extra: list[str]) -> tuple[float, float, str]:
    """Wall-clock and CPU seconds of one run of the command with ``tree``'s code, and its output's last lines."""
    env = dict(os.environ, PYTHONPATH=tree)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", "from dr_scale.cli import console; console()", *COMMAND[:1], logs,
                           *COMMAND[1:], *extra], env=env, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu, "\n".join(done.stdout.splitlines()[-5:])


def main() -> None:
    logs, base, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for options in ([], extra) if extra else ([],):
        wall, cpu = {}, {}
        for name, tree in (("baseline", base), ("this tree", here)):
            wall[name], cpu[name], tail = timed(tree, logs, options)
            print(f"{name} {' '.join(options) or '(defaults)'}: {wall[name]:.1f} s wall, {cpu[name]:.1f} s CPU\n{tail}",
                  flush=True)
        print(f"ratio this tree / baseline {' '.join(options) or '(defaults)'}: "
              f"{wall['this tree'] / wall['baseline']:.2f} wall, {cpu['this tree'] / cpu['baseline']:.2f} CPU\n",
              flush=True)


if __name__ == "__main__":
    main()
