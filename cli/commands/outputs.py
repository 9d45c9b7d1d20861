"""`python flows/run.py outputs`: the stacks' outputs, read from the backend (secrets masked)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from cli.options import chosen_stacks

if TYPE_CHECKING:
    from stackflow.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add outputs' own options to `parser`."""
    parser.add_argument("--json", action="store_true", help="print one JSON object keyed by stack")


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print each chosen stack's outputs (or one JSON object keyed by stack); 0.

    Raises:
        UnknownStackError: --stacks names a stack the graph does not declare.
    """
    from stackflow.dag import user_outputs
    from stackflow.engine import get_engine
    from stackflow.graphs import graph_of

    engine = get_engine(settings)
    graph = graph_of(settings)
    wanted = chosen_stacks(args) or graph.stacks
    result = {
        n: {
            k: v.shown()
            for k, v in user_outputs(engine.outputs(graph.bare_spec(settings, n))).items()
        }
        for n in wanted
        if n in graph.stacks
    }
    if args.json:
        if settings.target_label != "AWS":  # stdout stays pure JSON; the caveat goes beside it
            print(f"{settings.target_label} outputs: nothing was deployed to AWS", file=sys.stderr)
        print(json.dumps(result, indent=2, sort_keys=True))
        return 0
    where = f" [{settings.target_label}]" if settings.target_label != "AWS" else ""
    for stack, outs in result.items():
        print(f"{settings.environment}/{stack}{where}" + ("" if outs else ": not deployed"))
        for k, v in outs.items():
            print(f"  {k:<24} {v}")
    return 0
