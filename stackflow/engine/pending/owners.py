"""Whose a resource the cloud holds is: its tags, read from the cloud by the id a lookup found.

A create AWS refused because the resource exists already (its answer lost: a plugin killed while
it waited, a cloud cut off right after it acted) leaves no pending create, so nothing in the
state says the resource is the stack's. Its tags do: every taggable resource of stackflow's
programs carries `project`, `environment` and `stack` (`programs.common.tags`). Each type whose
tags this module can read has one reader, grouped by AWS service; a type without one cannot be
proven the stack's by its tags.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from stackflow.engine.pending.cloud import CloudClients, answer
from stackflow.engine.pending.model import Props, text

Tags = dict[str, str]
TagReader = Callable[[CloudClients, str, Props], Tags | None]
"""(clients, the id the lookup found, the create's inputs) -> its tags (None: it is gone)."""


def _pairs(found: Sequence[Mapping[str, Any]] | None) -> Tags:
    """AWS's tag list ([{Key, Value}] in any capitalisation) as a mapping."""
    return {
        str(t.get("Key", t.get("key"))): str(t.get("Value", t.get("value", "")))
        for t in found or []
    }


def _ec2(clients: CloudClients, found: str, _inputs: Props) -> Tags | None:
    filters = [{"Name": "resource-id", "Values": [found]}]
    return _pairs(clients.client("ec2").describe_tags(Filters=filters).get("Tags"))


def _rds_instance(clients: CloudClients, _found: str, inputs: Props) -> Tags | None:
    name = text(inputs, "identifier")
    if name is None:
        return None
    rds = clients.client("rds")
    got = answer(lambda: rds.describe_db_instances(DBInstanceIdentifier=name), "DBInstanceNotFound")
    items = (got or {}).get("DBInstances") or []
    return _pairs(items[0].get("TagList")) if items else None


def _rds_group(call: str, param: str, answers: str, arn: str, gone: str) -> TagReader:
    """An RDS group's tags: its ARN from `call(param=<its name>)`, then that ARN's tags."""

    def read(clients: CloudClients, found: str, _inputs: Props) -> Tags | None:
        rds = clients.client("rds")
        got = answer(lambda: getattr(rds, call)(**{param: found}), gone)
        items = (got or {}).get(answers) or []
        if not items:
            return None
        listed = rds.list_tags_for_resource(ResourceName=items[0][arn])
        return _pairs(listed.get("TagList"))

    return read


def _role(clients: CloudClients, found: str, _inputs: Props) -> Tags | None:
    iam = clients.client("iam")
    got = answer(lambda: iam.list_role_tags(RoleName=found), "NoSuchEntity")
    return None if got is None else _pairs(got.get("Tags"))


def _secret(clients: CloudClients, found: str, _inputs: Props) -> Tags | None:
    client = clients.client("secretsmanager")
    got = answer(lambda: client.describe_secret(SecretId=found), "ResourceNotFoundException")
    return None if got is None else _pairs(got.get("Tags"))


def _log_group(clients: CloudClients, found: str, _inputs: Props) -> Tags | None:
    logs = clients.client("logs")
    got = answer(lambda: logs.list_tags_log_group(logGroupName=found), "ResourceNotFoundException")
    return None if got is None else {str(k): str(v) for k, v in (got.get("tags") or {}).items()}


def _balancing(clients: CloudClients, found: str, _inputs: Props) -> Tags | None:
    elb = clients.client("elbv2")
    got = answer(
        lambda: elb.describe_tags(ResourceArns=[found]),
        "LoadBalancerNotFound",
        "TargetGroupNotFound",
    )
    described = (got or {}).get("TagDescriptions") or []
    return _pairs(described[0].get("Tags")) if described else None


def _cluster(clients: CloudClients, found: str, _inputs: Props) -> Tags | None:
    ecs = clients.client("ecs")
    clusters = ecs.describe_clusters(clusters=[found], include=["TAGS"]).get("clusters") or []
    return _pairs(clusters[0].get("tags")) if clusters else None


_EC2_TAGGED = (
    "aws:ec2/vpc:Vpc",
    "aws:ec2/subnet:Subnet",
    "aws:ec2/routeTable:RouteTable",
    "aws:ec2/internetGateway:InternetGateway",
    "aws:ec2/eip:Eip",
    "aws:ec2/natGateway:NatGateway",
    "aws:ec2/securityGroup:SecurityGroup",
)

READERS: dict[str, TagReader] = {
    **dict.fromkeys(_EC2_TAGGED, _ec2),
    "aws:rds/instance:Instance": _rds_instance,
    "aws:rds/subnetGroup:SubnetGroup": _rds_group(
        "describe_db_subnet_groups",
        "DBSubnetGroupName",
        "DBSubnetGroups",
        "DBSubnetGroupArn",
        "DBSubnetGroupNotFoundFault",
    ),
    "aws:rds/parameterGroup:ParameterGroup": _rds_group(
        "describe_db_parameter_groups",
        "DBParameterGroupName",
        "DBParameterGroups",
        "DBParameterGroupArn",
        "DBParameterGroupNotFound",
    ),
    "aws:iam/role:Role": _role,
    "aws:secretsmanager/secret:Secret": _secret,
    "aws:cloudwatch/logGroup:LogGroup": _log_group,
    "aws:lb/loadBalancer:LoadBalancer": _balancing,
    "aws:lb/targetGroup:TargetGroup": _balancing,
    "aws:ecs/cluster:Cluster": _cluster,
}


def tags_of(clients: CloudClients, kind: str, found: str, inputs: Props) -> Tags | None:
    """The tags of the resource of type `kind` the lookup found as `found`.

    Returns None when this module has no reader for `kind`, or the resource is gone.

    Raises:
        botocore's errors: the cloud did not answer (the caller says so, as a lookup's).
    """
    reader = READERS.get(kind)
    return None if reader is None else reader(clients, found, inputs)
