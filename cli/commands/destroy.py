"""`python flows/run.py destroy`: the environment's stacks destroyed in reverse order (the
`destroy` flow). A protected environment needs --yes, and a stack whose guard refuses (a
database with deletion protection on) is refused, before any server starts."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from cli.options import chosen_stacks
from cli.runs import run_flow_command

if TYPE_CHECKING:
    from stackflow.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add destroy's own options to `parser`."""
    parser.add_argument(
        "--yes", "-y", action="store_true", help="confirm destroying a protected (prod) environment"
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Destroy the chosen stacks; the exit code of how the run ended."""
    return run_flow_command(args, settings, "destroy", _unconfirmed_or_guarded, confirm=args.yes)


def _unconfirmed_or_guarded(args: argparse.Namespace, settings: Settings) -> None:
    """Refuse a destroy that is not confirmed, or that a chosen stack's guard forbids.

    Raises:
        ConfirmationRequired: a protected environment without --yes.
        DeletionProtected: a chosen stack's guard refuses (its deletion protection is on).
    """
    settings.confirm_destroy(args.yes)
    from stackflow.graphs import graph_of

    graph = graph_of(settings)
    for name in graph.select(chosen_stacks(args)):
        guard = graph[name].destroy_guard
        if guard is not None:
            guard(settings)
