"""What every command that runs a flow does (`up`, `preview`, `refresh`, `destroy`, `drift`): the
refusals made before any server starts, the Prefect server, the supervised flow run, its report.

A refused run answers first: no failed run, no traceback in the output, nothing changed, and no
10-15 s server start to hear the answer. The flow checks the same again (for the UI and
schedules).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cli.options import Refused, chosen_stacks
from cli.report import fail, report_lost, report_run
from stackflow import exits

if TYPE_CHECKING:
    from stackflow.settings import Settings

Refusal = Callable[[argparse.Namespace, "Settings"], None]  # raises what it refuses


def run_flow_command(
    args: argparse.Namespace,
    settings: Settings,
    flow: str,
    refuse: Refusal | None = None,
    **parameters: Any,
) -> int:
    """Refuse what must not run, then run the command's flow to its end and report it.

    Args:
        args: the parsed command line (--stacks, --cloud, --json, --verbose, --heartbeat, --tag).
        settings: the command's settings.
        flow: the name of the flow to run in flows.pipeline (imported once nothing is refused).
        refuse: the command's own refusals, after the cloud's: raises ConfirmationRequired,
            DeletionProtected, SettingsError or Refused.
        parameters: the flow's own parameters besides environment, stacks and cloud.

    Returns:
        The exit code of how the run ended (stackflow.exits).
    """
    from stackflow.audit import refusal
    from stackflow.environment_records import guard_environment
    from stackflow.errors import ConfirmationRequired, DeletionProtected, SettingsError

    try:
        settings = guard_environment(settings)  # the cloud, the protection its last up recorded
        if refuse is not None:
            refuse(args, settings)
        if flow in ("deploy", "preview"):
            _ready_policies(settings)
    except (ConfirmationRequired, DeletionProtected, SettingsError, Refused) as exc:
        refusal(settings, args.command, exc)
        return fail(str(exc), exits.USAGE, exc.what_to_do, as_json=args.json)
    from stackflow.graphs import graph_of

    # an unknown stack is refused here, still before any server
    stacks = chosen_stacks(args, graph_of(settings))
    from cli.prefectapi import use_local_cloud, use_local_prefect

    use_local_prefect(settings)
    use_local_cloud(settings)
    from cli.supervise import run_flow

    parameters = {
        "environment": settings.environment,
        "stacks": stacks or None,
        "cloud": getattr(args, "cloud", None),
        **parameters,
    }
    from flows import pipeline

    runner, log_file = run_flow(args, settings, getattr(pipeline, flow), parameters)
    if runner.lost:
        import os

        code = report_lost(log_file, as_json=args.json)
        sys.stdout.flush()
        sys.stderr.flush()
        # Prefect's queued logs and events would retry against the gone server at exit, for a
        # minute, printing tracebacks after the last line: nothing is left to send.
        os._exit(code)
    code = report_run(runner.state, runner.error, args, log_file)
    return exits.TERMINATED if runner.terminated and code == exits.INTERRUPTED else code


def _ready_policies(settings: Settings) -> None:
    """The environment's policy packs ready to run (virtualenvs made, saying so here), or the
    run refused: a pack that cannot start or a rule name no pack has (exit 2, before any server).

    Raises:
        PolicyPackError: naming the pack or the setting.
    """
    policies = settings.policies
    if policies is None:
        return
    from stackflow.policy.staged import prepare

    prepare(policies, settings.state.policy, lambda line: print(line, file=sys.stderr, flush=True))
