"""ElastiCache in the local cloud: subnet groups, replication groups and clusters, for a cache
stack's control plane (there is no data plane: nothing answers on a cache's endpoint).

Ids follow pulumi-aws: a subnet group's id is its name, a replication group's its id, a
cluster's its id. moto 5.2.5 has no DeleteCacheSubnetGroup: deleting a subnet group leaves it in
the local cloud (its auto-name keeps a new one from colliding), and says nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.parsers import ResponseParserError

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import RDS_TAGGING, Answer, Shape
from stackflow.localcloud.resources._shared import MANAGED_BY_PULUMI, input_tags, same_members

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

SUBNET_GROUP = "aws:elasticache/subnetGroup:SubnetGroup"
REPLICATION_GROUP = "aws:elasticache/replicationGroup:ReplicationGroup"
CLUSTER = "aws:elasticache/cluster:Cluster"
_GONE = ("CacheSubnetGroupNotFoundFault", "ReplicationGroupNotFoundFault", "CacheClusterNotFound")
# ElastiCache's tag calls are RDS's, by the resource's ARN.
_TAGGING = RDS_TAGGING
_ASKED_VERSION = "_engineVersion"  # the engine version asked for, in a replication group's answer


def _only_tags(token: str, changed: frozenset[str]) -> None:
    """The in-place changes served are the tags' (and the description's where noted)."""
    other = sorted(changed - {"tags", "description", "applyImmediately"})
    if other:
        raise NotImplementedError(
            f"the local cloud's aws provider does not serve in-place changes of "
            f"{', '.join(other)} of {token} yet"
        )


def _first(answer: Mapping[str, Any], key: str) -> Answer | None:
    items = answer.get(key) or []
    return dict(items[0]) if items else None


def _request(
    inputs: Props, parameters: Mapping[str, tuple[str, type]], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """A create call's arguments: `kwargs`, the set inputs of `parameters`, security groups and
    tags."""
    for wire, (api, kind) in parameters.items():
        if inputs.get(wire) is not None:
            kwargs[api] = kind(inputs[wire])
    if inputs.get("securityGroupIds"):
        kwargs["SecurityGroupIds"] = [str(g) for g in inputs["securityGroupIds"]]
    if input_tags(inputs):
        kwargs["Tags"] = _TAGGING.wire(input_tags(inputs))
    return kwargs


# --- subnet group ------------------------------------------------------------------------------


def _subnet_group_create(cache: Any, inputs: Props, ctx: CloudContext) -> str:
    group = cache.create_cache_subnet_group(
        CacheSubnetGroupName=str(inputs["name"]),
        CacheSubnetGroupDescription=str(inputs.get("description") or MANAGED_BY_PULUMI),
        SubnetIds=[str(s) for s in inputs.get("subnetIds") or []],
        Tags=_TAGGING.wire(input_tags(inputs)),
    )["CacheSubnetGroup"]
    return str(group["CacheSubnetGroupName"])


def _subnet_group_observed(group: Answer, state: Props) -> Props:
    return {
        "name": group["CacheSubnetGroupName"],
        "description": group.get("CacheSubnetGroupDescription"),
        "subnetIds": same_members(
            [s["SubnetIdentifier"] for s in group.get("Subnets", [])], state.get("subnetIds")
        ),
    }


def _subnet_group_delete(cache: Any, id: str, state: Props) -> None:
    try:
        cache.delete_cache_subnet_group(CacheSubnetGroupName=id)
    except ResponseParserError as exc:
        # moto 5.2.5 lacks DeleteCacheSubnetGroup (it answers a 500 page): the group stays.
        if "500 Internal Server Error" not in str(exc):
            raise


SUBNET_GROUP_SHAPE = Shape(
    token=SUBNET_GROUP,
    service="elasticache",
    inputs=("name", "description", "subnetIds", "tags"),
    create=_subnet_group_create,
    describe=lambda cache, id, state: _first(
        cache.describe_cache_subnet_groups(CacheSubnetGroupName=id), "CacheSubnetGroups"
    ),
    gone=_GONE,
    outputs=lambda group, ctx: {"arn": group["ARN"], "vpcId": group.get("VpcId")},
    observed=_subnet_group_observed,
    update=lambda cache, id, state, inputs, changed: _only_tags(
        SUBNET_GROUP, changed - {"description"}
    ),
    delete=_subnet_group_delete,
    tagging=_TAGGING,
    computed=("arn", "vpcId"),
)


# --- replication group -------------------------------------------------------------------------

_GROUP_INPUTS = (
    "replicationGroupId",
    "description",
    "nodeType",
    "engine",
    "engineVersion",
    "port",
    "numCacheClusters",
    "subnetGroupName",
    "securityGroupIds",
    "parameterGroupName",
    "automaticFailoverEnabled",
    "multiAzEnabled",
    "atRestEncryptionEnabled",
    "transitEncryptionEnabled",
    "authToken",
    "snapshotRetentionLimit",
    "snapshotWindow",
    "maintenanceWindow",
    "applyImmediately",
    "autoMinorVersionUpgrade",
    "tags",
)
_GROUP_PARAMETERS = {
    "description": ("ReplicationGroupDescription", str),
    "nodeType": ("CacheNodeType", str),
    "engine": ("Engine", str),
    "engineVersion": ("EngineVersion", str),
    "port": ("Port", int),
    "numCacheClusters": ("NumCacheClusters", int),
    "subnetGroupName": ("CacheSubnetGroupName", str),
    "parameterGroupName": ("CacheParameterGroupName", str),
    "automaticFailoverEnabled": ("AutomaticFailoverEnabled", bool),
    "multiAzEnabled": ("MultiAZEnabled", bool),
    "atRestEncryptionEnabled": ("AtRestEncryptionEnabled", bool),
    "transitEncryptionEnabled": ("TransitEncryptionEnabled", bool),
    "authToken": ("AuthToken", str),
    "snapshotRetentionLimit": ("SnapshotRetentionLimit", int),
    "snapshotWindow": ("SnapshotWindow", str),
    "maintenanceWindow": ("PreferredMaintenanceWindow", str),
    "autoMinorVersionUpgrade": ("AutoMinorVersionUpgrade", bool),
}


def _group_outputs(group: Answer, ctx: CloudContext) -> Props:
    node_groups = group.get("NodeGroups") or [{}]
    primary = node_groups[0].get("PrimaryEndpoint") or {}
    reader = node_groups[0].get("ReaderEndpoint") or {}
    configuration = group.get("ConfigurationEndpoint") or {}
    return {
        "arn": group.get("ARN"),
        "memberClusters": sorted(group.get("MemberClusters") or []),
        "primaryEndpointAddress": primary.get("Address", ""),
        "readerEndpointAddress": reader.get("Address", ""),
        "configurationEndpointAddress": configuration.get("Address", ""),
        "clusterEnabled": bool(group.get("ClusterEnabled", False)),
        "engineVersionActual": str(group.get(_ASKED_VERSION) or ""),
    }


def _group_create(cache: Any, inputs: Props, ctx: CloudContext) -> str:
    kwargs = {"ReplicationGroupId": str(inputs["replicationGroupId"])}
    group = cache.create_replication_group(**_request(inputs, _GROUP_PARAMETERS, kwargs))
    return str(group["ReplicationGroup"]["ReplicationGroupId"])


def _group_describe(cache: Any, id: str, state: Props) -> Answer | None:
    group = _first(cache.describe_replication_groups(ReplicationGroupId=id), "ReplicationGroups")
    # A replication group tells no engine version: the actual one is the one asked for.
    version = state.get("engineVersionActual", state.get("engineVersion"))
    return None if group is None else {**group, _ASKED_VERSION: version}


def _group_update(
    cache: Any, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> None:
    _only_tags(REPLICATION_GROUP, changed)
    if "description" in changed:
        cache.modify_replication_group(
            ReplicationGroupId=id,
            ReplicationGroupDescription=str(inputs.get("description") or MANAGED_BY_PULUMI),
            ApplyImmediately=True,
        )


REPLICATION_GROUP_SHAPE = Shape(
    token=REPLICATION_GROUP,
    service="elasticache",
    inputs=_GROUP_INPUTS,
    create=_group_create,
    describe=_group_describe,
    gone=_GONE,
    outputs=_group_outputs,
    observed=lambda group, state: {
        "replicationGroupId": group["ReplicationGroupId"],
        "description": group.get("Description"),
        "nodeType": group.get("CacheNodeType"),
    },
    update=_group_update,
    delete=lambda cache, id, state: cache.delete_replication_group(ReplicationGroupId=id),
    tagging=_TAGGING,
    computed=(
        "arn",
        "memberClusters",
        "primaryEndpointAddress",
        "readerEndpointAddress",
        "configurationEndpointAddress",
        "clusterEnabled",
        "engineVersionActual",
    ),
)


# --- cluster -----------------------------------------------------------------------------------

_CLUSTER_INPUTS = (
    "clusterId",
    "engine",
    "engineVersion",
    "nodeType",
    "numCacheNodes",
    "parameterGroupName",
    "port",
    "subnetGroupName",
    "securityGroupIds",
    "replicationGroupId",
    "availabilityZone",
    "snapshotRetentionLimit",
    "maintenanceWindow",
    "applyImmediately",
    "tags",
)
_CLUSTER_PARAMETERS = {
    "engine": ("Engine", str),
    "engineVersion": ("EngineVersion", str),
    "nodeType": ("CacheNodeType", str),
    "numCacheNodes": ("NumCacheNodes", int),
    "parameterGroupName": ("CacheParameterGroupName", str),
    "port": ("Port", int),
    "subnetGroupName": ("CacheSubnetGroupName", str),
    "replicationGroupId": ("ReplicationGroupId", str),
    "availabilityZone": ("PreferredAvailabilityZone", str),
    "snapshotRetentionLimit": ("SnapshotRetentionLimit", int),
    "maintenanceWindow": ("PreferredMaintenanceWindow", str),
}


def _cluster_outputs(cluster: Answer, ctx: CloudContext) -> Props:
    nodes = [
        {
            "id": node.get("CacheNodeId", ""),
            "address": (node.get("Endpoint") or {}).get("Address", ""),
            "port": int((node.get("Endpoint") or {}).get("Port") or 0),
            "availabilityZone": node.get("CustomerAvailabilityZone", ""),
        }
        for node in cluster.get("CacheNodes") or []
    ]
    configuration = cluster.get("ConfigurationEndpoint") or {}
    return {
        "arn": cluster.get("ARN"),
        "cacheNodes": nodes,
        "clusterAddress": configuration.get("Address", ""),
        "engineVersionActual": str(cluster.get("EngineVersion") or ""),
    }


def _cluster_create(cache: Any, inputs: Props, ctx: CloudContext) -> str:
    kwargs = {"CacheClusterId": str(inputs["clusterId"])}
    cache.create_cache_cluster(**_request(inputs, _CLUSTER_PARAMETERS, kwargs))
    return str(inputs["clusterId"])


CLUSTER_SHAPE = Shape(
    token=CLUSTER,
    service="elasticache",
    inputs=_CLUSTER_INPUTS,
    create=_cluster_create,
    describe=lambda cache, id, state: _first(
        cache.describe_cache_clusters(CacheClusterId=id, ShowCacheNodeInfo=True), "CacheClusters"
    ),
    gone=_GONE,
    outputs=_cluster_outputs,
    observed=lambda cluster, state: {
        "clusterId": cluster["CacheClusterId"],
        "engine": cluster.get("Engine"),
        "nodeType": cluster.get("CacheNodeType"),
        "numCacheNodes": cluster.get("NumCacheNodes"),
    },
    update=lambda cache, id, state, inputs, changed: _only_tags(CLUSTER, changed - {"description"}),
    delete=lambda cache, id, state: cache.delete_cache_cluster(CacheClusterId=id),
    tagging=_TAGGING,
    computed=("arn", "cacheNodes", "clusterAddress", "engineVersionActual"),
)


def register(aws: Registry) -> None:
    """Add the ElastiCache subnet group, replication group and cluster types."""
    aws.add(
        SUBNET_GROUP_SHAPE.type(
            force_new={"name"},
            auto_name="name",
            auto_name_max=255,
            defaults={"description": MANAGED_BY_PULUMI},
        ),
        REPLICATION_GROUP_SHAPE.type(
            force_new={"replicationGroupId", "subnetGroupName", "atRestEncryptionEnabled"}
            | {"port", "engine"},
            auto_name="replicationGroupId",
            auto_name_max=40,
            defaults={"description": MANAGED_BY_PULUMI, "engine": "redis"},
        ),
        CLUSTER_SHAPE.type(
            force_new={
                "clusterId",
                "engine",
                "port",
                "subnetGroupName",
                "availabilityZone",
                "replicationGroupId",
            },
            auto_name="clusterId",
            auto_name_max=50,
        ),
    )
