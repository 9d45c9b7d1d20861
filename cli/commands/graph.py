"""`python flows/run.py graph`: the stack graph as the code declares it (needs no settings)."""

from __future__ import annotations

import argparse
import json


def run(args: argparse.Namespace) -> int:
    """Print the graph as Mermaid, or its nodes as one JSON object (--json); 0."""
    from stackflow.graph import GRAPH

    if args.json:
        nodes = [
            {"name": n, "kind": GRAPH[n].kind.value, "upstream": list(GRAPH[n].upstream)}
            for n in GRAPH.order()
        ]
        print(json.dumps({"nodes": nodes}, indent=2))
    else:
        print(GRAPH.mermaid())
    return 0
