"""What exists in the local cloud, per environment: the rows of `python flows/run.py cloud ls`.

Reads the cloud server through the same AWS APIs a console would (describe/list calls only, so
listing never grows the journal). Each row names the environment from the resource's
`environment` tag ("-" when untagged). What moto creates by itself (the default VPC and its
subnets, each VPC's default security group and main route table) is left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from stackflow.localcloud.context import CloudContext
from stackflow.localcloud.errors import InventoryError
from stackflow.localcloud.inventory_row import ENVIRONMENT_TAG, UNTAGGED, Row
from stackflow.localcloud.registry import tags_of


def _environment(tags: Mapping[str, str]) -> str:
    return tags.get(ENVIRONMENT_TAG) or UNTAGGED


def _pages(client: Any, operation: str, key: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
    for page in client.get_paginator(operation).paginate(**kwargs):
        yield from page.get(key, [])


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _ec2(ctx: CloudContext) -> Iterator[Row]:
    ec2 = ctx.client("ec2")
    default_vpcs: set[str] = set()
    for vpc in _pages(ec2, "describe_vpcs", "Vpcs"):
        if vpc.get("IsDefault"):
            default_vpcs.add(vpc["VpcId"])
            continue
        tags = tags_of(vpc.get("Tags"))
        yield Row(
            _environment(tags), "ec2", "vpc", vpc["VpcId"], tags.get("Name", ""), vpc["State"]
        )
    for subnet in _pages(ec2, "describe_subnets", "Subnets"):
        if subnet.get("VpcId") in default_vpcs:
            continue
        tags = tags_of(subnet.get("Tags"))
        yield Row(
            _environment(tags),
            "ec2",
            "subnet",
            subnet["SubnetId"],
            tags.get("Name", ""),
            str(subnet.get("State", "")),
        )
    for group in _pages(ec2, "describe_security_groups", "SecurityGroups"):
        if group.get("VpcId") in default_vpcs or group.get("GroupName") == "default":
            continue
        tags = tags_of(group.get("Tags"))
        yield Row(
            _environment(tags),
            "ec2",
            "security-group",
            group["GroupId"],
            tags.get("Name") or group.get("GroupName", ""),
            "",
        )
    for igw in _pages(ec2, "describe_internet_gateways", "InternetGateways"):
        attachments = igw.get("Attachments") or []
        if any(a.get("VpcId") in default_vpcs for a in attachments):
            continue
        tags = tags_of(igw.get("Tags"))
        state = str(attachments[0].get("State", "")) if attachments else "detached"
        yield Row(
            _environment(tags),
            "ec2",
            "internet-gateway",
            igw["InternetGatewayId"],
            tags.get("Name", ""),
            state,
        )
    for table in _pages(ec2, "describe_route_tables", "RouteTables"):
        main = any(a.get("Main") for a in table.get("Associations") or [])
        tags = tags_of(table.get("Tags"))
        if table.get("VpcId") in default_vpcs or (main and not tags):
            continue
        yield Row(
            _environment(tags),
            "ec2",
            "route-table",
            table["RouteTableId"],
            tags.get("Name", ""),
            "",
        )
    for nat in _pages(ec2, "describe_nat_gateways", "NatGateways"):
        if nat.get("State") == "deleted":
            continue
        tags = tags_of(nat.get("Tags"))
        yield Row(
            _environment(tags),
            "ec2",
            "nat-gateway",
            nat["NatGatewayId"],
            tags.get("Name", ""),
            str(nat.get("State", "")),
        )


def _rds(ctx: CloudContext) -> Iterator[Row]:
    for db in _pages(ctx.client("rds"), "describe_db_instances", "DBInstances"):
        tags = tags_of(db.get("TagList"))
        yield Row(
            _environment(tags),
            "rds",
            "db-instance",
            db["DBInstanceIdentifier"],
            db["DBInstanceIdentifier"],
            str(db.get("DBInstanceStatus", "")),
        )


def _ecs(ctx: CloudContext) -> Iterator[Row]:
    ecs = ctx.client("ecs")
    cluster_arns = list(_pages(ecs, "list_clusters", "clusterArns"))
    for chunk in _chunks(cluster_arns, 100):
        for cluster in ecs.describe_clusters(clusters=chunk, include=["TAGS"])["clusters"]:
            if cluster.get("status") == "INACTIVE":
                continue  # deleted
            tags = tags_of(cluster.get("tags"))
            yield Row(
                _environment(tags),
                "ecs",
                "ecs-cluster",
                cluster["clusterArn"],
                cluster.get("clusterName", ""),
                str(cluster.get("status", "")),
            )
    for cluster_arn in cluster_arns:
        service_arns = list(_pages(ecs, "list_services", "serviceArns", cluster=cluster_arn))
        for chunk in _chunks(service_arns, 10):
            found = ecs.describe_services(cluster=cluster_arn, services=chunk, include=["TAGS"])
            for service in found["services"]:
                if service.get("status") == "INACTIVE":
                    continue  # deleted: AWS leaves it out of ListServices, moto lists it a while
                tags = tags_of(service.get("tags"))
                yield Row(
                    _environment(tags),
                    "ecs",
                    "ecs-service",
                    service["serviceArn"],
                    service.get("serviceName", ""),
                    str(service.get("status", "")),
                )


def _elbv2(ctx: CloudContext) -> Iterator[Row]:
    elbv2 = ctx.client("elbv2")
    balancers = list(_pages(elbv2, "describe_load_balancers", "LoadBalancers"))
    groups = list(_pages(elbv2, "describe_target_groups", "TargetGroups"))
    arns = [b["LoadBalancerArn"] for b in balancers] + [g["TargetGroupArn"] for g in groups]
    tags_by_arn: dict[str, dict[str, str]] = {}
    for chunk in _chunks(arns, 20):
        for described in elbv2.describe_tags(ResourceArns=chunk)["TagDescriptions"]:
            tags_by_arn[described["ResourceArn"]] = tags_of(described.get("Tags"))
    for balancer in balancers:
        tags = tags_by_arn.get(balancer["LoadBalancerArn"], {})
        yield Row(
            _environment(tags),
            "elbv2",
            "load-balancer",
            balancer["LoadBalancerArn"],
            balancer.get("LoadBalancerName", ""),
            str((balancer.get("State") or {}).get("Code", "")),
        )
    for group in groups:
        tags = tags_by_arn.get(group["TargetGroupArn"], {})
        yield Row(
            _environment(tags),
            "elbv2",
            "target-group",
            group["TargetGroupArn"],
            group.get("TargetGroupName", ""),
            "",
        )


def _logs(ctx: CloudContext) -> Iterator[Row]:
    logs = ctx.client("logs")
    for group in _pages(logs, "describe_log_groups", "logGroups"):
        name = group["logGroupName"]
        tags = dict(logs.list_tags_log_group(logGroupName=name).get("tags") or {})
        yield Row(_environment(tags), "logs", "log-group", name, name, "")


def _secrets(ctx: CloudContext) -> Iterator[Row]:
    for secret in _pages(ctx.client("secretsmanager"), "list_secrets", "SecretList"):
        tags = tags_of(secret.get("Tags"))
        state = "scheduled for deletion" if secret.get("DeletedDate") else ""
        yield Row(
            _environment(tags),
            "secretsmanager",
            "secret",
            secret["ARN"],
            secret.get("Name", ""),
            state,
        )


def _iam(ctx: CloudContext) -> Iterator[Row]:
    iam = ctx.client("iam")
    for role in _pages(iam, "list_roles", "Roles"):
        name = role["RoleName"]
        tags = tags_of(list(_pages(iam, "list_role_tags", "Tags", RoleName=name)))
        yield Row(_environment(tags), "iam", "iam-role", name, name, "")


LISTERS: tuple[tuple[str, Callable[[CloudContext], Iterable[Row]]], ...] = (
    ("EC2 networking", _ec2),
    ("RDS instances", _rds),
    ("ECS clusters and services", _ecs),
    ("load balancers and target groups", _elbv2),
    ("log groups", _logs),
    ("secrets", _secrets),
    ("IAM roles", _iam),
    ("the services rehearsals use", lambda ctx: _services(ctx)),
)


def _services(ctx: CloudContext) -> Iterable[Row]:
    from stackflow.localcloud.inventory_services import rows

    return rows(ctx)


def _environment_from_name(name: str, environments: Iterable[str]) -> str:
    """The longest known environment whose `-<env>-` appears in `name` (names are
    `<project>-<environment>-<suffix>`), else "-"."""
    found = [env for env in environments if f"-{env}-" in f"{name}-"]
    return max(found, key=len) if found else UNTAGGED


def list_resources(endpoint: str, region: str, environment: str | None = None) -> list[Row]:
    """Every resource in the local cloud, sorted by environment, service, kind and name.

    Args:
        endpoint: the cloud server's URL, e.g. http://127.0.0.1:4566.
        region: the region to list (IAM is global).
        environment: keep only this environment's rows (None: all, untagged included).

    Raises:
        InventoryError: a listing call failed (names what was being listed and the server).
    """
    ctx = CloudContext(endpoint, region)
    rows: list[Row] = []
    for what, lister in LISTERS:
        try:
            rows.extend(lister(ctx))
        except Exception as exc:  # botocore's errors: ClientError, EndpointConnectionError...
            raise InventoryError(
                f"listing {what} in the local cloud at {endpoint} failed: {exc}"
            ) from exc
    # Log groups the tags do not place are placed by their name.
    known = {row.environment for row in rows if row.environment != UNTAGGED}
    rows = [
        row._replace(environment=_environment_from_name(row.name, known))
        if row.kind == "log-group" and row.environment == UNTAGGED
        else row
        for row in rows
    ]
    if environment is not None:
        rows = [row for row in rows if row.environment == environment]
    return sorted(
        rows,
        key=lambda r: (r.environment == UNTAGGED, r.environment, r.service, r.kind, r.name, r.id),
    )
