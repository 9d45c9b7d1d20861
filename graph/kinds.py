"""The kinds of node a graph is declared with: `stack(...)` (a program of `programs/`),
`project(...)` (a team's own Pulumi project folder) and `step(...)` (a task the flow runs).

They are the framework's, not the graph's: `graph/nodes.py` (the graph a team edits) and any
other graph module (`graph = "..."` in stackflow.toml) import them from here, so a graph of
another module never imports `graph/nodes.py` and what it declares.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from stackflow.dag import Node, NodeKind, Upstream, program_sources
from stackflow.projectnodes import ConfigMap, ProjectSource
from stackflow.settings import Settings
from tasks.stacks import stack_operation


def stack(
    name: str,
    description: str,
    *,
    program: Callable[[Any], Mapping[str, Any]],
    inputs: Callable[[Settings, Upstream], BaseModel],
    outputs: type[BaseModel],
    upstream: tuple[str, ...] = (),
    known: Callable[[Settings], Mapping[str, Any]] | None = None,
    destroy_guard: Callable[[Settings], None] | None = None,
    early: tuple[str, ...] = (),
) -> Node:
    """A Pulumi stack node, run by the stack task."""
    return Node(
        name,
        NodeKind.STACK,
        description,
        upstream=upstream,
        outputs=outputs,
        inputs=inputs,
        program=program,
        known=known,
        destroy_guard=destroy_guard,
        task=stack_operation,
        sources=program_sources(program),
        early=early,
    )


def project(
    name: str,
    description: str,
    *,
    folder: str | Path,
    upstream: tuple[str, ...] = (),
    config: ConfigMap | None = None,
    outputs: type[BaseModel] | None = None,
    stack: Callable[[Settings], str] | Mapping[str, str] | None = None,
    destroy_guard: Callable[[Settings], None] | None = None,
) -> Node:
    """A Pulumi Python project of the team's own (its folder with Pulumi.yaml, its program and
    its Pulumi.<stack>.yaml), run by the stack task (docs/guides/project-nodes.md).

    Args:
        folder: the project's folder; a relative one is relative to the module declaring it.
        config: its stack config from settings and upstream outputs (`stackflow.projectnodes`).
        outputs: a model of its exports; None hands them on as they are (untyped).
        stack: which Pulumi.<stack>.yaml an environment reads: by environment name, or a
            function of settings; default: the environment's own name.
    """
    where = Path(folder)
    if not where.is_absolute():
        caller = Path(sys._getframe(1).f_globals.get("__file__") or Path.cwd() / "here")
        where = caller.resolve().parent / where
    chosen = stack
    if isinstance(chosen, Mapping):
        names = dict(chosen)
        chosen = lambda settings: names.get(settings.environment, settings.environment)  # noqa: E731
    return Node(
        name,
        NodeKind.STACK,
        description,
        upstream=upstream,
        outputs=outputs,
        destroy_guard=destroy_guard,
        task=stack_operation,
        project=ProjectSource(where, config, chosen),
    )


def step(
    name: str,
    description: str,
    *,
    task: Any,
    upstream: tuple[str, ...] = (),
    plan: Callable[[Any, Mapping[str, Any]], Any] | None = None,
    check: Callable[[Settings], None] | None = None,
) -> Node:
    """A step the flow runs itself, through its own task."""
    return Node(
        name, NodeKind.STEP, description, upstream=upstream, task=task, plan=plan, check=check
    )
