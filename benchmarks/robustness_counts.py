"""How every bad-input case of the robustness suites ends: a clear error, accepted with the right result, or
still failing (and how) — the counts of a release note.

    PYTHONPATH=$PWD python benchmarks/robustness_counts.py [--json counts.json] [pytest arguments …]
    python benchmarks/robustness_counts.py --tables counts.json [rerun.json …]

Runs the suites of bad input through the real command and API (by default
tests/commands/test_bad_input_corpus.py, test_bad_input_cases.py, test_unattended_runs.py and
tests/ope/test_coherent_intervals.py, slow cases included) in this process, under pytest, and records
for each case (one test item) the exit status of every ``dr_scale.cli.main`` run it made (a wrapper
around the parser and the command, so nothing of the command changes):

* **clear error** — the test passed and a run ended with exit 2 (one line, never the "unexpected"
  fallback: the suites check it) or 3 (a report naming its bad partitions);
* **accepted, right result** — the test passed and every run exited 0 (the test checks the result:
  strict JSON, intervals containing their estimates, the expected numbers);
* **API or process case, passed** — no in-process command run (the Python API's boundary checks, or a
  ``dr-scale`` subprocess: interrupts, kills, a full disk), passed;
* still failing — **traceback** (the output or the failure shows one), **unclear** (the "unexpected"
  fallback line), **hang** (a timeout), **silently wrong** (the test failed and its last run exited 0:
  a result where a refusal or another result was due), **wrong or unclear error** (the test failed and its
  last run exited 2: not the line it checks for), **wrong outcome (API or process)** (no in-process run:
  the API or a process did not do what the test checks), or **known failing** (xfail, with its reason).

Each case is also assigned to the numbered groups of the robustness issue by its name (:data:`GROUPS`:
1 policy errors in reports, 2 EL intervals, 3 never-logged actions, 4 ``--overwrite``, 5 wasted runs and
leaks, 6 silently wrong elsewhere, 7 unclear messages; "0" for the first-round corpus of bad logs, files
and options). Prints one table per grouping; ``--json`` writes the per-case records too.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUITES = ["tests/commands/test_bad_input_corpus.py", "tests/commands/test_bad_input_cases.py",
          "tests/commands/test_unattended_runs.py", "tests/ope/test_coherent_intervals.py"]
#: The robustness issue's numbered groups, by patterns of the case names (first match wins; else group 0).
GROUPS = [
    ("2 EL intervals", r"test_coherent_intervals|-el\]|interval-el|--interval"),
    ("1 policy errors in reports", r"policy_with_other_k|fewer_features_than|skipping_every_partition|"
                                   r"one_bad_partition_is_still|report-policy|report-policies-disagree"),
    ("3 never-logged actions", r"never.logged|unlogged|never_logged|action_3|excluded|no_such_warning|"
                               r"rests_on_no_rows|mass_on_never|report_status_is_not_ok"),
    ("4 --overwrite", r"overwrite"),
    ("5 wasted runs and leaks", r"outputs_are_checked|spill|limits_fail_fast|stray|folds_equal_to_rows|"
                                r"name-too-long|learn-out-is-folder|beyond-rows|local-workers-1000|n-features-2"),
    ("6 silently wrong elsewhere", r"cross.fitted|other_log|other-log|train_half|fitting_options_beside|"
                                   r"learn_folds_beside|evaluate-model|learn-model-folds|predict_refuses|"
                                   r"predict_with_valid|sklearn_reward_model|cross_fit_refuses|rewards_beyond|"
                                   r"scaled_rewards|never_seen|in_memory_dlm|sigterm_during_generate|"
                                   r"generated_folder_without|huge-scores|fit--folds 2\.7|logged_view|"
                                   r"rewards-1e300|vocabulary"),
    ("7 unclear messages", r"fit_options_beyond_float64|policy_scores_and_temperatures|tiny_temperature|"
                           r"interrupted_local_cluster|softmax-T|fit--lam|fit--rtol|fit--seed|wrong_kind|"
                           r"absent_features"),
]
OUTCOMES = ["clear error", "accepted, right result", "API or process case, passed", "traceback", "unclear",
            "hang", "silently wrong (exit 0)", "wrong or unclear error", "wrong outcome (API or process)",
            "known failing (xfail)", "skipped"]


class Recorder:
    """Wraps ``dr_scale.cli.build_parser`` so that each in-process command run records its exit status."""

    def __init__(self):
        self.codes: list[int] = []
        self.cases: dict[str, dict] = {}

    def install(self) -> None:
        import dr_scale.cli as cli

        real_build, codes = cli.build_parser, self.codes

        def build_parser():
            parser = real_build()
            real_parse = parser.parse_args

            def parse_args(argv=None, namespace=None):
                try:
                    args = real_parse(argv, namespace)
                except SystemExit as exc:  # --help (0) or a bad option (2)
                    codes.append(exc.code if isinstance(exc.code, int) else 2)
                    raise
                func = args.func

                def run(a):
                    try:
                        code = int(func(a) or 0)
                    except KeyboardInterrupt:
                        codes.append(130)
                        raise
                    except Exception:
                        codes.append(2)
                        raise
                    codes.append(code)
                    return code

                args.func = run
                return args

            parser.parse_args = parse_args
            return parser

        cli.build_parser = build_parser

    # -- pytest hooks ------------------------------------------------------------------------------------
    def pytest_runtest_setup(self, item):
        self.codes.clear()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        case = self.cases.setdefault(item.nodeid, {"codes": [], "outcome": None, "detail": ""})
        if report.when == "call" or (report.when == "setup" and (report.failed or report.skipped)):
            case["codes"] = list(self.codes)
            case["outcome"] = classify(report, self.codes)
            if case["outcome"] not in OUTCOMES[:3]:
                case["detail"] = _first_line(report)


def _first_line(report) -> str:
    if hasattr(report, "wasxfail"):
        return str(report.wasxfail)
    text = str(report.longrepr or "")
    lines = [line for line in text.splitlines() if line.startswith("E ")]
    return (lines[0] if lines else text.splitlines()[-1] if text else "")[:300]


def classify(report, codes: list[int]) -> str:
    if hasattr(report, "wasxfail"):
        return "known failing (xfail)"
    if report.skipped:
        return "skipped"
    if report.passed:
        if not codes:
            return "API or process case, passed"
        return "clear error" if any(c in (2, 3) for c in codes) else "accepted, right result"
    text = str(report.longrepr or "")
    if "Timeout" in text or "TimeoutExpired" in text or "a hang" in text:
        return "hang"
    if "unexpected" in text and "error:" in text:
        return "unclear"
    if "Traceback (most recent call last)" in text and "Traceback" in text.split("AssertionError")[0][-2000:]:
        return "traceback"
    if codes and codes[-1] == 0:
        return "silently wrong (exit 0)"
    if codes:
        return "wrong or unclear error"
    return "wrong outcome (API or process)"


def group_of(nodeid: str) -> str:
    name = nodeid.split("::", 1)[-1]
    for group, pattern in GROUPS:
        if re.search(pattern, name if "coherent" not in pattern else nodeid):
            return group
    return "0 first-round corpus (bad logs, files, options)"


def table(title: str, rows: dict) -> str:
    if not rows:
        return f"{title}: no cases ran"
    used = [o for o in OUTCOMES if any(r.get(o) for r in rows.values())]
    width = max(len(k) for k in rows) + 2
    out = [title, " " * width + "  ".join(f"{o:>{max(len(o), 5)}}" for o in used) + "  total"]
    for key in sorted(rows):
        r = rows[key]
        out.append(f"{key:<{width}}" + "  ".join(f"{r.get(o, 0):>{max(len(o), 5)}}" for o in used)
                   + f"  {sum(r.values()):>5}")
    total = collections.Counter()
    for r in rows.values():
        total.update(r)
    out.append(f"{'all':<{width}}" + "  ".join(f"{total.get(o, 0):>{max(len(o), 5)}}" for o in used)
               + f"  {sum(total.values()):>5}")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the per-case records here")
    parser.add_argument("--tables", nargs="+", metavar="RECORDS.json",
                        help="run nothing: the tables of records written by --json (a later file's case replaces an "
                             "earlier one's, e.g. a rerun of some cases)")
    args, pytest_args = parser.parse_known_args()
    recorder = Recorder()
    if args.tables:
        for path in args.tables:
            recorder.cases.update(json.loads(Path(path).read_text()))
        for case in recorder.cases.values():  # records of an earlier version of the classes
            if case["outcome"] == "wrong outcome":
                codes = case["codes"]
                case["outcome"] = ("silently wrong (exit 0)" if codes and codes[-1] == 0 else
                                   "wrong or unclear error" if codes else "wrong outcome (API or process)")
    else:
        recorder.install()
        given_paths = any(Path(a.split("::")[0]).exists() for a in pytest_args if not a.startswith("-"))
        suites = [] if given_paths else [str(ROOT / s) for s in SUITES]
        pytest.main(["-q", "-p", "no:cacheprovider", "--timeout", "600", *pytest_args, *suites], plugins=[recorder])
    by_file, by_group = collections.defaultdict(collections.Counter), collections.defaultdict(collections.Counter)
    for nodeid, case in recorder.cases.items():
        if case["outcome"] is None:
            continue
        by_file[nodeid.split("::")[0].rsplit("/", 1)[-1]][case["outcome"]] += 1
        by_group[group_of(nodeid)][case["outcome"]] += 1
    print()
    print(table("by file", by_file))
    print()
    print(table("by group of the issue", by_group))
    failing = {n: c for n, c in recorder.cases.items() if c["outcome"] not in (None, *OUTCOMES[:3], "skipped")}
    if failing:
        print("\nstill failing:")
        for nodeid, case in failing.items():
            print(f"  {case['outcome']}: {nodeid}: {case['detail']}")
    if args.json:
        Path(args.json).write_text(json.dumps(recorder.cases, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
