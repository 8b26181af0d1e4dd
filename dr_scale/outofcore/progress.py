"""Progress on a terminal and in a log: iterative stages (:class:`Passes`) and Dask graphs (:func:`graph_bar`).

The iterative solvers (ridge by conjugate gradients, Lanczos, DLM's updates) run one
Dask computation per pass and do not know in advance how many passes they need. On a
terminal, :class:`Passes` shows one tqdm line that is redrawn after every pass (count,
rate, a note such as the fits still converging), and :func:`graph_bar` is Dask's bar,
redrawn as a graph's tasks finish. When standard error is not a terminal — a log file, a
CronJob's or a batch system's output — redrawing would run every state into one line,
so nothing is redrawn: one line when a stage or a graph ends.
"""

from __future__ import annotations

import sys

from dask.diagnostics import ProgressBar
from tqdm import tqdm


def _is_terminal(stream) -> bool:
    return hasattr(stream, "isatty") and stream.isatty()


class _FinalStateBar(ProgressBar):
    """Dask's bar without its redraws: only the final state, on a line of its own."""

    def _timer_func(self):  # the thread that redraws the bar while the graph runs: nothing to do
        return

    def _draw_bar(self, frac, elapsed):
        stream, self._file = self._file, _NoCarriageReturn(self._file)
        try:
            super()._draw_bar(frac, elapsed)
        finally:
            self._file = stream


class _NoCarriageReturn:
    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> None:
        """Write ``text`` without its leading carriage returns (a log file keeps each line)."""
        self.stream.write(text.lstrip("\r"))

    def flush(self) -> None:
        """Flush the stream."""
        self.stream.flush()


def graph_bar(stream=None) -> ProgressBar:
    """Dask's progress bar for the local scheduler: redrawn on a terminal, its final state in a log."""
    stream = stream or sys.stderr
    return ProgressBar(out=stream) if _is_terminal(stream) else _FinalStateBar(out=stream)


class Passes:
    """``with Passes("ridge", enabled) as passes: … passes.step(note)`` once per pass."""

    def __init__(self, description: str, enabled: bool = True, stream=None):
        self.description, self.enabled, self.count, self.note = description, enabled, 0, ""
        self.stream = stream or sys.stderr
        live = enabled and _is_terminal(self.stream)
        self.bar = tqdm(desc=description, unit=" passes", file=self.stream, leave=True) if live else None

    def step(self, note: str = "") -> None:
        """One more pass; ``note`` says where the stage stands after it."""
        self.count += 1
        self.note = note
        if self.bar is not None:
            self.bar.set_postfix_str(note, refresh=False)
            self.bar.update()

    def close(self) -> None:
        """Close the bar, or print ``DESCRIPTION: N passes`` where no bar was drawn."""
        if self.bar is not None:
            self.bar.close()
        elif self.enabled:
            passes = f"{self.count} pass{'' if self.count == 1 else 'es'}"
            print(f"{self.description}: {passes}{'; ' + self.note if self.note else ''}", file=self.stream, flush=True)

    def __enter__(self) -> Passes:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
