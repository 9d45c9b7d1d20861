"""RDS and ElastiCache: found by their physical names (the identifier or group name the engine
chose, auto-named ones included). Ids are pulumi-aws's: an RDS instance's is its resource id
(db-...), every other one's its name."""

from __future__ import annotations

from stackflow.engine.pending.cloud import CloudClients, answer
from stackflow.engine.pending.model import Candidate, Lookup, Props, text


def db_subnet_group(clients: CloudClients, inputs: Props) -> list[Candidate]:
    name = text(inputs, "name")
    if name is None:
        return []
    rds = clients.client("rds")
    found = answer(
        lambda: rds.describe_db_subnet_groups(DBSubnetGroupName=name), "DBSubnetGroupNotFoundFault"
    )
    return [Candidate(g["DBSubnetGroupName"]) for g in (found or {}).get("DBSubnetGroups", [])]


def db_parameter_group(clients: CloudClients, inputs: Props) -> list[Candidate]:
    name = text(inputs, "name")
    if name is None:
        return []
    rds = clients.client("rds")
    found = answer(
        lambda: rds.describe_db_parameter_groups(DBParameterGroupName=name),
        "DBParameterGroupNotFound",
    )
    return [
        Candidate(g["DBParameterGroupName"]) for g in (found or {}).get("DBParameterGroups", [])
    ]


def db_instance(clients: CloudClients, inputs: Props) -> list[Candidate]:
    identifier = text(inputs, "identifier")
    if identifier is None:
        return []
    rds = clients.client("rds")
    found = answer(
        lambda: rds.describe_db_instances(DBInstanceIdentifier=identifier), "DBInstanceNotFound"
    )
    return [
        Candidate(db["DbiResourceId"])  # pulumi-aws's id of an instance: its resource id
        for db in (found or {}).get("DBInstances", [])
        if db.get("DBInstanceStatus") != "deleting"
    ]


def cache_subnet_group(clients: CloudClients, inputs: Props) -> list[Candidate]:
    name = text(inputs, "name")
    if name is None:
        return []
    cache = clients.client("elasticache")
    found = answer(
        lambda: cache.describe_cache_subnet_groups(CacheSubnetGroupName=name),
        "CacheSubnetGroupNotFoundFault",
    )
    return [
        Candidate(g["CacheSubnetGroupName"]) for g in (found or {}).get("CacheSubnetGroups", [])
    ]


def cache_replication_group(clients: CloudClients, inputs: Props) -> list[Candidate]:
    group = text(inputs, "replicationGroupId")
    if group is None:
        return []
    cache = clients.client("elasticache")
    found = answer(
        lambda: cache.describe_replication_groups(ReplicationGroupId=group),
        "ReplicationGroupNotFoundFault",
    )
    return [
        Candidate(g["ReplicationGroupId"])
        for g in (found or {}).get("ReplicationGroups", [])
        if g.get("Status") != "deleting"
    ]


def cache_cluster(clients: CloudClients, inputs: Props) -> list[Candidate]:
    cluster = text(inputs, "clusterId")
    if cluster is None:
        return []
    cache = clients.client("elasticache")
    found = answer(
        lambda: cache.describe_cache_clusters(CacheClusterId=cluster), "CacheClusterNotFound"
    )
    return [
        Candidate(c["CacheClusterId"])
        for c in (found or {}).get("CacheClusters", [])
        if c.get("CacheClusterStatus") != "deleting"
    ]


LOOKUPS: dict[str, Lookup] = {
    "aws:rds/subnetGroup:SubnetGroup": db_subnet_group,
    "aws:rds/parameterGroup:ParameterGroup": db_parameter_group,
    "aws:rds/instance:Instance": db_instance,
    "aws:elasticache/subnetGroup:SubnetGroup": cache_subnet_group,
    "aws:elasticache/replicationGroup:ReplicationGroup": cache_replication_group,
    "aws:elasticache/cluster:Cluster": cache_cluster,
}
