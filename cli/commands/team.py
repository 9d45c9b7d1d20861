"""`python flows/run.py team import|rotate-passphrase`: moving a one-machine state folder into the
team's backend, and rotating the team's passphrase (stackflow.teamops does the work)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stackflow.settings import Settings


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        choices=("import", "rotate-passphrase", "adopt"),
        help="import: move every stack and record of a one-machine state folder (--from-state) "
        "into the team's backend (STACKFLOW_BACKEND_URL), secrets encrypted for the team's "
        "passphrase (STACKFLOW_STATE_PASSPHRASE); the folder's own passphrase from "
        "STACKFLOW_FROM_STATE_PASSPHRASE (default: the one its local cloud generated). "
        "rotate-passphrase: re-encrypt every stack in the backend from STACKFLOW_STATE_PASSPHRASE "
        "to the new passphrase, read from STACKFLOW_NEW_STATE_PASSPHRASE or standard input "
        "(never from the command line). "
        "adopt: move the deployed stack of a project node (--node) from the team's own backend "
        "(--from-backend) into stackflow's, as the environment's stack, so its first up creates "
        "nothing; the project's passphrase from PULUMI_CONFIG_PASSPHRASE(_FILE)",
    )
    p.add_argument("--node", metavar="NAME", help="adopt: the project node to adopt")
    p.add_argument(
        "--from-backend",
        metavar="URL",
        help="adopt: the backend the project was deployed from (file://, s3://, postgres://)",
    )
    p.add_argument(
        "--from-stack",
        metavar="NAME",
        help="adopt: its stack there (default: the stack file the node reads for the environment)",
    )
    p.add_argument(
        "--from-state",
        metavar="DIR",
        type=Path,
        help="import: the state folder of the one-person setup (its pulumi-<cloud> file backend "
        "and records/)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


def read_new_passphrase() -> tuple[str, str]:
    """The new passphrase and where it came from: the variable, else the terminal (asked twice,
    not echoed), else one line of standard input.

    Raises:
        TeamOpsRefused: the two typed differ.
    """
    from stackflow.teamops import TeamOpsRefused
    from stackflow.teamops.rotation import NEW_PASSPHRASE

    value = os.environ.get(NEW_PASSPHRASE)
    if value is not None:
        return value, NEW_PASSPHRASE
    if sys.stdin.isatty():
        import getpass

        first = getpass.getpass("new passphrase: ")
        if getpass.getpass("the new passphrase again: ") != first:
            raise TeamOpsRefused("the two new passphrases typed differ. Nothing was changed.")
        return first, "the terminal"
    line = sys.stdin.readline()
    return line.removesuffix("\n").removesuffix("\r"), f"standard input (or {NEW_PASSPHRASE})"


def _adopt(args: argparse.Namespace, settings: Settings, say: Any) -> Any:
    """`team adopt`: a deployed project's stack into stackflow's backend (stackflow.teamops)."""
    from stackflow.graphs import graph_of
    from stackflow.rehearse.secrets import passphrase_from
    from stackflow.teamops import TeamOpsRefused
    from stackflow.teamops.adopting import adopt

    if not args.node or not args.from_backend:
        raise TeamOpsRefused(
            "team adopt needs --node NAME (a project node) and --from-backend URL (where the "
            "project is deployed now)"
        )
    found = passphrase_from(os.environ)
    if found is None:
        raise TeamOpsRefused(
            "team adopt needs the project's passphrase: set PULUMI_CONFIG_PASSPHRASE or "
            "PULUMI_CONFIG_PASSPHRASE_FILE as for `pulumi up`. Nothing was changed."
        )
    return adopt(
        settings,
        graph_of(settings),
        args.node,
        args.from_backend,
        args.from_stack,
        found.value,
        found.source,
        say,
    )


def audited(settings: Settings, action: str, report: dict[str, Any], secrets: list[str]) -> None:
    """The team operation that completed, in the audit log (what it did to each stack)."""
    from stackflow.audit import Action, record

    what = {
        "import": Action.STATE_IMPORTED,
        "rotate-passphrase": Action.PASSPHRASE_ROTATED,
        "adopt": Action.STACK_ADOPTED,
    }[action]
    environment = settings.environment if action == "adopt" else None
    record(settings, what, environment=environment, details=report, secrets=secrets)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run the team operation; 0 when it completed.

    Raises:
        TeamOpsRefused: bad input or a target it must not touch (exit 2); nothing was changed.
        StackflowError: an operation failed (exit 1); what completed before it is said.
    """
    from stackflow.teamops import TeamOpsRefused

    say = (lambda line: print(line, file=sys.stderr)) if args.json else print
    footer: list[str] = []
    secrets: list[str] = []
    if args.action == "adopt":
        report: Any = _adopt(args, settings, say)
    elif args.action == "import":
        from stackflow.teamops.moving import find_source, move_state

        if args.from_state is None:
            raise TeamOpsRefused("team import needs --from-state DIR: the state folder to move")
        source = find_source(args.from_state, settings.cloud, os.environ)
        say(
            f"moving the {settings.cloud} stacks and the records of {source.state_dir} into the "
            "team's backend"
        )
        moved = move_state(settings, source, say=lambda _line: None)
        report = moved
        footer = [
            f"{source.state_dir} is left as it was (the stacks' update history stays there): run "
            "nothing against it any more; every run now goes to the team's backend.",
        ]
    else:
        from stackflow.teamops.rotation import (
            check_new_passphrase,
            current_passphrase,
            rotate_passphrase,
        )

        if args.from_state is not None:
            raise TeamOpsRefused("--from-state is for `team import`; rotation acts on the backend")
        current = current_passphrase(settings)  # refused before the new one is asked for
        new, where = read_new_passphrase()
        check_new_passphrase(new, current, where)
        say(f"re-encrypting every {settings.project} stack in the backend under the new passphrase")
        report = rotate_passphrase(settings, new)
        secrets = [new]
        footer = [
            "Give every worker and shell the new STACKFLOW_STATE_PASSPHRASE now (restart the "
            "workers). A stack with secret outputs runs once at its next up (0 changes) and is "
            "stamped again; the others keep being skipped.",
        ]
    audited(settings, args.action, report.as_dict(), secrets)
    for line in report.lines():
        say(line)
    for line in footer:
        say(line)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2, sort_keys=True))
    return 0
