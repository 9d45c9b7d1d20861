"""`python flows/run.py rehearse PATH [--stack NAME] [--cloud local|aws] [--preview | --destroy]`:
an existing Pulumi Python project's stack through stackflow's engine (see stackflow.rehearse).

Straight through the engine, from this process: no Prefect server is started and no flow run is
recorded (the project is a folder on this machine; its program runs in a process of its own).
The screen is the other commands': the live view on stderr, the summary table (or --json) on
stdout, an `error:` line and a `what to do:` line when it did not succeed, and the same exit
codes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.options import Once, cloud
from stackflow import exits

if TYPE_CHECKING:
    from stackflow.settings import Settings


def add_cloud(parser: argparse.ArgumentParser) -> None:
    """--cloud: where to rehearse (the local cloud unless told otherwise)."""
    cloud(parser, "where to rehearse: local (the default: moto on loopback, never AWS) or aws")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The rehearse command's own arguments (--json, -v and --heartbeat are the runs' own)."""
    parser.add_argument(
        "--stack",
        "-s",
        metavar="NAME",
        action=Once,
        help="the project's stack: whose Pulumi.<stack>.yaml config to use and whose name to "
        "deploy under (default: the project's only stack file, else dev); give it once",
    )
    parser.add_argument(
        "path",
        metavar="PATH",
        type=Path,
        help="the Pulumi project's folder (where its Pulumi.yaml and __main__.py are)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--preview",
        action="store_true",
        help="only preview: on the local cloud, name every type and function it does not "
        "serve; change nothing",
    )
    mode.add_argument(
        "--destroy",
        action="store_true",
        help="destroy what the rehearsal deployed and remove its stack from stackflow's backend",
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Rehearse the project at `args.path`; the exit code of how it ended.

    Raises:
        ProjectError: the folder is not a Pulumi Python project stackflow can run (exit 2).
    """
    # The project's folder is only read: no __pycache__ is written there, by its program's
    # process (see stackflow.engine.automation.host) nor by this one.
    sys.dont_write_bytecode = True
    import logging

    from cli.live import make_view, new_log_file, routed_logs
    from cli.supervise import sigterm_interrupts
    from stackflow.engine import get_engine
    from stackflow.progress import RunStarted, hub
    from stackflow.rehearse import Action, listener_for, prepare

    action = Action.DESTROY if args.destroy else Action.PREVIEW if args.preview else Action.UP
    rehearsal = prepare(args.path, args.stack, action, settings, os.environ)
    for notice in rehearsal.notices:
        print(f"note: {notice}", file=sys.stderr)
    operation = "rehearse" if action is Action.UP else f"rehearse {action.value}"
    log_file = new_log_file(
        settings.state_dir, "rehearse", f"{rehearsal.project.name}-{rehearsal.stack}"
    )
    logger = logging.getLogger("stackflow.rehearse")
    logger.setLevel(logging.INFO)
    listener = listener_for(rehearsal, logger.info)
    progress = hub()
    progress.reset()
    view = make_view(sys.stderr, args.heartbeat)
    with (
        routed_logs(log_file, view.echo if args.verbose else None),
        view,
        progress.subscribed(view.on_event),
        sigterm_interrupts(),
    ):
        progress.publish(
            RunStarted(rehearsal.name, operation, (rehearsal.project.name,), rehearsal.target)
        )
        outcome, terminated = _supervised(rehearsal, get_engine(settings), listener, view)
    return _report(outcome, operation, listener.redactor, args, log_file, terminated)


def _supervised(rehearsal: Any, engine: Any, listener: Any, view: Any) -> tuple[Any, bool]:
    """Run the rehearsal in a thread while this one keeps Ctrl-C and SIGTERM: the first cancels
    the running operation cleanly, a second stops at once."""
    from cli.supervise import Terminated
    from stackflow.progress import hub
    from stackflow.rehearse import run

    done: dict[str, Any] = {}
    # An Event, not Thread.join: a signal landing inside join() can leave the thread looking
    # finished while it still runs (Python 3.11).
    finished = threading.Event()

    def work() -> None:
        try:
            done["outcome"] = run(rehearsal, engine, listener)
        except BaseException as exc:  # a bug: reported by this thread, with its traceback
            done["error"] = exc
        finally:
            finished.set()

    threading.Thread(target=work, name="rehearse", daemon=True).start()
    terminated = False
    try:
        while not finished.wait(0.1):
            pass
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, Terminated)
        view.echo(
            "interrupted: cancelling the running operation; Pulumi finishes the resource "
            "operations in flight (press Ctrl-C again to stop at once)"
        )
        hub().cancel(interrupt=True)
        try:
            while not finished.wait(0.1):
                pass
        except KeyboardInterrupt:
            hub().cancel(interrupt=True)
            view.echo("stopped at once: the next rehearsal clears what was left pending")
            os._exit(exits.INTERRUPTED)
    if "error" in done:
        raise done["error"]
    return done["outcome"], terminated


def summary_of(outcome: Any, operation: str, redactor: Any) -> dict[str, Any]:
    """The run's summary in the shape every command prints (secrets masked)."""
    from stackflow.rehearse import Action

    rehearsal = outcome.rehearsal
    error = outcome.error
    last = outcome.results[-1] if outcome.results else None
    return {
        "environment": rehearsal.name,
        "operation": operation,
        "engine": "automation",
        "target": rehearsal.target,
        "project": {
            "folder": str(rehearsal.project.folder),
            "name": rehearsal.project.name,
            "stack": rehearsal.stack,
        },
        "failed": error.reason if error is not None else None,
        "notes": list(rehearsal.notices),
        "engine_calls": [f"{op.value}:{rehearsal.project.name}" for op in outcome.calls],
        "duration_s": round(outcome.duration_s, 3),
        "stacks": [
            {
                "stack": rehearsal.project.name,
                "operation": outcome.calls[-1].value if outcome.calls else rehearsal.action.value,
                "status": outcome.status.value if outcome.status is not None else None,
                "changes": outcome.changes.as_dict(),
                "duration_s": round(sum(r.duration_s for r in outcome.results), 3),
                "outputs": shown_outputs(outcome.outputs, redactor),
                "note": _headline(error.reason) if error is not None else "",
                "retries": [],
                "healed": None,
                "resources": [r.as_dict() for r in last.resource_changes]
                if last is not None and rehearsal.action is Action.PREVIEW
                else [],
            }
        ],
        "ui_url": None,
        "approvals": [],
        "migrations": None,
        "stopped": None,
    }


def shown_outputs(outputs: dict[str, Any], redactor: Any) -> dict[str, Any]:
    """Outputs as they may be shown: secret ones masked, and any secret the run knows (a secret
    config value exported as a plain output) masked inside the others."""
    shown: dict[str, Any] = {}
    for key, value in outputs.items():
        plain = value.shown()
        text = json.dumps(plain, sort_keys=True, default=str)
        shown[key] = plain if redactor(text) == text else redactor(str(plain))
    return shown


def _headline(reason: str) -> str:
    from cli.live.board import headline

    return headline(reason)


def _report(
    outcome: Any,
    operation: str,
    redactor: Any,
    args: argparse.Namespace,
    log_file: Path,
    terminated: bool,
) -> int:
    from cli.report import fail, print_summary
    from stackflow.errors import UnservedTypes
    from stackflow.outcome import Status

    summary = summary_of(outcome, operation, redactor)
    print_summary(summary, args.json)
    outputs = summary["stacks"][0]["outputs"]
    if outputs and not args.json:
        print(f"outputs of {outcome.rehearsal.name}:")
        for key, value in outputs.items():
            shown = value if isinstance(value, str) else json.dumps(value, default=str)
            print(f"  {key:<24} {shown}")
    print(f"log: {log_file}", file=sys.stderr)
    error = outcome.error
    if error is None:
        return exits.OK
    log_hint = f"the full log is {log_file} (-v shows it as it comes)"
    if outcome.status is Status.CANCELLED:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        return fail(
            str(error),
            exits.TERMINATED if terminated else exits.INTERRUPTED,
            "run the same command again: it clears what the interrupted operation left (its "
            "lock and pending operations) and carries on",
            log=log_file,
        )
    if isinstance(error, UnservedTypes):
        traceback = f"; the program's traceback is in {log_file}" if error.stopped else ""
        return fail(
            str(error),
            exits.FAILED,
            "nothing was created. docs/reference/local-cloud-types.md lists what it serves; "
            "rehearse the project on AWS (--cloud aws), or keep those resources out of the "
            f"stack you rehearse locally{traceback}",
            log=log_file,
        )
    return fail(
        str(error), exits.FAILED, f"fix what it names, then run it again; {log_hint}", log=log_file
    )
