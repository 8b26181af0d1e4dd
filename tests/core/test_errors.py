"""Which errors are the user's: a UserError raised on purpose, or one of the environment's errors ``describe`` names;
anything else is a bug of dr-scale and says so."""

from __future__ import annotations

import errno
import json
import pickle

import pytest

from dr_scale.core.errors import ParameterError, UserError, describe

HINT = "(an internal error of dr-scale: rerun with --debug for the traceback, and please report it)"


@pytest.mark.parametrize("exc, line", [
    (UserError("logs/: not a log;\n give its folder"), "logs/: not a log; give its folder"),
    (ParameterError("`rows` must be positive, got 0"), "rows must be positive, got 0"),
    (FileNotFoundError(errno.ENOENT, "No such file or directory", "logs/"), "logs/: no such file or folder"),
    (PermissionError(errno.EACCES, "Permission denied", "/out"), "/out: permission denied: check the file's or "
                                                                  "folder's permissions, or choose another path"),
    (ConnectionRefusedError("connection refused"), "connection refused"),
    (TypeError("__init__() got an unexpected keyword argument 'anon_'"),
     "an option was not accepted (__init__() got an unexpected keyword argument 'anon_'): check the storage options "
     "(--storage-options, $DR_SCALE_STORAGE_OPTIONS or the job's storage_options) and the job's settings"),
    (MemoryError(), "out of memory: use smaller partitions or more workers"),
])
def test_the_users_and_the_environments_errors_are_one_line_without_the_hint(exc, line):
    assert describe(exc) == line


@pytest.mark.parametrize("exc", [ValueError("cannot convert float NaN to integer"), KeyError("n_actions"),
                                 TypeError("'NoneType' object is not subscriptable"), IndexError("index 3"),
                                 json.JSONDecodeError("Expecting value", "", 0), RuntimeError("")])
def test_any_other_error_is_internal_and_asks_for_a_report(exc):
    line = describe(exc)
    assert line.startswith(f"unexpected {type(exc).__name__}") and line.endswith(HINT)


def test_a_user_error_survives_pickling_as_a_dask_workers_error_does():
    for exc in (UserError("bad"), ParameterError("`days` must be positive")):
        again = pickle.loads(pickle.dumps(exc))
        assert type(again) is type(exc) and describe(again, {"days": "--days"}) == describe(exc, {"days": "--days"})
