"""`python flows/run.py graph`: the stack graph as the code declares it (the module the project's
stackflow.toml names, `graph`; needs no other settings)."""

from __future__ import annotations

import argparse
import json


def run(args: argparse.Namespace) -> int:
    """Print the graph as Mermaid, or its nodes as one JSON object (--json); 0."""
    from stackflow.graphs import project_graph

    graph = project_graph()
    if args.json:
        print(json.dumps(graph.as_dict(), indent=2))
    else:
        print(graph.mermaid())
    return 0
