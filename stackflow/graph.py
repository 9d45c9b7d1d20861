"""The stack graph, declared once as data: networking -> database -> migrate -> app -> verify.

Each node names its upstream nodes and knows how to build its program's arguments from settings and
the typed outputs of those upstream nodes. Order, reverse order (destroy), targeting, the critical
path and the Mermaid picture are all derived from `GRAPH`; nothing else hard-codes the order.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr

from programs.app import AppArgs, AppOutputs, app
from programs.database import DatabaseArgs, DatabaseOutputs, database
from programs.networking import NetworkingArgs, NetworkingOutputs, networking
from stackflow.engine.base import ConfigValue, OutputValue, ProgramFn, StackSpec
from stackflow.errors import MissingOutputError, UnknownStackError, echo
from stackflow.settings import EnvironmentKind, Settings

Upstream = Mapping[str, BaseModel]


class NodeKind(StrEnum):
    STACK = "stack"  # a Pulumi stack, acted on through the engine
    STEP = "step"  # a step run by the flow itself (migrations, verification)


@dataclass(frozen=True)
class Node:
    """One node of the graph."""

    name: str
    kind: NodeKind
    description: str
    upstream: tuple[str, ...] = ()
    outputs: type[BaseModel] | None = None
    build: Callable[[Settings, Upstream], tuple[BaseModel, ProgramFn]] | None = field(
        default=None, repr=False
    )
    sources: tuple[Path, ...] = ()  # program source files: part of the fingerprint


def _networking(settings: Settings, _: Upstream) -> tuple[BaseModel, ProgramFn]:
    args = NetworkingArgs(
        project=settings.project,
        environment=settings.environment,
        vpc_cidr=settings.network.vpc_cidr,
        az_count=settings.network.az_count,
        nat_gateway=settings.nat_gateway,
        migration_cidrs=list(settings.network.migration_cidrs),
        app_port=settings.app.port,
        db_port=settings.database.port,
    )
    return args, lambda: networking(args)


def _database(settings: Settings, up: Upstream) -> tuple[BaseModel, ProgramFn]:
    net = typing.cast(NetworkingOutputs, up["networking"])
    db = settings.database
    args = DatabaseArgs(
        project=settings.project,
        environment=settings.environment,
        private_subnet_ids=list(net.private_subnet_ids),
        db_security_group_id=net.db_security_group_id,
        engine_version=db.engine_version,
        instance_class=db.instance_class,
        allocated_storage_gb=db.allocated_storage_gb,
        backup_retention_days=settings.backup_retention_days,
        multi_az=settings.multi_az,
        deletion_protection=settings.deletion_protection,
        final_snapshot=settings.final_snapshot,
        publicly_accessible=db.publicly_accessible,
        db_name=db.name,
        username=db.username,
        port=db.port,
        require_secure_transport=settings.migrations.tls,
        apply_immediately=settings.environment_kind is not EnvironmentKind.PROD,
    )
    return args, lambda: database(args)


def _app(settings: Settings, up: Upstream) -> tuple[BaseModel, ProgramFn]:
    net = typing.cast(NetworkingOutputs, up["networking"])
    db = typing.cast(DatabaseOutputs, up["database"])
    a = settings.app
    args = AppArgs(
        project=settings.project,
        environment=settings.environment,
        region=settings.aws.region,
        vpc_id=net.vpc_id,
        public_subnet_ids=list(net.public_subnet_ids),
        private_subnet_ids=list(net.private_subnet_ids),
        alb_security_group_id=net.alb_security_group_id,
        app_security_group_id=net.app_security_group_id,
        tasks_in_public_subnets=not settings.nat_gateway,
        db_host=db.host,
        db_port=db.port,
        db_name=db.database,
        db_user=db.user,
        db_password_secret_arn=db.password_secret_arn,
        image=a.image,
        cpu=a.cpu,
        memory_mb=a.memory_mb,
        desired_count=settings.desired_count,
        port=a.port,
        health_check_path=a.health_check_path,
        log_retention_days=a.log_retention_days,
    )
    return args, lambda: app(args)


def _sources(program: Callable[..., Any]) -> tuple[Path, ...]:
    """The program's module file and the shared helpers beside it: what its fingerprint covers."""
    module = Path(inspect.getfile(program)).resolve()
    return (module, module.parent / "common.py")


class StackGraph:
    """A directed acyclic graph of nodes, in declaration order."""

    def __init__(self, nodes: Iterable[Node]) -> None:
        self.nodes: dict[str, Node] = {}
        for node in nodes:
            for up in node.upstream:
                if up not in self.nodes:
                    raise ValueError(
                        f"node {node.name!r} names upstream {up!r} before it is declared"
                    )
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
        """The graph as a Mermaid flowchart; steps are drawn with rounded edges."""
        lines = ["flowchart LR"]
        for node in self.nodes.values():
            shape = (
                f'{node.name}["{node.name}"]'
                if node.kind is NodeKind.STACK
                else f'{node.name}(["{node.name}"])'
            )
            lines.append(f"    {shape}")
        for node in self.nodes.values():
            lines.extend(f"    {up} --> {node.name}" for up in node.upstream)
        return "\n".join(lines)

    # -- building stacks --

    def spec(
        self, name: str, settings: Settings, upstream: Upstream
    ) -> tuple[StackSpec, BaseModel]:
        """The StackSpec for a stack node, and the program arguments it was built from.

        Raises:
            MissingOutputError: an upstream output the program needs is missing.
        """
        node = self[name]
        if node.build is None:
            raise ValueError(f"node {name!r} is a step, not a stack")
        missing = [
            u for u in node.upstream if u not in upstream and self.nodes[u].kind is NodeKind.STACK
        ]
        if missing:
            raise MissingOutputError(name, f"needs the outputs of {', '.join(missing)}")
        args, program = node.build(settings, upstream)
        spec = StackSpec(
            project=settings.project,
            environment=settings.environment,
            node=name,
            program=program,
            config=stack_config(settings),
        )
        return spec, args


def bare_spec(settings: Settings, node: str) -> StackSpec:
    """A spec for operations that do not run the program (refresh, drift, destroy, outputs)."""
    return StackSpec(
        settings.project, settings.environment, node, program=dict, config=stack_config(settings)
    )


def stack_config(settings: Settings) -> dict[str, ConfigValue]:
    """Config every stack gets; provider settings are passed as config, never as code."""
    config = {"aws:region": ConfigValue(settings.aws.region)}
    if settings.aws.profile:
        config["aws:profile"] = ConfigValue(settings.aws.profile)
    return config


def parse_outputs(node: Node, outputs: Mapping[str, OutputValue]) -> BaseModel:
    """Typed outputs of a stack from its raw outputs.

    Raises:
        MissingOutputError: naming the stack and the missing keys.
    """
    assert node.outputs is not None
    missing = [k for k in node.outputs.model_fields if k not in outputs]
    if missing:
        raise MissingOutputError(
            node.name, f"outputs lack {', '.join(missing)} (is the stack deployed? run `up` for it)"
        )
    return node.outputs.model_validate({k: outputs[k].value for k in node.outputs.model_fields})


def placeholder_outputs(node: Node, settings: Settings) -> BaseModel:
    """Outputs that stand in for a stack not deployed yet, so downstream stacks can be previewed.

    Every string says `placeholder`, so nothing downstream can mistake it for a real value.
    """
    assert node.outputs is not None
    values: dict[str, Any] = {}
    for name, info in node.outputs.model_fields.items():
        tag = f"placeholder-{node.name}-{name.replace('_', '-')}"
        ann = info.annotation
        if ann is int:
            values[name] = settings.database.port if "port" in name else 0
        elif ann is SecretStr:
            values[name] = SecretStr(tag)
        elif typing.get_origin(ann) is list:
            values[name] = [f"{tag}-{i}" for i in range(settings.network.az_count)]
        else:
            values[name] = tag
    return node.outputs.model_validate(values)


GRAPH = StackGraph(
    [
        Node(
            "networking",
            NodeKind.STACK,
            "VPC, public and private subnets, NAT, security groups",
            outputs=NetworkingOutputs,
            build=_networking,
            sources=_sources(networking),
        ),
        Node(
            "database",
            NodeKind.STACK,
            "RDS MySQL 8.0 in the private subnets, password in Secrets Manager",
            upstream=("networking",),
            outputs=DatabaseOutputs,
            build=_database,
            sources=_sources(database),
        ),
        Node("migrate", NodeKind.STEP, "schema migrations on the database", upstream=("database",)),
        Node(
            "app",
            NodeKind.STACK,
            "ECS Fargate service behind an application load balancer",
            upstream=("networking", "database", "migrate"),
            outputs=AppOutputs,
            build=_app,
            sources=_sources(app),
        ),
        Node("verify", NodeKind.STEP, "poll the app's health URL", upstream=("app",)),
    ]
)
"""The graph every flow walks."""
