"""One way to validate: library errors name parameters, the command line names flags, each rule stated once."""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp

from dr_scale.cli import build_parser, main
from dr_scale.commands.common import option_flags
from dr_scale.core.errors import ParameterError, UserError, describe
from dr_scale.logs.contract import MIN_PROPENSITY, ROW_SUM_TOLERANCE, LogDataError
from dr_scale.logs.reading import partition_from_table
from dr_scale.logs.sparse import csr_to_features
from dr_scale.logs.writing import write_log
from dr_scale.ope.estimators import IPS
from dr_scale.outofcore.compute import dask_session
from dr_scale.policies import ProbsColumnPolicy
from dr_scale.synthetic.bandit import generate_bandit


# -- parameters in the library, flags on the command line ------------------------------------------------
def test_a_parameter_error_prints_its_parameters_plain_and_survives_pickling():
    err = ParameterError("`rows_per_part` must be positive, got 0")
    assert str(err) == "rows_per_part must be positive, got 0" and err.parameters == ("rows_per_part",)
    again = pickle.loads(pickle.dumps(err))  # an error raised in a Dask worker keeps its marks
    assert again.naming({"rows_per_part": "--rows-per-part"}) == "--rows-per-part must be positive, got 0"


def test_describe_writes_a_parameter_as_the_flag_only_where_one_is_given():
    err = ParameterError("`days` must be between 1 and `rows` (10), got 11")
    assert describe(err) == "days must be between 1 and rows (10), got 11"
    assert describe(err, {"days": "--days"}) == "--days must be between 1 and rows (10), got 11"


def test_option_flags_are_the_options_of_the_command_that_ran():
    parser = build_parser()
    flags = option_flags(parser, parser.parse_args(["generate", "bandit", "--rows", "5", "--out", "x"]))
    assert flags["rows_per_part"] == "--rows-per-part" and flags["local_workers"] == "--local-workers"
    assert "reward_model" not in flags  # an option of evaluate, not of generate bandit
    flags = option_flags(parser, parser.parse_args(["evaluate", "logs"]))
    assert flags["reward_model"] == "--reward-model" and "rows_per_part" not in flags


@pytest.mark.parametrize("call, message", [
    (lambda tmp: generate_bandit(str(tmp / "o"), rows=10, features=256, actions=3, days=11),
     "days must be between 1 and rows (10), got 11"),
    (lambda tmp: generate_bandit(str(tmp / "o"), rows=10, features=256, actions=1), "actions must be in [2, 500]"),
    (lambda tmp: dask_session(local_workers=0).__enter__(), "local_workers must be at least 1, got 0"),
])
def test_library_errors_name_the_parameters(tmp_path, call, message):
    with pytest.raises(ParameterError) as info:
        call(tmp_path)
    assert str(info.value).startswith(message) and "--" not in str(info.value)


def test_the_command_line_names_the_same_error_by_its_flags(tmp_path, capsys):
    code = main(["generate", "bandit", "--rows", "10", "--days", "11", "--features", "256", "--out",
                 str(tmp_path / "o"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "dr-scale generate: error: --days must be between 1 and --rows (10), got 11" in err


# -- every numeric option through the shared rules ---------------------------------------------------------
def _actions(parser):
    """Every option of ``parser`` and of its sub-commands, however deep, with the command's name."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in set(action.choices.values()):
                yield from _actions(sub)
        else:
            yield parser.prog, action


def test_no_option_parses_a_number_without_its_rule():
    bare = [(prog, action.dest) for prog, action in _actions(build_parser()) if action.type in (int, float)]
    assert bare == []


@pytest.mark.parametrize("argv, message", [
    (["learn", "logs", "--out", "p.npz", "--folds", "1"], "argument --folds: should be greater than or equal to 2"),
    (["fit", "logs", "--out", "m.npz", "--folds", "0"], "argument --folds: should be greater than or equal to 1"),
    (["fit", "logs", "--out", "m.npz", "--seed", "-1"], "argument --seed: should be greater than or equal to 0"),
    (["generate", "visits", "--out", "o", "--rows-per-part", "0"],
     "argument --rows-per-part: should be greater than or equal to 1"),
    (["generate", "bandit", "--out", "o", "--rows", "2.5"], "argument --rows: should be a valid integer"),
])
def test_numeric_options_are_refused_before_any_work(capsys, argv, message):
    assert main(argv) == 2  # "logs" does not exist: the option is refused before it is looked for
    assert message in capsys.readouterr().err


# -- each rule stated once: the log contract's, used by the array checks and the policies -----------------
def _log(probs: np.ndarray, propensity: float = 0.5) -> pa.Table:
    n, k = probs.shape
    return pa.table({"row_id": np.arange(n, dtype=np.int64), "features": csr_to_features(sp.csr_matrix((n, 4))),
                     "action": np.arange(n) % k, "reward": np.ones(n), "propensity": np.full(n, propensity),
                     "target_probs": pa.array(list(probs), pa.list_(pa.float64()))})


def _refusals(probs: np.ndarray, propensity: float, tmp_path) -> list[str]:
    """Which of the three paths (estimator arrays, a probs: policy, write_log) refuse these rows."""
    n, k = probs.shape
    refused = []
    try:
        IPS().estimate(reward=np.ones(n), action=np.arange(n) % k, propensity=np.full(n, propensity),
                       target_probs=probs)
    except UserError:
        refused.append("arrays")
    table = _log(probs, propensity)
    try:
        ProbsColumnPolicy("target_probs").distribution(partition_from_table(table, "t", 4, k), k)
    except LogDataError:
        refused.append("policy")
    try:
        write_log(table, str(tmp_path / f"log-{len(list(tmp_path.iterdir()))}"), n_features=4, n_actions=k)
    except UserError:
        refused.append("write_log")
    return refused


@pytest.mark.parametrize("off, refused", [(0.5, False), (2.0, True)])
def test_one_row_sum_tolerance_for_arrays_policies_and_written_logs(tmp_path, off, refused):
    """A row summing to 1 + ε is a distribution for every path when ε is inside the tolerance, for none outside."""
    probs = np.full((4, 3), 1 / 3)
    probs[1, 0] += off * ROW_SUM_TOLERANCE
    assert _refusals(probs, 0.5, tmp_path) == (["arrays", "policy", "write_log"] if refused else [])


@pytest.mark.parametrize("propensity", [0.0, 1.5, MIN_PROPENSITY / 2])
def test_one_propensity_rule_for_arrays_and_logs(tmp_path, propensity):
    probs = np.full((4, 3), 1 / 3)
    assert _refusals(probs, MIN_PROPENSITY, tmp_path) == []  # the floor itself is allowed
    assert _refusals(probs, propensity, tmp_path)[:1] == ["arrays"]
    with pytest.raises(LogDataError, match="column 'propensity': propensity (outside|below)"):
        partition_from_table(_log(probs, propensity), "t", 4, 3)


@pytest.mark.slow
def test_the_log_contract_imports_nothing_from_the_policies():
    """The writer checks the target columns itself (logs.targets): importing it loads no policy code (no cycle)."""
    code = "import sys, dr_scale.logs.writing; print('dr_scale.policies' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize("rule, name, value, message", [
    ("PositiveOrInf", "max_weight", -1, "should be greater than 0"),
    ("NonNegativeOrInf", "tau", -1, "should be greater than or equal to 0"),
    ("Alpha", "alpha", 2, "should be less than 1"),
])
def test_estimator_parameters_and_options_share_one_rule(rule, name, value, message):
    """ClippedDR's max_weight and --clip, SwitchDR's tau and --tau, ci's alpha and --alpha: one rule, one phrase."""
    from dr_scale.io import config
    from dr_scale.ope.estimators import ClippedDR, SwitchDR

    with pytest.raises(Exception) as option_error:
        config.option(getattr(config, rule))(str(value))
    assert message in str(option_error.value)
    log = dict(reward=np.ones(4), action=np.zeros(4, dtype=int), propensity=np.full(4, 0.5),
               target_probs=np.tile([1.0, 0.0], (4, 1)))
    make = {"max_weight": lambda: ClippedDR(max_weight=value), "tau": lambda: SwitchDR(tau=value),
            "alpha": lambda: IPS().estimate(**log).ci(value)}[name]
    with pytest.raises(ParameterError, match=f"^{name} {message} \\(got {value}\\)$"):
        make()


# -- the visits job's settings, described once --------------------------------------------------------------
def test_the_visits_job_is_the_experiments_settings_plus_where_things_are():
    from pydantic import ValidationError

    from dr_scale.experiments.visits.experiment import PAPER_FRACTIONS, Settings
    from dr_scale.experiments.visits.job import VisitsJob
    from dr_scale.io.config import validate

    assert issubclass(VisitsJob, Settings)
    job = validate(VisitsJob, {"job": "visits", "fractions": [0.5, 1], "lam": 3, "storage_options": {"key": "k"}})
    assert job.settings() == Settings(fractions=(0.5, 1.0), lam=3.0)  # no storage options in the settings
    assert validate(VisitsJob, {"job": "visits"}).settings() == Settings()
    assert Settings().fractions == PAPER_FRACTIONS and Settings().repetitions == 100
    with pytest.raises(ValidationError, match="repetitions"):
        Settings(repetitions=0)
    with pytest.raises(ValidationError, match="valid list"):
        Settings(fractions=0.05)


# -- the API refuses bad argument types at its boundary, naming the argument ---------------------------------
@pytest.fixture(scope="module")
def example_log():
    from dr_scale.synthetic.example import example_paths

    return example_paths()[0]


@pytest.mark.parametrize("kwargs, message", [
    ({"estimators": "DR"}, "estimators 'DR': give a list of names"),
    ({"estimators": {"DR": "DR"}}, "estimators 'DR' is a str, not an Estimator"),
    ({"reward_model": "rho.npz"}, "reward_model must be a reward model with predict\\(X\\), got str 'rho.npz'"),
    ({"n_actions": 0}, "n_actions should be greater than or equal to 1"),
    ({"n_features": 2.5}, "n_features should be a valid integer"),
])
def test_evaluation_refuses_bad_arguments(kwargs, message):
    from dr_scale.ope.evaluation import Evaluation

    with pytest.raises(UserError, match=message):
        Evaluation("constant:0", **kwargs)


def test_evaluate_log_refuses_what_is_not_an_evaluation_or_a_path(example_log):
    from dr_scale.ope.evaluation import Evaluation, evaluate_log

    with pytest.raises(ParameterError, match="evaluation must be an Evaluation.*got str 'constant:0'"):
        evaluate_log(example_log, "constant:0")
    with pytest.raises(UserError, match="expected a path or URL \\(a str\\), got int 42"):
        evaluate_log(42, Evaluation("constant:0"))


def test_write_log_refuses_a_dataframe_and_names_the_conversion(tmp_path):
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame({"row_id": [0], "action": [0], "reward": [1.0], "propensity": [0.5]})
    with pytest.raises(ParameterError, match="table must be a pyarrow.Table, got DataFrame .*Table.from_pandas"):
        write_log(frame, str(tmp_path / "log"))
    assert not (tmp_path / "log").exists()


def test_read_log_refuses_unknown_options_and_a_column_name_as_a_string(example_log):
    from dr_scale.logs.reading import read_log

    with pytest.raises(ParameterError, match="read_log has no parameter 'columns'"):
        read_log(example_log, columns=["target_action"])
    with pytest.raises(ParameterError, match="extra_columns must be a list of column names, got the str"):
        read_log(example_log, extra_columns="target_action")
    (part, *_) = read_log(example_log, extra_columns=["target_action"])
    assert "target_action" in part.table.column_names


@pytest.mark.parametrize("field, value, message", [
    ("target_probs", "abc", "target_probs must be an array of numbers, got str 'abc'"),
    ("target_probs", None, "target_probs must have shape \\(n, k\\)"),
    ("reward", None, "reward must be a 1-d array"),
])
def test_estimate_refuses_arguments_that_are_not_arrays_of_numbers(field, value, message):
    log = dict(reward=np.ones(4), action=np.zeros(4, dtype=int), propensity=np.full(4, 0.5),
               target_probs=np.tile([1.0, 0.0], (4, 1)))
    with pytest.raises(UserError, match=message):
        IPS().estimate(**{**log, field: value})


@pytest.mark.parametrize("spec, message", [(None, "bad policy None"), (3, "bad policy 3"),
                                           ("constant:-1", "bad policy 'constant:-1'")])
def test_parse_policy_refuses_what_is_not_a_spec(spec, message):
    from dr_scale.policies import parse_policy

    with pytest.raises(UserError, match=message):
        parse_policy(spec)
