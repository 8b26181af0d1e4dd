"""The ``dr-scale`` command: one sub-command per module in :mod:`dr_scale.commands`.

Exit statuses, for every sub-command: 0 success; 2 an error — a user or environment error
(bad option, file, data, model, unreachable store or scheduler: a
:class:`~dr_scale.core.errors.UserError` or one of the library errors
:func:`~dr_scale.core.errors.describe` reads as the environment's) is one line on stderr naming
what is wrong and what to do, any other error is a bug of dr-scale and its line says
"unexpected", with the hint to report it; no traceback unless ``--debug``; 3 bad partitions
in ``report``; 4 a ``report`` written that carries a support, drift or verdict alert its ``fail_on``
names; 130 interrupted. Sub-commands raise; :func:`main` is the one place errors
become a status and a message (:func:`dr_scale.core.errors.describe`), where a library
error's parameter names become the command's flags
(:func:`dr_scale.commands.common.option_flags`).
"""

from __future__ import annotations

import os
import sys

try:  # Ctrl-C while the command's first modules import (a busy machine: a good part of a second): as in main()
    import argparse
    import contextlib
    import importlib
    import signal
    import traceback

    from dr_scale.core.errors import describe
except KeyboardInterrupt:
    sys.stderr.write("dr-scale: interrupted while starting; nothing was begun\n")
    os._exit(130)

#: Sub-commands, each a module of dr_scale.commands with ``add_parser(subparsers)`` (``import`` is the module
#: ``import_``: ``import`` is a Python keyword; ``fit-propensity`` the module ``fit_propensity``).
COMMANDS = ("evaluate", "fit", "fit-propensity", "learn", "run", "report", "generate", "import")
MODULES = {"import": "import_", "fit-propensity": "fit_propensity"}
EXIT_ERROR, EXIT_INTERRUPTED = 2, 130


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error (no usage block), exit status 2, as every other error."""

    def error(self, message: str):
        """Print ``dr-scale …: error: MESSAGE (see dr-scale … --help)`` on one line and exit 2."""
        self.exit(EXIT_ERROR, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} --help)\n")


def _add_debug(parser: argparse.ArgumentParser) -> None:
    """``--debug`` on the parser and on every sub-command's parser, however deep."""
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="print the traceback of an error")
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in set(action.choices.values()):
                _add_debug(sub)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every sub-command, or ``only`` the one named (its module alone is imported —
    a command's start does not import the others' libraries)."""
    parser = Parser(
        prog="dr-scale",
        description="Doubly robust off-policy evaluation and learning, from a laptop to a Dask cluster.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS if only is None else (only,):
        importlib.import_module(f"dr_scale.commands.{MODULES.get(name, name)}").add_parser(sub)
    _add_debug(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command; return its exit status (never raises, except for a second interrupt)."""
    words = sys.argv[1:] if argv is None else argv
    try:
        if any(w == "--local-workers" or w.startswith("--local-workers=") for w in words):
            from dr_scale.outofcore.compute import start_worker_server

            start_worker_server()  # the workers' forkserver imports while the command starts
        parser = build_parser(words[0] if words and words[0] in COMMANDS else None)
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a bad option (one line already printed)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_ERROR)
    except KeyboardInterrupt:  # while the command starts (its imports): nothing was begun
        print("dr-scale: interrupted while starting; nothing was begun", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - e.g. a help text that does not format
        print(f"dr-scale: error: {describe(exc)}", file=sys.stderr)
        return EXIT_ERROR
    prog = f"dr-scale {args.command}"
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt as exc:
        print(f"{prog}: interrupted; {str(exc) or 'nothing was half-written (each output is complete or absent)'}",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the one place an error becomes a message and a status
        if getattr(args, "debug", False):
            traceback.print_exc()
        from dr_scale.commands.common import option_flags  # imported with the sub-commands already

        print(f"{prog}: error: {describe(exc, option_flags(parser, args))}", file=sys.stderr)
        return EXIT_ERROR


def _terminated(signum, frame):
    """SIGTERM (a scheduler's timeout, ``kill``) ends the command as Ctrl-C does: cleaned up, status 130."""
    raise KeyboardInterrupt


def console() -> None:
    """The ``dr-scale`` entry point: exit with ``main``'s status through ``os._exit``, for every status.

    Local tasks run on daemon threads that may still be inside C++ code when the command
    returns — after an error in one Dask task, its siblings go on reading Parquet. A
    normal interpreter shutdown then waits on pyarrow's thread pool or destroys it under
    a running worker: the process hangs in ``exit()`` or aborts (status 134, "terminate
    called without an active exception"), about one run in ten. ``os._exit`` leaves
    without joining those threads or running C++ static destructors. It is safe because
    everything the command owns is closed before ``main`` returns — clients, clusters,
    spill folders and output files are context managers, every output is written to a
    temporary name and renamed — so only the standard streams need flushing here.
    """
    signal.signal(signal.SIGTERM, _terminated)
    status = main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # e.g. a closed pipe (``dr-scale … | head``)
            stream.flush()
    os._exit(status)


if __name__ == "__main__":
    console()
