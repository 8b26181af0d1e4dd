"""Progress of iterative stages: a redrawn line on a terminal, one line per stage in a log."""

from __future__ import annotations

import io

import pytest

from dr_scale.outofcore.progress import Passes


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_gets_one_line_per_stage_and_a_terminal_a_redrawn_line():
    log = io.StringIO()
    with Passes("ridge", stream=log) as passes:
        for left in (5, 2, 0):
            passes.step(f"{left} fits left")
    assert log.getvalue() == "ridge: 3 passes; 0 fits left\n"

    terminal = Terminal()
    with Passes("ridge", stream=terminal) as passes:
        for left in (5, 2, 0):
            passes.step(f"{left} fits left")
    shown = terminal.getvalue()
    assert "\r" in shown and shown.endswith("\n") and "3 passes" in shown and "0 fits left" in shown

    quiet = Terminal()
    with Passes("ridge", enabled=False, stream=quiet) as passes:
        passes.step()
    assert quiet.getvalue() == "" and passes.count == 1


@pytest.mark.slow
def test_dask_graphs_redraw_on_a_terminal_and_end_on_one_line_in_a_log():
    import time

    import dask

    from dr_scale.outofcore.progress import graph_bar

    def slow(x):
        time.sleep(0.3)
        return x

    graph = [dask.delayed(slow)(i) for i in range(2)]
    log, terminal = io.StringIO(), Terminal()
    for stream in (log, terminal):
        with graph_bar(stream):
            dask.compute(*graph, scheduler="sync")
    assert "\r" not in log.getvalue() and log.getvalue().count("\n") == 1
    assert log.getvalue().startswith("[####") and "100% Completed" in log.getvalue()
    assert terminal.getvalue().count("\r") >= 2 and "100% Completed" in terminal.getvalue()  # redrawn while running
