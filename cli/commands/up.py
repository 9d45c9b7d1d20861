"""`python flows/run.py up`: deploy the environment, every stack in order (the `deploy` flow).

A protected environment's plan waits for approval: at this terminal, with --yes, or in the
Prefect UI (--approve-in-ui); without a terminal to ask, the run is refused before it starts.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from cli.options import Refused
from cli.runs import run_flow_command

if TYPE_CHECKING:
    from stackflow.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add up's own options to `parser`."""
    parser.add_argument("--force", action="store_true", help="update stacks even if unchanged")
    parser.add_argument(
        "--approve-in-ui",
        action="store_true",
        help="a protected environment's plan waits for a decision in the Prefect UI, with no "
        "terminal asked (what a sync's run does)",
    )
    parser.add_argument(
        "--recreate",
        action="store_true",
        help="deploy anew the stacks whose state is gone from the backend although the records "
        "say they were deployed (refused without it); what is left of them in the cloud stays, "
        "and nothing found there is adopted",
    )
    parser.add_argument(
        "--yes",
        "-y",
        action="store_true",
        help="approve the plan of a protected (prod) environment: it is printed, recorded as "
        "approved at this command line, and applied",
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Deploy; the exit code of how the run ended."""
    return run_flow_command(
        args, settings, "deploy", _refused, force=args.force, recreate=args.recreate
    )


def _refused(args: argparse.Namespace, settings: Settings) -> None:
    """What the flow refuses too, said before any server starts: a protected environment from a
    checkout with edits (it deploys an exact commit), or with no one to approve its plan; stacks
    whose state is gone although they were deployed (without --recreate).

    Raises:
        UncommittedChanges: naming the changed files.
        SettingsError: approvers named, and no allowed signers file this machine can read.
        Refused: see `_no_one_to_ask` and `_state_kept`.
    """
    if settings.exact_commit:
        from stackflow.gitops.git import check_exact_commit

        check_exact_commit(settings.project_dir, settings.environment, settings.exact_commit)
    if settings.approval_required:
        from stackflow.approvals.trusted import signed_rules

        signed_rules(settings)  # approvers named: this machine must be able to check signatures
    _no_one_to_ask(args, settings)
    if not args.recreate:
        _state_kept(args, settings)


def _state_kept(args: argparse.Namespace, settings: Settings) -> None:
    """Refuse an `up` over stacks whose state is gone although they were deployed.

    Raises:
        Refused: naming them and how to restore the state, or `--recreate` (see
            `flows.deployed.ensure_state_kept`).
    """
    from cli.options import chosen_stacks
    from flows.deployed import StateLost, ensure_state_kept
    from stackflow.engine import get_engine
    from stackflow.environment_records import records_of
    from stackflow.graphs import graph_of

    graph = graph_of(settings)  # the project's own graph (its stackflow.toml's `graph`)
    names = graph.select(chosen_stacks(args, graph) or None)
    try:
        ensure_state_kept(settings, get_engine(settings), graph, records_of(settings), names)
    except StateLost as exc:
        raise Refused(str(exc), what_to_do=exc.what_to_do) from None


def _no_one_to_ask(args: argparse.Namespace, settings: Settings) -> None:
    """A protected environment's plan needs a decision: refused when no one can give it here.

    Raises:
        Refused: no --yes, no --approve-in-ui, and no terminal (or --json, which is for scripts).
    """
    gated = settings.approval_required and not args.yes and not args.approve_in_ui
    if gated and (args.json or not sys.stdin.isatty()):
        raise Refused(
            f"{settings.environment} is a protected environment: `up` shows its plan and waits "
            "for approval, and there is no terminal to ask"
            + (" (--json is for scripts)" if args.json else ""),
            what_to_do=f"run it in a terminal to see the plan and answer, add --yes to approve "
            f"the plan it prints, or start deploy/{settings.environment} from the Prefect UI and "
            "approve it there. Nothing was changed.",
        )
