"""stackflow's command line: `python flows/run.py <command> [options]` (the `stackflow` script).

Runs the same Prefect flows the UI and schedules run. A command is parsed, then refused if it
must not run, with no server started for that, then dispatched: `up`, `preview`, `refresh`,
`destroy` and `drift` run their flow under supervision (against an embedded Prefect server when
none is configured); the other commands are in cli/commands. `--help` imports nothing heavy, so
it answers at once.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cli.commands import cloud, graph, migrate, outputs, rehearse, server, status, team
from cli.parser import RUN_COMMANDS, build_parser, chosen_stacks
from cli.report import fail, report_run
from stackflow import arenas, exits


def main(argv: list[str] | None = None) -> int:
    """Run one command line (`argv`, default sys.argv[1:]) and return its exit code.

    Raises:
        SystemExit: from argparse, for --help and for options that mean nothing (exit 2).
    """
    arenas.limit()  # before anything starts a thread (stackflow/arenas.py)
    args = build_parser().parse_args(argv)
    if args.command == "graph":
        return graph.run(args)
    from stackflow.errors import StackflowError

    try:
        settings = read_settings(args)
        if args.command not in RUN_COMMANDS:
            return _command(args, settings)
        refused = _refusal(args, settings)
        if refused is not None:
            return refused
        stacks = chosen_stacks(args)  # an unknown stack is refused here, still before any server
        server.use_local_prefect(settings)
        from cli.supervise import run_flow

        runner, log_file = run_flow(args, settings, stacks)
        if runner.lost:
            import os

            from cli.report import report_lost

            code = report_lost(log_file)
            sys.stdout.flush()
            sys.stderr.flush()
            # Prefect's queued logs and events would retry against the gone server at exit,
            # for a minute, printing tracebacks after the last line: nothing is left to send.
            os._exit(code)
        code = report_run(runner.state, runner.error, args, log_file)
        return exits.TERMINATED if runner.terminated and code == exits.INTERRUPTED else code
    except StackflowError as exc:
        return fail(str(exc), exits.USAGE if isinstance(exc, ValueError) else exits.FAILED)
    except KeyboardInterrupt:
        return fail("interrupted", exits.INTERRUPTED)


def read_settings(args: argparse.Namespace) -> Any:
    """The command's settings: the file of the environment --env names (default dev), --cloud
    when given, and this machine's STACKFLOW_* variables and .env. The one place the command line
    reads settings; the flow run gets the same environment and cloud as its parameters.

    Raises:
        SettingsError: a setting, variable or name that is not accepted (a variable that names
            an environment's setting too: what an environment deploys lives in its file).
    """
    from stackflow.settings import get_settings

    cloud = getattr(args, "cloud", None)
    if args.command == "rehearse":
        cloud = cloud or "local"  # a rehearsal reaches AWS only when told to
    settings = get_settings(getattr(args, "environment", None) or "dev", cloud)
    settings.state.check()  # a state folder that is a file, unwritable or read-only: named now
    return settings


def _command(args: argparse.Namespace, settings: Any) -> int:
    """The commands that run no flow (and need no Prefect server)."""
    if args.command == "outputs":
        return outputs.run(args, settings)
    if args.command == "server":
        return server.run(args, settings)
    if args.command == "cloud":
        return int(cloud.run(args, settings))
    if args.command == "status":
        return status.run(args, settings)
    if args.command == "rehearse":
        return rehearse.run(args, settings)
    if args.command == "team":
        return team.run(args, settings)
    from graph import database_target

    return int(migrate.run(args, settings, target_from_stack=lambda: database_target(settings)))


def _refusal(args: argparse.Namespace, settings: Any) -> int | None:
    """The exit code of a run refused before any server starts or flow run is created, or None.

    The same checks the flow makes (for the UI and schedules), made first here: no failed run, no
    traceback in the output, nothing changed, and no 10-15 s server start to hear the answer.
    """
    from stackflow.errors import ConfirmationRequired, DeletionProtected, SettingsError
    from stackflow.records.environments import check_cloud

    try:
        check_cloud(settings)
        if args.command == "destroy":
            settings.confirm_destroy(args.yes)
            from graph import GRAPH

            for name in GRAPH.select(chosen_stacks(args)):
                guard = GRAPH[name].destroy_guard
                if guard is not None:
                    guard(settings)
    except (ConfirmationRequired, DeletionProtected, SettingsError) as exc:
        return fail(str(exc), exits.USAGE)
    gated = args.command == "up" and settings.approval_required
    ui_only = getattr(args, "approve_in_ui", False)
    if gated and not args.yes and not ui_only and (args.json or not sys.stdin.isatty()):
        return fail(
            f"{settings.environment} is a protected environment: `up` shows its plan and waits "
            "for approval, and there is no terminal to ask"
            + (" (--json is for scripts)" if args.json else ""),
            exits.USAGE,
            f"run it in a terminal to see the plan and answer, add --yes to approve the plan it "
            f"prints, or start deploy/{settings.environment} from the Prefect UI and approve it "
            "there. Nothing was changed.",
        )
    return None


def drop_event_loop_noise(unraisable: Any) -> None:
    """At exit, the garbage collector closes event loops Prefect's threads left behind, and asyncio
    prints "Exception ignored in BaseEventLoop.__del__ ... Invalid file descriptor" after our last
    line. That one is noise; anything else unraisable is reported as usual."""
    where = getattr(unraisable.object, "__qualname__", "")
    if where == "BaseEventLoop.__del__" and isinstance(unraisable.exc_value, ValueError):
        return
    sys.__unraisablehook__(unraisable)
