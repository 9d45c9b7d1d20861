"""Pending creates looked up in a cloud: moto's AWS in this process (no server), with resources made
through boto3 as an interrupted create would have left them. Each verdict: import the one found
(with pulumi-aws's id), clear what the cloud never made or a stack already holds, and clear and
say an ambiguous match."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import pytest

from stackflow.engine.checkpoints import holdings
from stackflow.engine.pending import LOOKUPS, CloudClients, PendingCreate, Recovery, look_up

pytestmark = pytest.mark.unit

REGION = "eu-west-1"
TAGS = {"environment": "dev-1", "Name": "stackflow-dev-1-vpc"}


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> Iterator[CloudClients]:
    from moto import mock_aws

    for key in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONFIG_FILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        yield CloudClients(REGION, where="the local cloud")


def pending(kind: str, logical: str, **inputs: Any) -> PendingCreate:
    return PendingCreate(f"urn:pulumi:dev-1::stackflow-x::{kind}::{logical}", kind, inputs)


def test_an_rds_instance_is_found_by_its_identifier_and_imported_as_its_resource_id(
    clients: CloudClients,
) -> None:
    rds = clients.client("rds")
    db = rds.create_db_instance(
        DBInstanceIdentifier="stackflow-dev-1-mysql",
        Engine="mysql",
        DBInstanceClass="db.t4g.micro",
        AllocatedStorage=20,
        MasterUsername="app",
        MasterUserPassword="not-a-secret-1",
    )["DBInstance"]
    create = pending("aws:rds/instance:Instance", "mysql", identifier="stackflow-dev-1-mysql")

    verdict = look_up(create, clients, set())

    assert verdict.found == db["DbiResourceId"] and verdict.found.startswith("db-")
    assert verdict.line("the local cloud") == (
        f"imported aws:rds/instance:Instance mysql as {db['DbiResourceId']}: the local cloud "
        "had made it"
    )
    absent = pending("aws:rds/instance:Instance", "mysql", identifier="stackflow-dev-1-other")
    assert look_up(absent, clients, set()).found is None


def test_a_parameter_group_some_stack_already_holds_is_never_adopted_twice(
    clients: CloudClients,
) -> None:
    clients.client("rds").create_db_parameter_group(
        DBParameterGroupName="pg-1", DBParameterGroupFamily="mysql8.0", Description="d"
    )
    create = pending("aws:rds/parameterGroup:ParameterGroup", "mysql", name="pg-1")
    state = {"resources": [{"type": create.type, "id": "pg-1", "outputs": {"arn": "arn:pg-1"}}]}

    verdict = look_up(create, clients, holdings(state))

    assert verdict.found is None and verdict.held == ("pg-1",)
    assert "is already in a stack's state" in verdict.line("the local cloud")
    # the same id held by a resource of another type (a bucket named like it) is no obstacle
    other = {"resources": [{"type": "aws:s3/bucket:Bucket", "id": "pg-1"}]}
    assert look_up(create, clients, holdings(other)).found == "pg-1"


def test_a_subnet_has_no_name_and_is_found_by_its_vpc_and_cidr(clients: CloudClients) -> None:
    ec2 = clients.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.9.1.0/24")["Subnet"]["SubnetId"]

    found = look_up(
        pending("aws:ec2/subnet:Subnet", "a", vpcId=vpc, cidrBlock="10.9.1.0/24"), clients, set()
    )
    never = look_up(
        pending("aws:ec2/subnet:Subnet", "b", vpcId=vpc, cidrBlock="10.9.2.0/24"), clients, set()
    )

    assert found.found == subnet
    assert never.found is None and not never.ambiguous and not never.held
    assert never.line("the local cloud") == (
        "cleared aws:ec2/subnet:Subnet b: the local cloud never made it"
    )


def test_two_vpcs_that_match_are_ambiguous_cleared_and_said_with_what_to_do(
    clients: CloudClients,
) -> None:
    ec2 = clients.client("ec2")
    tagged = [{"ResourceType": "vpc", "Tags": [{"Key": k, "Value": v} for k, v in TAGS.items()]}]
    made = sorted(
        ec2.create_vpc(CidrBlock="10.8.0.0/16", TagSpecifications=tagged)["Vpc"]["VpcId"]
        for _ in range(2)
    )
    create = pending("aws:ec2/vpc:Vpc", "vpc", cidrBlock="10.8.0.0/16", tags=TAGS)

    verdict = look_up(create, clients, set())

    assert verdict.found is None and sorted(verdict.ambiguous) == made
    assert "holds 2 that match and no stack holds" in verdict.line("AWS")
    assert "delete those no one uses" in verdict.line("AWS")
    # one of them held by a state: the other is the one the create made
    held = {("aws:ec2/vpc:Vpc", made[0])}
    assert look_up(create, clients, held).found == made[1]
    # another environment's tags: not ours
    theirs = {**TAGS, "environment": "dev-2"}
    assert (
        look_up(
            pending("aws:ec2/vpc:Vpc", "vpc", cidrBlock="10.8.0.0/16", tags=theirs), clients, set()
        ).found
        is None
    )


def test_routes_rules_and_associations_are_found_by_what_identifies_them(
    clients: CloudClients,
) -> None:
    ec2 = clients.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.7.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.7.1.0/24")["Subnet"]["SubnetId"]
    igw = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
    table = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    association = ec2.associate_route_table(RouteTableId=table, SubnetId=subnet)["AssociationId"]
    ec2.create_route(RouteTableId=table, DestinationCidrBlock="0.0.0.0/0", GatewayId=igw)
    group = ec2.create_security_group(GroupName="app-sg-1", Description="d", VpcId=vpc)["GroupId"]
    rule = ec2.authorize_security_group_ingress(
        GroupId=group,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 80,
                "ToPort": 80,
                "IpRanges": [{"CidrIp": "0.0.0.0/0"}],
            }
        ],
    )["SecurityGroupRules"][0]["SecurityGroupRuleId"]

    def found(kind: str, **inputs: Any) -> str | None:
        return look_up(pending(kind, "x", **inputs), clients, set()).found

    assert found("aws:ec2/routeTable:RouteTable", vpcId=vpc) == table  # not the VPC's main one
    assert (
        found(
            "aws:ec2/routeTableAssociation:RouteTableAssociation",
            routeTableId=table,
            subnetId=subnet,
        )
        == association
    )
    assert (
        found(
            "aws:ec2/route:Route",
            routeTableId=table,
            destinationCidrBlock="0.0.0.0/0",
            gatewayId=igw,
        )
        == f"r-{table}{zlib.crc32(b'0.0.0.0/0')}"
    )
    assert found("aws:ec2/internetGateway:InternetGateway", vpcId=vpc) == igw
    assert found("aws:ec2/securityGroup:SecurityGroup", name="app-sg-1", vpcId=vpc) == group
    ingress = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
    rule_inputs = {"securityGroupId": group, "ipProtocol": "tcp", "fromPort": 80, "toPort": 80}
    assert found(ingress, **rule_inputs, cidrIpv4="0.0.0.0/0") == rule
    assert found(ingress, **rule_inputs, cidrIpv4="10.0.0.0/8") is None
    egress = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
    assert found(egress, **rule_inputs, cidrIpv4="0.0.0.0/0") is None


def test_named_resources_of_the_app_and_database_stacks_are_found_by_name(
    clients: CloudClients,
) -> None:
    iam, logs, secrets = (
        clients.client("iam"),
        clients.client("logs"),
        clients.client("secretsmanager"),
    )
    iam.create_role(RoleName="exec-1", AssumeRolePolicyDocument="{}")
    logs.create_log_group(logGroupName="/ecs/app-1")
    arn = secrets.create_secret(Name="stackflow/dev-1/mysql-password-1", SecretString="x")["ARN"]
    cluster = clients.client("ecs").create_cluster(clusterName="cluster-1")["cluster"]["clusterArn"]
    vpc = clients.client("ec2").create_vpc(CidrBlock="10.6.0.0/16")["Vpc"]["VpcId"]
    group = clients.client("elbv2").create_target_group(
        Name="app-tg-1", Protocol="HTTP", Port=80, VpcId=vpc
    )["TargetGroups"][0]["TargetGroupArn"]
    clients.client("ecr").create_repository(repositoryName="app-1")

    def found(kind: str, **inputs: Any) -> str | None:
        return look_up(pending(kind, "x", **inputs), clients, set()).found

    assert found("aws:iam/role:Role", name="exec-1") == "exec-1"
    assert found("aws:iam/role:Role", name="exec-2") is None
    assert found("aws:cloudwatch/logGroup:LogGroup", name="/ecs/app-1") == "/ecs/app-1"
    assert found("aws:cloudwatch/logGroup:LogGroup", name="/ecs/app") is None  # a prefix of it
    assert found("aws:secretsmanager/secret:Secret", name="stackflow/dev-1/mysql-password-1") == arn
    assert found("aws:ecs/cluster:Cluster", name="cluster-1") == cluster
    assert found("aws:ecs/cluster:Cluster", name="cluster-2") is None
    assert found("aws:lb/targetGroup:TargetGroup", name="app-tg-1") == group
    assert found("aws:lb/targetGroup:TargetGroup", name="app-tg-2") is None
    assert found("aws:ecr/repository:Repository", name="app-1") == "app-1"
    assert found("aws:ecr/repository:Repository", name="app-2") is None
    assert found("random:index/randomPassword:RandomPassword") is None  # in the state alone


# The services stackflow's own programs deploy: an interrupted create of one of their types is
# looked up; the families served for rehearsals alone (API Gateway, DynamoDB, SQS, ...) have no
# lookup yet, and their pending creates are cleared with a note saying so.
LOOKED_UP = ("ec2_vpc", "ec2_routing", "ec2_gateways", "ec2_security")
LOOKED_UP += ("rds_groups", "rds_instances")
LOOKED_UP += ("secretsmanager", "iam", "logs", "ecs", "ecs_tasks", "ecs_services")
LOOKED_UP += ("elb", "elb_target_groups", "elb_listeners", "s3", "s3_bucket_config", "ecr")
LOOKED_UP += ("elasticache", "lambda_", "sfn", "random")


def test_every_type_of_the_looked_up_services_has_a_lookup() -> None:
    from stackflow.localcloud.registry import Registry
    from stackflow.localcloud.resources import SERVICES, register_module

    served: set[str] = set()
    for package, modules in SERVICES.items():
        found = Registry(package)
        for name in set(modules) & set(LOOKED_UP):
            register_module(found, name)
        served |= set(found.resources)
    assert served <= set(LOOKUPS), sorted(served - set(LOOKUPS))


def test_every_type_stackflows_own_programs_declare_has_a_lookup() -> None:
    """Derived from the programs themselves (run under Pulumi's mocks), so a type a program adds
    without a lookup fails here, whatever LOOKED_UP says."""
    from tests.unit.test_programs import app_run, db_run, net_run

    runs = (net_run(), db_run(), app_run())
    declared = {r.type for run in runs for r in run.resources.values()}
    declared = {token for token in declared if not token.startswith("pulumi:")}
    assert declared, "the programs declared nothing: the mocks did not run them"
    assert declared <= set(LOOKUPS), sorted(declared - set(LOOKUPS))


def test_a_type_without_a_lookup_is_cleared_and_the_note_says_what_was_done() -> None:
    clients = CloudClients(REGION, where="AWS")
    unknown = look_up(pending("aws:sqs/queue:Queue", "q", name="q"), clients, set())
    assert not unknown.looked and "stackflow cannot look this type up" in unknown.line("AWS")

    recovery = Recovery(unlocked=True, verdicts=(unknown,), other_pending=1, where="AWS")
    assert recovery and not Recovery()
    assert recovery.note.startswith(
        "recovered what an interrupted operation left: removed its lock; cleared 1 pending "
        "updates, deletes or reads; cleared aws:sqs/queue:Queue q: stackflow cannot"
    )
