"""`python flows/run.py refresh`: the stacks' state updated from what exists in the cloud (the
`refresh` flow)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from cli.runs import run_flow_command

if TYPE_CHECKING:
    from stackflow.settings import Settings


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Refresh the chosen stacks; the exit code of how the run ended."""
    return run_flow_command(args, settings, "refresh")
