"""stackflow's command line: `python flows/run.py <command> [options]` (the `stackflow` script).

Runs the same Prefect flows the UI and schedules run. A command line is parsed, the command's
settings read, and the command run: each is one entry of the table in cli/commands/__init__.py,
which names it, its help, its options and the function that runs it. `up`, `preview`, `refresh`,
`destroy` and `drift` refuse what must not run before any server starts, then run their flow under
supervision (against the project's local Prefect server when none is configured). `--help`
imports nothing heavy, so it answers at once.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from cli.command import CodeCommand, Command
from cli.commands import COMMANDS
from cli.parser import build_parser
from cli.report import bug, fail
from stackflow import arenas, exits


def main(
    argv: list[str] | None = None, commands: Sequence[Command | CodeCommand] = COMMANDS
) -> int:
    """Run one command line (`argv`, default sys.argv[1:]) and return its exit code.

    Args:
        argv: the arguments after the program's name.
        commands: the table of commands (a test may add one).

    Raises:
        SystemExit: from argparse, for --help and for options that mean nothing (exit 2).
    """
    arenas.limit()  # before anything starts a thread (stackflow/arenas.py)
    args = build_parser(commands).parse_args(argv)
    command = next(c for c in commands if c.name == args.command)
    if isinstance(command, CodeCommand):
        return command.run(args)
    from stackflow.errors import StackflowError

    as_json = bool(getattr(args, "json", False))
    try:
        return command.run(args, command.settings(args))
    except StackflowError as exc:
        code = exits.USAGE if isinstance(exc, ValueError) else exits.FAILED
        return fail(str(exc), code, exc.what_to_do, log=exc.log_file, as_json=as_json)
    except KeyboardInterrupt:
        return fail("interrupted", exits.INTERRUPTED, as_json=as_json)
    except Exception as exc:
        from stackflow.infrastructure import named

        fault = named(exc)  # a full disk, a read-only file system: an outcome, not a bug
        if fault is not None:
            return fail(str(fault), exits.FAILED, fault.what_to_do, as_json=as_json)
        return bug(exc, as_json=as_json)


def drop_event_loop_noise(unraisable: Any) -> None:
    """At exit, the garbage collector closes event loops Prefect's threads left behind, and asyncio
    prints "Exception ignored in BaseEventLoop.__del__ ... Invalid file descriptor" after our last
    line. That one is noise; anything else unraisable is reported as usual."""
    where = getattr(unraisable.object, "__qualname__", "")
    if where == "BaseEventLoop.__del__" and isinstance(unraisable.exc_value, ValueError):
        return
    sys.__unraisablehook__(unraisable)
