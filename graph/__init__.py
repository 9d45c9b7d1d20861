"""The pipeline as data: the kinds of node (`graph/kinds.py`) and the graph declared with them
(`graph/nodes.py`, the one a team edits).

`GRAPH` is read from `graph/nodes.py` only when asked for, so a graph of another module
(`graph = "..."` in stackflow.toml) that imports `graph.kinds` never runs it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graph.nodes import GRAPH

__all__ = ["GRAPH"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("graph.nodes"), name)
    raise AttributeError(f"module 'graph' has no attribute {name!r}")
