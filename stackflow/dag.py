"""The stack graph's types: nodes as data, and the graph that derives everything from them.

A node is a Pulumi stack (its program, the arguments it is built from, its typed outputs) or a
step the flow runs itself (the task that runs it). Order, reverse order (destroy), targeting,
the critical path and the Mermaid picture are derived from the declaration; nothing else
hard-codes the order. The declaration itself is `tasks.graph.GRAPH` (steps name their Prefect
tasks, which live above this layer); this module knows no node by name.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from programs.common import contains_unknown
from stackflow.engine.base import (
    INTERNAL_OUTPUT,
    ConfigValue,
    OutputValue,
    StackSpec,
)
from stackflow.errors import MissingOutputError, PermanentStackError, UnknownStackError, echo
from stackflow.projection import Projection, Untyped, parse_outputs, project_outputs, untyped
from stackflow.settings import Settings

__all__ = [  # what callers import from here, wherever it is defined
    "GraphError",
    "Node",
    "NodeKind",
    "Projection",
    "StackGraph",
    "Untyped",
    "Upstream",
    "bare_spec",
    "parse_outputs",
    "program_sources",
    "project_outputs",
    "stack_config",
    "untyped",
    "user_outputs",
]

Upstream = Mapping[str, BaseModel]
"""The typed outputs of a node's upstream stacks, by node name."""


class ProjectNode(Protocol):
    """What the graph asks of a project node's source (`stackflow.projectnodes.ProjectSource`,
    which builds on this module): the graph never imports it."""

    @property
    def folder(self) -> Path: ...

    def spec(
        self,
        graph: StackGraph,
        name: str,
        settings: Settings,
        upstream: Upstream,
        secrets: Collection[str],
    ) -> tuple[StackSpec, Any]: ...

    def bare_spec(self, settings: Settings, name: str) -> StackSpec: ...


class NodeKind(StrEnum):
    STACK = "stack"  # a Pulumi stack, acted on through the engine (a program, or a project)
    STEP = "step"  # a step run by the flow itself (migrations, verification)


@dataclass(frozen=True)
class Node:
    """One node of the graph.

    Attributes:
        name: the node's name (a stack's name is its Pulumi project's suffix).
        kind: a Pulumi stack, or a step.
        description: one line for the graph's picture and the docs.
        upstream: the nodes whose outputs (or completion) this one needs, declared earlier.
        outputs: a stack's typed outputs model (one field per exported output).
        inputs: a stack's program arguments, built from settings and upstream outputs.
        program: a stack's Pulumi program: a plain function of those arguments.
        known: a stack's outputs known from settings alone, for a preview that does not report
            them (see `project_outputs`; the rest are unknown).
        task: the Prefect task that runs the node (a step's own; stacks share the stack task).
        plan: a step's read-only account of what it would do, for previews and approvals
            (called with the run's context and the outcomes of the stacks it reads).
        destroy_guard: a stack's check before a destroy reaches anything (raises to refuse).
        check: a step's check of its own input before an `up` changes anything (raises, naming
            what is wrong): a stack started early must not have begun when a bad file stops
            the step after it.
        sources: the files a stack's fingerprint covers (its program module and helpers).
        early: upstream nodes a stack's `up` may start before they end (`stackflow.later`): the
            outputs of those that are stacks arrive while it runs, and every resource reading
            one waits for all of them (a step named here, such as migrations, holds back what
            reads the database until it is done).
        project: a project node's folder and config mapping (`stackflow.projectnodes`): its
            program runs in a process of its own; `outputs` is optional (None: untyped).
    """

    name: str
    kind: NodeKind
    description: str
    upstream: tuple[str, ...] = ()
    outputs: type[BaseModel] | None = None
    inputs: Callable[[Settings, Upstream], BaseModel] | None = field(default=None, repr=False)
    program: Callable[[Any], Mapping[str, Any]] | None = field(default=None, repr=False)
    known: Callable[[Settings], Mapping[str, Any]] | None = field(default=None, repr=False)
    task: Any = field(default=None, repr=False)
    plan: Callable[[Any, Mapping[str, Any]], Any] | None = field(default=None, repr=False)
    destroy_guard: Callable[[Settings], None] | None = field(default=None, repr=False)
    check: Callable[[Settings], None] | None = field(default=None, repr=False)
    sources: tuple[Path, ...] = ()
    early: tuple[str, ...] = ()
    project: ProjectNode | None = field(default=None, repr=False)


def program_sources(program: Callable[..., Any]) -> tuple[Path, ...]:
    """A program's module file and the shared helpers beside it: what its fingerprint covers."""
    module = Path(inspect.getfile(program)).resolve()
    common = module.parent / "common.py"
    return (module, common) if common.is_file() else (module,)


class GraphError(ValueError):
    """A graph declaration that cannot run (found at import time)."""


class StackGraph:
    """A directed acyclic graph of nodes, in declaration order."""

    def __init__(self, nodes: Iterable[Node], *, check: bool = True) -> None:
        self.nodes: dict[str, Node] = {}
        for node in nodes:
            if node.name in self.nodes:
                raise GraphError(f"node {node.name!r} is declared twice")
            for up in node.upstream:
                if up not in self.nodes:
                    raise GraphError(
                        f"node {node.name!r} names upstream {up!r} before it is declared"
                    )
            stray = [e for e in node.early if e not in node.upstream]
            if stray:
                raise GraphError(
                    f"node {node.name!r} may start early only before its upstream nodes, not "
                    f"{', '.join(stray)} (upstream: {', '.join(node.upstream) or 'none'})"
                )
            if check:
                _check(node)
            self.nodes[node.name] = node

    def __getitem__(self, name: str) -> Node:
        try:
            return self.nodes[name]
        except KeyError:
            raise UnknownStackError(self._unknown(name)) from None

    def _unknown(self, name: str) -> str:
        return f"unknown stack {echo(name)}; accepted: {', '.join(self.nodes)}"

    @property
    def stacks(self) -> list[str]:
        return [n.name for n in self.nodes.values() if n.kind is NodeKind.STACK]

    def order(self) -> list[str]:
        """Every node, each after its upstream nodes (declaration order is already topological)."""
        return list(self.nodes)

    def reverse(self) -> list[str]:
        """Every node, each before its upstream nodes: the order to destroy in."""
        return self.order()[::-1]

    def downstream(self, name: str) -> list[str]:
        return [n.name for n in self.nodes.values() if name in n.upstream]

    def ancestors(self, name: str) -> set[str]:
        seen: set[str] = set()
        todo = list(self[name].upstream)
        while todo:
            up = todo.pop()
            if up not in seen:
                seen.add(up)
                todo.extend(self.nodes[up].upstream)
        return seen

    def bare_spec(self, settings: Settings, name: str) -> StackSpec:
        """A spec of a stack for operations that do not run its program (see `bare_spec`).

        Raises:
            ProjectError: a project node whose folder is not a Pulumi Python project.
        """
        source = self[name].project
        if source is None:
            return bare_spec(settings, name)
        return source.bare_spec(settings, name)

    def upstream_stacks(self, name: str) -> list[str]:
        """The stacks among a node's direct upstream nodes."""
        return [u for u in self[name].upstream if self.nodes[u].kind is NodeKind.STACK]

    def select(self, names: Iterable[str] | None) -> list[str]:
        """Validate a targeting list; None or empty means every node. Returned in graph order.

        Raises:
            UnknownStackError: naming the unknown stack and the accepted names.
        """
        wanted = [n.strip() for n in (names or []) if n.strip()]
        for name in wanted:
            if name not in self.nodes:
                raise UnknownStackError(self._unknown(name))
        return [n for n in self.order() if not wanted or n in wanted]

    def critical_path(self, weights: Mapping[str, float]) -> float:
        """Length of the longest path when node n takes weights[n] (missing: 0)."""
        finish: dict[str, float] = {}
        for name in self.order():
            start = max((finish[u] for u in self.nodes[name].upstream), default=0.0)
            finish[name] = start + weights.get(name, 0.0)
        return max(finish.values(), default=0.0)

    def mermaid(self) -> str:
        """The graph as a Mermaid flowchart; steps are drawn with rounded edges, project nodes
        as parallelograms naming their folder."""
        lines = ["flowchart LR"]
        for node in self.nodes.values():
            shape = (
                f'{node.name}[/"{node.name}<br/>{node.project.folder.name}/"/]'
                if node.project is not None
                else f'{node.name}["{node.name}"]'
                if node.kind is NodeKind.STACK
                else f'{node.name}(["{node.name}"])'
            )
            lines.append(f"    {shape}")
        for node in self.nodes.values():
            lines.extend(f"    {up} --> {node.name}" for up in node.upstream)
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        """The nodes as data (`graph --json`)."""
        return {
            "nodes": [
                {
                    "name": n.name,
                    "kind": n.kind.value,
                    "upstream": list(n.upstream),
                    "description": n.description,
                    **({"project": str(n.project.folder)} if n.project is not None else {}),
                }
                for n in self.nodes.values()
            ]
        }

    # -- building stacks --

    def spec(
        self, name: str, settings: Settings, upstream: Upstream, secrets: Collection[str] = ()
    ) -> tuple[StackSpec, BaseModel]:
        """The StackSpec for a stack node, and the program arguments it was built from (a
        project node: what its fingerprint covers besides its config).

        Args:
            secrets: the secret values among the upstream outputs (a project node's config
                holding one is secure).

        Raises:
            MissingOutputError: an upstream output the program needs is missing.
            ProjectError: a project node's folder or stack file cannot be read.
        """
        node = self[name]
        missing = [u for u in self.upstream_stacks(name) if u not in upstream]
        if node.kind is NodeKind.STACK and missing:
            raise MissingOutputError(name, f"needs the outputs of {', '.join(missing)}")
        if node.project is not None:
            return node.project.spec(self, name, settings, upstream, secrets)
        if node.inputs is None or node.program is None:
            raise GraphError(f"node {name!r} is a step, not a stack")
        try:
            args = node.inputs(settings, upstream)
        except ValidationError as exc:
            raise _refused_unknown(settings, name, upstream, exc) or exc from None
        program = node.program
        spec = StackSpec(
            project=settings.project,
            environment=settings.environment,
            node=name,
            program=lambda: program(args),
            config=stack_config(settings),
            policies=settings.policies,
        )
        return spec, args


def _refused_unknown(
    settings: Settings, name: str, upstream: Upstream, exc: ValidationError
) -> PermanentStackError | None:
    """A stack's program arguments that refuse a value an upstream preview cannot know yet: say
    which argument and how to take it (None when no upstream value is unknown)."""
    refused = [e for e in exc.errors() if contains_unknown(e.get("input"))]
    moving = [u for u, outputs in upstream.items() if contains_unknown(dict(outputs))]
    if not refused or not moving:
        return None
    where = ", ".join(sorted({str(e["loc"][0]) for e in refused if e["loc"]}))
    return PermanentStackError(
        f"{settings.environment}/{name}",
        f"its program's arguments ({exc.title}) refuse a value the preview of "
        f"{', '.join(moving)} cannot know yet ({where}): type such an argument `... | Unknown` "
        "(programs.common.Unknown; pass it on with given/given_all) so the preview shows what "
        "depends on it as known after apply",
    )


def _check(node: Node) -> None:
    if node.kind is NodeKind.STEP and node.task is None:
        raise GraphError(f"step {node.name!r} names no task to run it")
    if node.project is not None:
        if node.early or node.task is None:
            raise GraphError(f"project {node.name!r} names no task, or starts early")
    elif node.kind is NodeKind.STACK:
        absent = [a for a in ("outputs", "inputs", "program", "task") if getattr(node, a) is None]
        if absent:
            raise GraphError(f"stack {node.name!r} declares no {', '.join(absent)}")


def bare_spec(settings: Settings, node: str) -> StackSpec:
    """A spec for operations that do not run the program (refresh, drift, destroy, outputs)."""
    return StackSpec(
        settings.project, settings.environment, node, program=dict, config=stack_config(settings)
    )


def stack_config(settings: Settings) -> dict[str, ConfigValue]:
    """Config every stack gets; provider settings are passed as config, never as code. The one
    place that decides what a cloud may see: the local cloud never gets an AWS profile."""
    config = {"aws:region": ConfigValue(settings.aws.region)}
    if settings.aws.profile and settings.cloud != "local":  # never the user's AWS on moto
        config["aws:profile"] = ConfigValue(settings.aws.profile)
    return config


def user_outputs(outputs: Mapping[str, OutputValue]) -> dict[str, OutputValue]:
    """A stack's outputs without the one stackflow records for itself."""
    return {k: v for k, v in outputs.items() if k != INTERNAL_OUTPUT}
