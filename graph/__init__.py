"""The pipeline as data: the stacks and steps every flow walks, declared in `graph/nodes.py`."""

from __future__ import annotations

from graph.nodes import GRAPH, database_target

__all__ = ["GRAPH", "database_target"]
