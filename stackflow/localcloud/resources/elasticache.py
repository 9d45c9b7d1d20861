"""ElastiCache in the local cloud: subnet groups, replication groups and clusters, for a cache
stack's control plane (there is no data plane: nothing answers on a cache's endpoint).

Ids follow pulumi-aws: a subnet group's id is its name, a replication group's its id, a
cluster's its id. moto 5.2.5 has no DeleteCacheSubnetGroup: deleting a subnet group leaves it in
the local cloud (its auto-name keeps a new one from colliding), and says nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from botocore.parsers import ResponseParserError

from stackflow.localcloud.registry import Props, Registry, ResourceType, tag_list, tags_of
from stackflow.localcloud.resources._shared import (
    error_code,
    input_tags,
    kept,
    observe,
    refuse_unserved,
    same_members,
    tag_changes,
    tag_outputs,
    unless_gone,
)

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

SUBNET_GROUP = "aws:elasticache/subnetGroup:SubnetGroup"
REPLICATION_GROUP = "aws:elasticache/replicationGroup:ReplicationGroup"
CLUSTER = "aws:elasticache/cluster:Cluster"
MANAGED_BY_PULUMI = "Managed by Pulumi"
_GONE = ("CacheSubnetGroupNotFoundFault", "ReplicationGroupNotFoundFault", "CacheClusterNotFound")


def _cache(ctx: CloudContext) -> Any:
    return ctx.client("elasticache")


def _tags(ctx: CloudContext, arn: str) -> dict[str, str]:
    return tags_of(_cache(ctx).list_tags_for_resource(ResourceName=arn).get("TagList"))


def _retag(ctx: CloudContext, arn: str, inputs: Props) -> None:
    upsert, remove = tag_changes(_tags(ctx, arn), inputs)
    if remove:
        _cache(ctx).remove_tags_from_resource(ResourceName=arn, TagKeys=remove)
    if upsert:
        _cache(ctx).add_tags_to_resource(ResourceName=arn, Tags=tag_list(upsert))


def _only_tags(token: str, changed: frozenset[str]) -> None:
    """The in-place changes served are the tags' (and the description's where noted)."""
    other = sorted(changed - {"tags", "description", "applyImmediately"})
    if other:
        raise NotImplementedError(
            f"the local cloud's aws provider does not serve in-place changes of "
            f"{', '.join(other)} of {token} yet"
        )


# --- subnet group ---------------------------------------------------------------------------


def _subnet_group_view(ctx: CloudContext, group: dict[str, Any], state: Props) -> Props:
    arn = str(group["ARN"])
    observed = {
        "name": group["CacheSubnetGroupName"],
        "description": group.get("CacheSubnetGroupDescription"),
        "subnetIds": same_members(
            [s["SubnetIdentifier"] for s in group.get("Subnets", [])], state.get("subnetIds")
        ),
    }
    return {
        **observe(state, observed),
        "arn": arn,
        "vpcId": group.get("VpcId"),
        **tag_outputs(state, _tags(ctx, arn)),
    }


def _find_subnet_group(ctx: CloudContext, name: str) -> dict[str, Any] | None:
    try:
        found = _cache(ctx).describe_cache_subnet_groups(CacheSubnetGroupName=name)
    except ClientError as exc:
        if error_code(exc) in _GONE:
            return None
        raise
    groups = found.get("CacheSubnetGroups") or []
    return dict(groups[0]) if groups else None


def _subnet_group_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, SUBNET_GROUP, inputs, ("name", "description", "subnetIds", "tags"))
    group = _cache(ctx).create_cache_subnet_group(
        CacheSubnetGroupName=str(inputs["name"]),
        CacheSubnetGroupDescription=str(inputs.get("description") or MANAGED_BY_PULUMI),
        SubnetIds=[str(s) for s in inputs.get("subnetIds") or []],
        Tags=tag_list(input_tags(inputs)),
    )["CacheSubnetGroup"]
    return str(group["CacheSubnetGroupName"]), {
        "arn": group["ARN"],
        "vpcId": group.get("VpcId"),
        "tagsAll": input_tags(inputs),
    }


def _subnet_group_read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    group = _find_subnet_group(ctx, id)
    return None if group is None else _subnet_group_view(ctx, group, state)


def _subnet_group_update(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    _only_tags(SUBNET_GROUP, changed - {"description"})
    _retag(ctx, str(state["arn"]), inputs)
    return {**kept(state, ("arn", "vpcId")), "tagsAll": input_tags(inputs)}


def _subnet_group_delete(ctx: CloudContext, id: str, state: Props) -> None:
    try:
        with unless_gone(_GONE):
            _cache(ctx).delete_cache_subnet_group(CacheSubnetGroupName=id)
    except ResponseParserError as exc:
        # moto 5.2.5 lacks DeleteCacheSubnetGroup (it answers a 500 page): the group stays.
        if "500 Internal Server Error" not in str(exc):
            raise


# --- replication group ----------------------------------------------------------------------

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


def _find_group(ctx: CloudContext, group_id: str) -> dict[str, Any] | None:
    try:
        found = _cache(ctx).describe_replication_groups(ReplicationGroupId=group_id)
    except ClientError as exc:
        if error_code(exc) in _GONE:
            return None
        raise
    groups = found.get("ReplicationGroups") or []
    return dict(groups[0]) if groups else None


def _group_outputs(group: dict[str, Any], engine_version: Any) -> Props:
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
        "engineVersionActual": str(engine_version or ""),
    }


def _group_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, REPLICATION_GROUP, inputs, _GROUP_INPUTS)
    kwargs: dict[str, Any] = {"ReplicationGroupId": str(inputs["replicationGroupId"])}
    for wire, (api, kind) in _GROUP_PARAMETERS.items():
        if inputs.get(wire) is not None:
            kwargs[api] = kind(inputs[wire])
    if inputs.get("securityGroupIds"):
        kwargs["SecurityGroupIds"] = [str(g) for g in inputs["securityGroupIds"]]
    tags = input_tags(inputs)
    if tags:
        kwargs["Tags"] = tag_list(tags)
    group = _cache(ctx).create_replication_group(**kwargs)["ReplicationGroup"]
    computed = _group_outputs(group, inputs.get("engineVersion"))
    return str(group["ReplicationGroupId"]), {**computed, "tagsAll": tags}


def _group_read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    group = _find_group(ctx, id)
    if group is None:
        return None
    observed = {
        "replicationGroupId": group["ReplicationGroupId"],
        "description": group.get("Description"),
        "nodeType": group.get("CacheNodeType"),
    }
    arn = str(group.get("ARN"))
    return {
        **observe(state, observed),
        **_group_outputs(group, state.get("engineVersionActual")),
        **tag_outputs(state, _tags(ctx, arn)),
    }


def _group_update(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    refuse_unserved(ctx, REPLICATION_GROUP, inputs, _GROUP_INPUTS)
    _only_tags(REPLICATION_GROUP, changed)
    if "description" in changed:
        _cache(ctx).modify_replication_group(
            ReplicationGroupId=id,
            ReplicationGroupDescription=str(inputs.get("description") or MANAGED_BY_PULUMI),
            ApplyImmediately=True,
        )
    _retag(ctx, str(state["arn"]), inputs)
    computed = kept(state, tuple(_group_outputs({}, None)))
    return {**computed, "tagsAll": input_tags(inputs)}


def _group_delete(ctx: CloudContext, id: str, state: Props) -> None:
    with unless_gone(_GONE):
        _cache(ctx).delete_replication_group(ReplicationGroupId=id)


# --- cluster --------------------------------------------------------------------------------

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


def _find_cluster(ctx: CloudContext, cluster_id: str) -> dict[str, Any] | None:
    try:
        found = _cache(ctx).describe_cache_clusters(
            CacheClusterId=cluster_id, ShowCacheNodeInfo=True
        )
    except ClientError as exc:
        if error_code(exc) in _GONE:
            return None
        raise
    clusters = found.get("CacheClusters") or []
    return dict(clusters[0]) if clusters else None


def _cluster_outputs(cluster: dict[str, Any]) -> Props:
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


def _cluster_create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    refuse_unserved(ctx, CLUSTER, inputs, _CLUSTER_INPUTS)
    kwargs: dict[str, Any] = {"CacheClusterId": str(inputs["clusterId"])}
    for wire, (api, kind) in _CLUSTER_PARAMETERS.items():
        if inputs.get(wire) is not None:
            kwargs[api] = kind(inputs[wire])
    if inputs.get("securityGroupIds"):
        kwargs["SecurityGroupIds"] = [str(g) for g in inputs["securityGroupIds"]]
    tags = input_tags(inputs)
    if tags:
        kwargs["Tags"] = tag_list(tags)
    _cache(ctx).create_cache_cluster(**kwargs)
    cluster = _find_cluster(ctx, str(inputs["clusterId"])) or {}
    return str(inputs["clusterId"]), {**_cluster_outputs(cluster), "tagsAll": tags}


def _cluster_read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    cluster = _find_cluster(ctx, id)
    if cluster is None:
        return None
    observed = {
        "clusterId": cluster["CacheClusterId"],
        "engine": cluster.get("Engine"),
        "nodeType": cluster.get("CacheNodeType"),
        "numCacheNodes": cluster.get("NumCacheNodes"),
    }
    return {
        **observe(state, observed),
        **_cluster_outputs(cluster),
        **tag_outputs(state, _tags(ctx, str(cluster.get("ARN")))),
    }


def _cluster_update(
    ctx: CloudContext, id: str, state: Props, inputs: Props, changed: frozenset[str]
) -> Props:
    refuse_unserved(ctx, CLUSTER, inputs, _CLUSTER_INPUTS)
    _only_tags(CLUSTER, changed - {"description"})
    _retag(ctx, str(state["arn"]), inputs)
    computed = kept(state, ("arn", "cacheNodes", "clusterAddress", "engineVersionActual"))
    return {**computed, "tagsAll": input_tags(inputs)}


def _cluster_delete(ctx: CloudContext, id: str, state: Props) -> None:
    with unless_gone(_GONE):
        _cache(ctx).delete_cache_cluster(CacheClusterId=id)


def register(aws: Registry) -> None:
    """Add the ElastiCache subnet group, replication group and cluster types."""
    aws.add(
        ResourceType(
            token=SUBNET_GROUP,
            create=_subnet_group_create,
            read=_subnet_group_read,
            update=_subnet_group_update,
            delete=_subnet_group_delete,
            force_new=frozenset({"name", "region"}),
            computed=("arn", "vpcId", "tagsAll"),
            auto_name="name",
            auto_name_max=255,
            drift_inputs=frozenset({"tags"}),
            defaults={"description": MANAGED_BY_PULUMI},
        ),
        ResourceType(
            token=REPLICATION_GROUP,
            create=_group_create,
            read=_group_read,
            update=_group_update,
            delete=_group_delete,
            force_new=frozenset(
                {
                    "replicationGroupId",
                    "subnetGroupName",
                    "atRestEncryptionEnabled",
                    "port",
                    "engine",
                    "region",
                }
            ),
            computed=(*_group_outputs({}, None), "tagsAll"),
            auto_name="replicationGroupId",
            auto_name_max=40,
            drift_inputs=frozenset({"tags"}),
            defaults={"description": MANAGED_BY_PULUMI, "engine": "redis"},
        ),
        ResourceType(
            token=CLUSTER,
            create=_cluster_create,
            read=_cluster_read,
            update=_cluster_update,
            delete=_cluster_delete,
            force_new=frozenset(
                {
                    "clusterId",
                    "engine",
                    "port",
                    "subnetGroupName",
                    "availabilityZone",
                    "replicationGroupId",
                    "region",
                }
            ),
            computed=("arn", "cacheNodes", "clusterAddress", "engineVersionActual", "tagsAll"),
            auto_name="clusterId",
            auto_name_max=50,
            drift_inputs=frozenset({"tags"}),
        ),
    )
