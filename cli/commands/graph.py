"""`python flows/run.py graph`: the stack graph as the code declares it (the module the project's
stackflow.toml names, `graph`; needs no other settings)."""

from __future__ import annotations

import argparse
import json


def run(args: argparse.Namespace) -> int:
    """Print the graph as Mermaid, or its nodes as one JSON object (--json); 0 (2: the
    project's `graph` setting names no graph)."""
    from cli.report import fail
    from stackflow import exits
    from stackflow.errors import SettingsError
    from stackflow.graphs import project_graph

    try:
        graph = project_graph()
    except SettingsError as exc:  # the project's `graph` setting names no graph
        return fail(str(exc), exits.USAGE, as_json=args.json)
    if args.json:
        print(json.dumps(graph.as_dict(), indent=2))
    else:
        print(graph.mermaid())
    return 0
