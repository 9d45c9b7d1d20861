"""RDS and ElastiCache: found by their physical names (the identifier or group name the engine
chose, auto-named ones included). Ids are pulumi-aws's: an RDS instance's is its resource id
(db-...), every other one's its name."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from stackflow.engine.pending.cloud import by_name
from stackflow.engine.pending.model import Lookup


def _kept(status: str) -> Callable[[Mapping[str, Any]], bool]:
    """Whether an item is not being deleted, by its `status` field."""

    def alive(item: Mapping[str, Any]) -> bool:
        return item.get(status) != "deleting"

    return alive


LOOKUPS: dict[str, Lookup] = {
    "aws:rds/subnetGroup:SubnetGroup": by_name(
        "rds",
        "describe_db_subnet_groups",
        "DBSubnetGroupName",
        "DBSubnetGroups",
        "DBSubnetGroupName",
        gone=("DBSubnetGroupNotFoundFault",),
    ),
    "aws:rds/parameterGroup:ParameterGroup": by_name(
        "rds",
        "describe_db_parameter_groups",
        "DBParameterGroupName",
        "DBParameterGroups",
        "DBParameterGroupName",
        gone=("DBParameterGroupNotFound",),
    ),
    "aws:rds/instance:Instance": by_name(  # pulumi-aws's id of an instance: its resource id
        "rds",
        "describe_db_instances",
        "DBInstanceIdentifier",
        "DBInstances",
        "DbiResourceId",
        given="identifier",
        gone=("DBInstanceNotFound",),
        alive=_kept("DBInstanceStatus"),
    ),
    "aws:elasticache/subnetGroup:SubnetGroup": by_name(
        "elasticache",
        "describe_cache_subnet_groups",
        "CacheSubnetGroupName",
        "CacheSubnetGroups",
        "CacheSubnetGroupName",
        gone=("CacheSubnetGroupNotFoundFault",),
    ),
    "aws:elasticache/replicationGroup:ReplicationGroup": by_name(
        "elasticache",
        "describe_replication_groups",
        "ReplicationGroupId",
        "ReplicationGroups",
        "ReplicationGroupId",
        given="replicationGroupId",
        gone=("ReplicationGroupNotFoundFault",),
        alive=_kept("Status"),
    ),
    "aws:elasticache/cluster:Cluster": by_name(
        "elasticache",
        "describe_cache_clusters",
        "CacheClusterId",
        "CacheClusters",
        "CacheClusterId",
        given="clusterId",
        gone=("CacheClusterNotFound",),
        alive=_kept("CacheClusterStatus"),
    ),
}
