"""stackflow's policy pack: what a reviewer checks in the resources of this graph before they
reach AWS. A Pulumi policy pack like any other (`pulumi preview --policy-pack policies/stackflow`
runs it too); stackflow runs it on every preview, approval plan and `up` of an environment that
names it, at the level the environment's kind gives it (prod: mandatory).

Each message starts with the property at fault, in Pulumi's (camelCase) words.
"""

from __future__ import annotations

from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

RDS_INSTANCE = "aws:rds/instance:Instance"
ANYWHERE = ("0.0.0.0/0", "::/0")
# MySQL, PostgreSQL, SQL Server, Oracle, MongoDB, Redis, Memcached, OpenSearch
DATABASE_PORTS = [3306, 5432, 1433, 1521, 27017, 6379, 11211, 9200]
REQUIRED_TAGS = ["project", "environment", "managed-by"]
# The types of this graph (and their neighbours) that carry tags in AWS.
TAGGABLE = {
    "aws:cloudwatch/logGroup:LogGroup",
    "aws:ec2/eip:Eip",
    "aws:ec2/instance:Instance",
    "aws:ec2/internetGateway:InternetGateway",
    "aws:ec2/natGateway:NatGateway",
    "aws:ec2/routeTable:RouteTable",
    "aws:ec2/securityGroup:SecurityGroup",
    "aws:ec2/subnet:Subnet",
    "aws:ec2/vpc:Vpc",
    "aws:ecr/repository:Repository",
    "aws:ecs/cluster:Cluster",
    "aws:ecs/service:Service",
    "aws:ecs/taskDefinition:TaskDefinition",
    "aws:elasticache/replicationGroup:ReplicationGroup",
    "aws:iam/role:Role",
    "aws:lambda/function:Function",
    "aws:lb/listener:Listener",
    "aws:lb/loadBalancer:LoadBalancer",
    "aws:lb/targetGroup:TargetGroup",
    "aws:rds/instance:Instance",
    "aws:rds/parameterGroup:ParameterGroup",
    "aws:rds/subnetGroup:SubnetGroup",
    "aws:s3/bucket:Bucket",
    "aws:s3/bucketV2:BucketV2",
    "aws:secretsmanager/secret:Secret",
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
}


def rds_not_public(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type == RDS_INSTANCE and args.props.get("publiclyAccessible") is True:
        report("publiclyAccessible is true: the database gets an address reachable from outside")


def rds_deletion_protection(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type == RDS_INSTANCE and args.props.get("deletionProtection") is not True:
        report("deletionProtection is off: one delete call removes the database")


def rds_storage_encrypted(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type == RDS_INSTANCE and args.props.get("storageEncrypted") is not True:
        report("storageEncrypted is off: the data and its snapshots are stored unencrypted")


def rds_final_snapshot(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type == RDS_INSTANCE and args.props.get("skipFinalSnapshot") is not False:
        report("skipFinalSnapshot is on: deleting the database keeps no final snapshot")


def _opening(protocol: Any, low: Any, high: Any, cidrs: list[Any], where: str) -> dict[str, Any]:
    return {"protocol": protocol, "from": low, "to": high, "cidrs": cidrs, "where": where}


def _ingress(args: ResourceValidationArgs) -> list[dict[str, Any]]:
    """Each ingress a resource opens: protocol, ports, source CIDRs, and where it says so."""
    p, kind = args.props, args.resource_type
    if kind == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule":
        cidrs = [p.get("cidrIpv4"), p.get("cidrIpv6")]
        return [
            _opening(p.get("ipProtocol"), p.get("fromPort"), p.get("toPort"), cidrs, "cidrIpv4")
        ]
    if kind == "aws:ec2/securityGroupRule:SecurityGroupRule" and p.get("type") == "ingress":
        cidrs = [*(p.get("cidrBlocks") or []), *(p.get("ipv6CidrBlocks") or [])]
        return [
            _opening(p.get("protocol"), p.get("fromPort"), p.get("toPort"), cidrs, "cidrBlocks")
        ]
    if kind != "aws:ec2/securityGroup:SecurityGroup":
        return []
    return [
        _opening(
            r.get("protocol"),
            r.get("fromPort"),
            r.get("toPort"),
            [*(r.get("cidrBlocks") or []), *(r.get("ipv6CidrBlocks") or [])],
            f"ingress[{i}].cidrBlocks",
        )
        for i, r in enumerate(p.get("ingress") or [])
    ]


def db_port_not_open_to_world(args: ResourceValidationArgs, report: ReportViolation) -> None:
    ports = (args.get_config() or {}).get("ports") or DATABASE_PORTS
    for rule in _ingress(args):
        if not any(c in ANYWHERE for c in rule["cidrs"]):
            continue
        every = str(rule["protocol"]) in ("-1", "all")
        low, high = rule["from"], rule["to"]
        opened = [p for p in ports if every or (low is not None and low <= p <= (high or low))]
        if opened:
            report(f"{rule['where']} opens port {opened[0]} (a database's) to the whole internet")


def required_tags(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type not in TAGGABLE:
        return
    wanted = (args.get_config() or {}).get("tags") or REQUIRED_TAGS
    tags = args.props.get("tags") or {}
    missing = [t for t in wanted if t not in tags]
    if missing:
        report(f"tags lacks {', '.join(missing)}")


PolicyPack(
    name="stackflow",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=[
        ResourceValidationPolicy(
            name="rds-not-public",
            description="A database has no public address.",
            validate=rds_not_public,
        ),
        ResourceValidationPolicy(
            name="rds-deletion-protection",
            description="A database has deletion protection on.",
            validate=rds_deletion_protection,
        ),
        ResourceValidationPolicy(
            name="rds-storage-encrypted",
            description="A database's storage is encrypted.",
            validate=rds_storage_encrypted,
        ),
        ResourceValidationPolicy(
            name="rds-final-snapshot",
            description="Deleting a database takes a final snapshot.",
            validate=rds_final_snapshot,
        ),
        ResourceValidationPolicy(
            name="db-port-not-open-to-world",
            description="No security group opens a database port to the whole internet.",
            validate=db_port_not_open_to_world,
            config_schema=PolicyConfigSchema(
                properties={"ports": {"type": "array", "items": {"type": "integer"}}}
            ),
        ),
        ResourceValidationPolicy(
            name="required-tags",
            description="Every taggable resource carries the tags cost and ownership reports use.",
            validate=required_tags,
            config_schema=PolicyConfigSchema(
                properties={"tags": {"type": "array", "items": {"type": "string"}}}
            ),
        ),
    ],
)
