"""The outputs of ``fit``, ``learn`` and ``evaluate --fit-reward-model`` are pinned bit for bit.

``tests/fixtures/pinned_outputs.json`` holds, for a small generated bandit log, the reward model
``fit --folds 2`` writes, the policy ``learn`` writes and the estimates of ``evaluate
--fit-reward-model`` for that policy. A refactoring that moves a single bit of them fails here on a
machine like the recording one (same SIMD extensions and BLAS kernel, see
``conftest.machine``); on another, they must agree to 1e-12 relative. Re-record
deliberately, when a change is meant to move them, with ``python tests/commands/test_pinned_outputs.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import machine

from dr_scale.cli import main

FIXTURE = Path(__file__).parents[1] / "fixtures" / "pinned_outputs.json"


def outputs(root: Path) -> dict:
    log, rho, pol, ev = (str(root / name) for name in ("log", "rho.npz", "pol.npz", "ev.json"))
    assert main(["generate", "bandit", "--rows", "4000", "--features", "200", "--actions", "4", "--out", log]) == 0
    assert main(["fit", log, "--out", rho, "--folds", "2", "--model", "ridge"]) == 0
    assert main(["learn", log, "--out", pol, "--model", "ridge"]) == 0
    assert main(["evaluate", log, "--policy", f"linear:{pol}", "--fit-reward-model", "--folds", "2", "--model", "ridge",
                 "--allow-training-overlap",
                 "--json", ev]) == 0
    with np.load(rho, allow_pickle=False) as z:
        model = {key: z[key].ravel().tolist() for key in ("coef", "intercept", "fold_coef", "fold_intercept")}
    with np.load(pol, allow_pickle=False) as z:
        policy = {key: z[key].ravel().tolist() for key in ("coef", "intercept")}
    estimates = {name: [e["value"], e["stderr"]] for name, e in json.loads(Path(ev).read_text())["estimates"].items()}
    return {"fit": model, "learn": policy, "evaluate": estimates, "machine": machine()}


@pytest.mark.slow
def test_fit_learn_and_evaluate_outputs_are_bit_identical_to_the_recorded_ones(tmp_path):
    recorded = json.loads(FIXTURE.read_text())
    got = outputs(tmp_path)
    same_machine = got["machine"] == recorded["machine"]
    for command in ("fit", "learn", "evaluate"):
        assert got[command].keys() == recorded[command].keys()
        for key, want in recorded[command].items():
            if same_machine:
                np.testing.assert_array_equal(np.array(got[command][key]), np.array(want), err_msg=f"{command} {key}")
            else:
                np.testing.assert_allclose(np.array(got[command][key]), np.array(want), rtol=1e-12, atol=1e-15,
                                           err_msg=f"{command} {key}")


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        FIXTURE.write_text(json.dumps(outputs(Path(folder))) + "\n")
