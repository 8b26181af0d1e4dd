"""Progress of an iterative stage, one pass over the data at a time.

The iterative solvers (ridge by conjugate gradients, Lanczos, DLM's updates) run one
Dask computation per pass and do not know in advance how many passes they need. On a
terminal, :class:`Passes` shows one tqdm line that is redrawn after every pass (count,
rate, a note such as the fits still converging). When standard error is not a terminal
— a log file, a CronJob's or a batch system's output — redrawing would run every pass
into one line, so nothing is drawn and one line is printed when the stage ends.
"""

from __future__ import annotations

import sys

from tqdm import tqdm


class Passes:
    """``with Passes("ridge", enabled) as passes: … passes.step(note)`` once per pass."""

    def __init__(self, description: str, enabled: bool = True, stream=None):
        self.description, self.enabled, self.count, self.note = description, enabled, 0, ""
        self.stream = stream or sys.stderr
        live = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.bar = tqdm(desc=description, unit=" passes", file=self.stream, leave=True) if live else None

    def step(self, note: str = "") -> None:
        """One more pass; ``note`` says where the stage stands after it."""
        self.count += 1
        self.note = note
        if self.bar is not None:
            self.bar.set_postfix_str(note, refresh=False)
            self.bar.update()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.enabled:
            passes = f"{self.count} pass{'' if self.count == 1 else 'es'}"
            print(f"{self.description}: {passes}{'; ' + self.note if self.note else ''}", file=self.stream, flush=True)

    def __enter__(self) -> "Passes":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
