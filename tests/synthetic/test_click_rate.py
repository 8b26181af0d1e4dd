"""``generate bandit --click-rate P``: the action offsets centred at logit(P) − CLICK_SHIFT, recorded in the
manifest (the world is rebuilt from it), and a P outside (0, 0.5] refused naming the option."""

from __future__ import annotations

import numpy as np
import pytest

from dr_scale.cli import main
from dr_scale.core.errors import ParameterError
from dr_scale.synthetic.bandit import CLICK_SHIFT, generate_bandit


def test_the_click_rate_moves_the_offsets_and_the_manifest_records_it(tmp_path):
    manifest = generate_bandit(str(tmp_path / "log"), rows=2000, features=200, actions=5, click_rate=0.01)
    assert manifest["settings"]["base"] == pytest.approx(np.log(0.01 / 0.99) - CLICK_SHIFT, rel=1e-12)
    # the default world's mean reward is ~0.36 (docs/generate-bandit.md); 2,000 rows at ~1% have ~20 clicks
    assert manifest["calibration"]["mean_reward"] < 0.05


@pytest.mark.parametrize("rate", [0.0, 0.6, float("nan")])
def test_a_click_rate_outside_the_range_is_refused(tmp_path, rate):
    with pytest.raises(ParameterError, match="click_rate"):
        generate_bandit(str(tmp_path / "log"), rows=10, features=100, actions=2, click_rate=rate)


def test_the_option_is_refused_in_one_line(tmp_path, capsys):
    assert main(["generate", "bandit", "--rows", "10", "--out", str(tmp_path / "o"), "--click-rate", "0"]) == 2
    assert "argument --click-rate: should be greater than 0" in capsys.readouterr().err
