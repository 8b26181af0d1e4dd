"""The visits job's per-fit estimates are pinned bit for bit.

``tests/fixtures/visits_estimates.json`` holds the IPS and DR estimates of every fit
(3 fractions × 4 repetitions) of the job's own code (default λ, kernel and CG
tolerance) on a small generated set, with the machine's instruction sets and BLAS kernel: numpy's
``exp`` and OpenBLAS's products take different code paths (AVX2, AVX-512) on different processors, whose
last bits differ. On a machine like the recording one, any change to the out-of-core machinery
(:mod:`dr_scale.outofcore`) or to the experiment that moves a single bit of them fails here; on another,
they must agree to 1e-12 relative (the code paths' rounding, summed over a few thousand terms, is
~1e-15). Re-record deliberately with ``python tests/experiments/test_visits_estimates_fixed.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from conftest import machine

from dr_scale.experiments.visits.experiment import Settings, load_parts, run_experiment
from dr_scale.synthetic.visits import generate_visits

FIXTURE = Path(__file__).parents[1] / "fixtures" / "visits_estimates.json"
ROWS, FEATURES, PARTS = 12_000, 300, 3
SETTINGS = Settings(fractions=(0.01, 0.05, 0.3), repetitions=4, seed=5)


def estimates(root: Path) -> dict:
    url = str(root / "visits")
    generate_visits(url, rows=ROWS, features=FEATURES, seed=3, rows_per_part=ROWS // PARTS)
    result = run_experiment(load_parts(url), SETTINGS)
    return {"ips": result.ips.tolist(), "dr": result.dr.tolist(), "ridge_iterations": result.ridge_iterations,
            "machine": machine()}


def test_per_fit_estimates_are_bit_identical_to_the_recorded_ones(tmp_path):
    recorded = json.loads(FIXTURE.read_text())
    got = estimates(tmp_path)
    assert got["ridge_iterations"] == recorded["ridge_iterations"]
    same_machine = got["machine"] == recorded["machine"]
    for name in ("ips", "dr"):
        if same_machine:
            np.testing.assert_array_equal(np.array(got[name]), np.array(recorded[name]))
        else:
            np.testing.assert_allclose(np.array(got[name]), np.array(recorded[name]), rtol=1e-12, atol=0)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        FIXTURE.write_text(json.dumps(estimates(Path(folder)), indent=1) + "\n")
    print(f"wrote {FIXTURE}")
