"""`python flows/run.py preview`: what `up` would change, per resource and property, changing
nothing (the `preview` flow)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from cli.runs import run_flow_command

if TYPE_CHECKING:
    from stackflow.settings import Settings


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Preview the chosen stacks; the exit code of how the run ended."""
    return run_flow_command(args, settings, "preview")
