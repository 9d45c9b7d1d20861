"""`python flows/run.py graph`: the stack graph as the code declares it (needs no settings)."""

from __future__ import annotations

import argparse
import json


def run(args: argparse.Namespace) -> int:
    """Print the graph as Mermaid, or its nodes as one JSON object (--json); 0."""
    from graph import GRAPH

    if args.json:
        print(json.dumps(GRAPH.as_dict(), indent=2))
    else:
        print(GRAPH.mermaid())
    return 0
