"""`python flows/run.py drift`: every chosen stack checked for drift (the `drift` flow); exit 3
when some is found, with what to run to settle it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from cli.runs import run_flow_command

if TYPE_CHECKING:
    from stackflow.settings import Settings


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Check the chosen stacks for drift; the exit code of how the run ended."""
    return run_flow_command(args, settings, "drift")
