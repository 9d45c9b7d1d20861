"""The pipeline's graph, declared once: networking -> database -> migrate -> app -> verify.

A stack is a program module (programs/) and one `stack(...)` entry here: its upstream nodes, how
its program's arguments are built from settings and upstream outputs, and its outputs model. A
team's existing Pulumi project is one `project(...)` entry naming its folder: its upstream nodes
and the config it gets from them. A step is a task module (tasks/) and one `step(...)` entry: its
upstream nodes and the task that runs it (the kinds: `graph/kinds.py`). The flows, the engine
and the command line know no node by name: order, destroy order, targeting, the live view's rows
and the graph's picture all come from this list.
"""

from __future__ import annotations

import typing
from typing import Any

from graph.kinds import stack, step
from programs.app import AppArgs, AppOutputs, app
from programs.common import UNKNOWN
from programs.database import DatabaseArgs, DatabaseOutputs, database
from programs.networking import NetworkingArgs, NetworkingOutputs, networking
from stackflow.dag import StackGraph, Upstream
from stackflow.settings import EnvironmentKind, Settings
from tasks.migrate import check_migration_files, migrate_step, migration_plan
from tasks.verify import verify_step


def _networking(settings: Settings, _: Upstream) -> NetworkingArgs:
    return NetworkingArgs(
        project=settings.project,
        environment=settings.environment,
        vpc_cidr=settings.network.vpc_cidr,
        az_count=settings.network.az_count,
        nat_gateway=settings.nat_gateway,
        migration_cidrs=list(settings.network.migration_cidrs),
        app_port=settings.app.port,
        db_port=settings.database.port,
    )


def _networking_known(settings: Settings) -> dict[str, Any]:
    subnets = settings.network.az_count  # how many is known, their ids are not
    return {
        "vpc_cidr": settings.network.vpc_cidr,
        "public_subnet_ids": [UNKNOWN] * subnets,
        "private_subnet_ids": [UNKNOWN] * subnets,
    }


def _database(settings: Settings, up: Upstream) -> DatabaseArgs:
    net = typing.cast(NetworkingOutputs, up["networking"])
    db = settings.database
    return DatabaseArgs(
        project=settings.project,
        environment=settings.environment,
        private_subnet_ids=net.private_subnet_ids,
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


def _database_known(settings: Settings) -> dict[str, Any]:
    db = settings.database
    return {"port": db.port, "database": db.name, "user": db.username}


def _app(settings: Settings, up: Upstream) -> AppArgs:
    net = typing.cast(NetworkingOutputs, up["networking"])
    db = typing.cast(DatabaseOutputs, up["database"])
    a = settings.app
    return AppArgs(
        project=settings.project,
        environment=settings.environment,
        region=settings.aws.region,
        vpc_id=net.vpc_id,
        public_subnet_ids=net.public_subnet_ids,
        private_subnet_ids=net.private_subnet_ids,
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
        # Other stacks' outputs for the container, by variable name (docs/guides/adding-a-stack.md)
        container_env={},
    )


NODES = [
    stack(
        "networking",
        "VPC, public and private subnets, NAT, security groups",
        program=networking,
        inputs=_networking,
        outputs=NetworkingOutputs,
        known=_networking_known,
    ),
    stack(
        "database",
        "RDS MySQL 8.0 in the private subnets, password in Secrets Manager",
        program=database,
        inputs=_database,
        outputs=DatabaseOutputs,
        upstream=("networking",),
        known=_database_known,
        destroy_guard=Settings.confirm_database_deletable,
    ),
    step(
        "migrate",
        "schema migrations on the database",
        task=migrate_step,
        upstream=("database",),
        plan=migration_plan,
        check=check_migration_files,
    ),
    stack(
        "app",
        "ECS Fargate service behind an application load balancer",
        program=app,
        inputs=_app,
        outputs=AppOutputs,
        upstream=("networking", "database", "migrate"),
        # Its load balancer, target group, cluster, roles and log group need only networking:
        # they are created while the database is. What reads the database's outputs (the task
        # definition, and the service after it) waits for the database and its migrations.
        early=("database", "migrate"),
    ),
    step("verify", "poll the app's health URL", task=verify_step, upstream=("app",)),
]

GRAPH = StackGraph(NODES)
"""The graph every flow walks."""
