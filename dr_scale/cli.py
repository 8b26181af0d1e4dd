"""The ``dr-scale`` command: one sub-command per module in :mod:`dr_scale.commands`."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from dr_scale.logdata import LogDataError

#: Sub-commands, each a module of dr_scale.commands with ``add_parser(subparsers)``.
COMMANDS = ("evaluate", "fit", "run", "report", "generate")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dr-scale",
        description="Doubly robust off-policy evaluation and learning, from a laptop to a Dask cluster.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"dr_scale.commands.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (LogDataError, FileNotFoundError, ValueError, ConnectionError) as exc:
        print(f"dr-scale {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"dr-scale {args.command}: interrupted; no partial output was written", file=sys.stderr)
        return 130


def console() -> None:
    """The ``dr-scale`` entry point: exit with ``main``'s status.

    After an interrupt (status 130) the process leaves by ``os._exit``: local tasks run on
    daemon threads that may still be inside C++ code (pyarrow, scipy), and a normal
    interpreter shutdown unwinds such threads, which can abort the process (SIGABRT, seen
    in about one Ctrl-C in four) instead of exiting with 130. Everything the command owns
    (clients, clusters, temporary folders) was closed while the interrupt propagated.
    """
    status = main()
    if status == 130:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)


if __name__ == "__main__":
    console()
