"""Several policies in one pass (Comparison): the same numbers as separate runs, each part read once."""

import numpy as np
import pytest

import dr_scale.logs.reading as reading
from dr_scale.core.errors import ParameterError
from dr_scale.ope.estimators import make_estimators
from dr_scale.ope.evaluation import Comparison, ComparisonResult, ComparisonState, Evaluation, evaluate_log
from dr_scale.reward.models import LinearRewardModel
from dr_scale.synthetic.example import example_paths

LOGS, MODEL = example_paths()
SPECS = ["column:target_action", "uniform", "epsilon-greedy:0.2:constant:1", "logging"]
ESTIMATORS = ["DM", "IPS", "DR", "SNIPS", "SNDR", "SwitchDR", "ClippedDR"]


def evaluation(spec, model, baseline=None):
    return Evaluation(spec, make_estimators(ESTIMATORS, clip=10.0, tau=5.0), reward_model=model, baseline=baseline)


def same(a, b):
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].n == b[name].n
        assert a[name].value == pytest.approx(b[name].value, rel=1e-12, abs=1e-15), name
        assert a[name].stderr == pytest.approx(b[name].stderr, rel=1e-12, abs=1e-15), name


@pytest.mark.parametrize("baseline", [None, "uniform", "logging"])
def test_a_comparison_equals_separate_runs(baseline):
    model = LinearRewardModel.load(MODEL)
    result = evaluate_log(LOGS, Comparison({s: evaluation(s, model) for s in SPECS}, baseline=baseline))
    assert isinstance(result, ComparisonResult) and list(result.results) == SPECS
    base = baseline or SPECS[0]
    assert result.baseline == base
    for spec in SPECS:
        paired = None if spec == base and base != "logging" else base  # "logging": every policy vs the mean reward
        alone = evaluate_log(LOGS, evaluation(spec, model, paired))
        same(result.results[spec].estimates, alone.estimates)
        same(result.results[spec].differences, alone.differences)
        assert (paired is None) == (not result.results[spec].differences)


def test_a_dict_of_evaluations_reads_each_part_once(monkeypatch):
    reads = []
    original = reading.read_table

    def counting(fs, path, *args, **kwargs):
        reads.append(path)
        return original(fs, path, *args, **kwargs)

    monkeypatch.setattr(reading, "read_table", counting)
    result = evaluate_log(LOGS, {s: Evaluation(s) for s in SPECS})
    assert len(reads) == len(set(reads)) == 7  # one per part (7 days), for the four policies
    assert set(result.to_dict()["policies"]) == set(SPECS)
    assert "difference: each policy A − column:target_action" in result.table()


def test_comparison_states_merge_and_round_trip():
    comparison = Comparison({s: Evaluation(s, n_actions=3) for s in SPECS[:2]})
    parts = reading.read_log(LOGS, extra_columns=["target_action"])
    states = [comparison.state(p) for p in parts]
    total = states[0]
    for s in states[1:]:
        total = total + s
    again = ComparisonState.from_dict(total.to_dict())
    assert again.rows == total.rows == sum(len(p) for p in parts)
    for name in total.states:
        assert np.allclose(again.states[name].estimators["IPS"].mean, total.states[name].estimators["IPS"].mean)


@pytest.mark.parametrize("evaluations, baseline, words", [
    ({"A": Evaluation("uniform")}, None, "at least two"),
    ({"A": Evaluation("uniform"), "B": Evaluation("constant:1", baseline="logging")}, None, "baseline of its own"),
    ({"A": Evaluation("uniform"), "B": Evaluation("constant:1")}, "C", "'C' is not one of the policies"),
    ({"A": Evaluation("uniform"), "B": Evaluation("constant:1", ["IPS"])}, None, "the same estimators"),
    ({"A": Evaluation("uniform"), "B": "constant:1"}, None, "must be an Evaluation"),
])
def test_bad_comparisons_name_the_parameter(evaluations, baseline, words):
    with pytest.raises(ParameterError, match=words):
        Comparison(evaluations, baseline)


def test_a_comparison_on_a_dask_dataframe_equals_the_log(tmp_path, example):
    import dask.dataframe as dd

    from dr_scale.logs.filters import LogFilter
    from dr_scale.logs.writing import write_log
    from dr_scale.ope.evaluation import evaluate_dataframe
    from dr_scale.synthetic.example import N_ACTIONS, N_FEATURES

    table, model, _ = example
    write_log(table, str(tmp_path / "log"), n_parts=3, n_features=N_FEATURES, n_actions=N_ACTIONS)
    f = LogFilter(split="train")
    evaluations = {s: evaluation(s, model) for s in SPECS}
    frame = evaluate_dataframe(dd.read_parquet(str(tmp_path / "log")), evaluations, log_filter=f)
    log = evaluate_log(str(tmp_path / "log"), evaluations, log_filter=f)
    for spec in SPECS:
        same(frame.results[spec].estimates, log.results[spec].estimates)
        same(frame.results[spec].differences, log.results[spec].differences)
