"""The three Pulumi programs under Pulumi's mock runtime: what they declare, wire and export."""

from __future__ import annotations

import ast
import inspect
import ipaddress
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pulumi_aws as aws
import pulumi_random as random
import pytest
from pulumi.runtime.rpc import is_rpc_secret
from pydantic import ValidationError

from programs.app import AppArgs, AppOutputs, app
from programs.common import BaseArgs, fit_name, tags
from programs.database import DatabaseArgs, DatabaseOutputs, database
from programs.networking import NetworkingArgs, NetworkingOutputs, networking, subnet_cidrs
from tests.unit.pulumi_mocks import AwsMocks, MockedResource, ProgramRun, run_program

pytestmark = pytest.mark.unit

PROJECT = "sf"
REGION = "eu-west-1"
SECRET_ARN = f"arn:aws:secretsmanager:{REGION}:123456789012:secret:sf/dev/mysql-password-AbCdEf"
MIGRATION_CIDRS = ["192.0.2.0/24", "198.51.100.7/32"]

VPC = "aws:ec2/vpc:Vpc"
SUBNET = "aws:ec2/subnet:Subnet"
IGW = "aws:ec2/internetGateway:InternetGateway"
ROUTE_TABLE = "aws:ec2/routeTable:RouteTable"
ROUTE = "aws:ec2/route:Route"
ASSOCIATION = "aws:ec2/routeTableAssociation:RouteTableAssociation"
NAT = "aws:ec2/natGateway:NatGateway"
EIP = "aws:ec2/eip:Eip"
SG = "aws:ec2/securityGroup:SecurityGroup"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
SUBNET_GROUP = "aws:rds/subnetGroup:SubnetGroup"
PARAMETER_GROUP = "aws:rds/parameterGroup:ParameterGroup"
INSTANCE = "aws:rds/instance:Instance"
PASSWORD = "random:index/randomPassword:RandomPassword"
SECRET = "aws:secretsmanager/secret:Secret"
SECRET_VERSION = "aws:secretsmanager/secretVersion:SecretVersion"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ROLE_ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
TASK_DEFINITION = "aws:ecs/taskDefinition:TaskDefinition"
SERVICE = "aws:ecs/service:Service"
LOAD_BALANCER = "aws:lb/loadBalancer:LoadBalancer"
TARGET_GROUP = "aws:lb/targetGroup:TargetGroup"
LISTENER = "aws:lb/listener:Listener"


# --- arguments and runs ---------------------------------------------------------------------


def net_args(**overrides: Any) -> NetworkingArgs:
    values: dict[str, Any] = dict(
        project=PROJECT,
        environment="dev",
        vpc_cidr="10.20.0.0/16",
        az_count=3,
        nat_gateway=True,
        migration_cidrs=MIGRATION_CIDRS,
        app_port=8080,
        db_port=3307,
    )
    return NetworkingArgs(**{**values, **overrides})


def db_args(prod: bool = False, **overrides: Any) -> DatabaseArgs:
    values: dict[str, Any] = dict(
        project=PROJECT,
        environment="prod" if prod else "dev",
        private_subnet_ids=["subnet-private-a", "subnet-private-b"],
        db_security_group_id="sg-db",
        engine_version="8.0",
        instance_class="db.t4g.micro",
        allocated_storage_gb=20,
        backup_retention_days=14 if prod else 1,
        multi_az=prod,
        deletion_protection=prod,
        final_snapshot=prod,
        publicly_accessible=False,
        db_name="app",
        username="stackflow",
        port=3307,
    )
    return DatabaseArgs(**{**values, **overrides})


def app_args(**overrides: Any) -> AppArgs:
    values: dict[str, Any] = dict(
        project=PROJECT,
        environment="dev",
        region=REGION,
        vpc_id="vpc-1",
        public_subnet_ids=["subnet-public-a", "subnet-public-b"],
        private_subnet_ids=["subnet-private-a", "subnet-private-b"],
        alb_security_group_id="sg-alb",
        app_security_group_id="sg-app",
        tasks_in_public_subnets=False,
        db_host="db.internal",
        db_port=3307,
        db_name="app",
        db_user="stackflow",
        db_password_secret_arn=SECRET_ARN,
        image="public.ecr.aws/nginx/nginx:stable",
        cpu=256,
        memory_mb=512,
        desired_count=2,
        port=8080,
        health_check_path="/healthz",
        log_retention_days=14,
    )
    return AppArgs(**{**values, **overrides})


def run(node: str, program: Callable[[], Mapping[str, Any]], environment: str) -> ProgramRun:
    project = f"{PROJECT}-{node}"
    return run_program(
        program, AwsMocks(project, environment, REGION), project=project, stack=environment
    )


def run_networking(args: NetworkingArgs) -> ProgramRun:
    return run("networking", lambda: networking(args), args.environment)


def run_database(args: DatabaseArgs) -> ProgramRun:
    return run("database", lambda: database(args), args.environment)


def run_app(args: AppArgs) -> ProgramRun:
    return run("app", lambda: app(args), args.environment)


# Runs are deterministic, so the common ones are shared across tests.
@cache
def net_run(nat_gateway: bool = True) -> ProgramRun:
    return run_networking(net_args(nat_gateway=nat_gateway))


@cache
def db_run(prod: bool = False) -> ProgramRun:
    return run_database(db_args(prod=prod))


@cache
def app_run(tasks_in_public_subnets: bool = False) -> ProgramRun:
    return run_app(app_args(tasks_in_public_subnets=tasks_in_public_subnets))


def values(program_run: ProgramRun) -> dict[str, Any]:
    return {k: v.value for k, v in program_run.exports.items()}


def by_id(program_run: ProgramRun, type_: str) -> dict[str, MockedResource]:
    return {r.id: r for r in program_run.of_type(type_)}


def by_name(program_run: ProgramRun, type_: str, name: str) -> MockedResource:
    found = [r for r in program_run.of_type(type_) if r.name == name]
    assert len(found) == 1, f"expected one {type_} named {name!r}, found {len(found)}"
    return found[0]


def plain_strings(value: Any) -> Iterator[str]:
    """Every string in an input value, not descending into values marked secret."""
    if is_rpc_secret(value):
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from plain_strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from plain_strings(item)


def secret_strings(value: Any) -> Iterator[str]:
    """Every string inside the values marked secret in an input value."""
    if is_rpc_secret(value):
        inner = value["value"]
        yield inner if isinstance(inner, str) else json.dumps(inner)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from secret_strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from secret_strings(item)


# --- networking -----------------------------------------------------------------------------


def test_subnets_span_the_azs_inside_the_vpc_without_overlap() -> None:
    net = net_run()
    vpc = net.one(VPC)
    assert vpc.inputs["cidrBlock"] == "10.20.0.0/16"
    assert vpc.inputs["enableDnsSupport"] is True and vpc.inputs["enableDnsHostnames"] is True
    subnets = net.of_type(SUBNET)
    public = [s for s in subnets if s.name.startswith("public-")]
    private = [s for s in subnets if s.name.startswith("private-")]
    assert len(public) == len(private) == 3 and len(subnets) == 6
    for tier in (public, private):
        zones = {s.inputs["availabilityZone"] for s in tier}
        assert len(zones) == 3 and zones <= {f"{REGION}{c}" for c in "abcdef"}
    network = ipaddress.IPv4Network("10.20.0.0/16")
    blocks = [ipaddress.IPv4Network(s.inputs["cidrBlock"]) for s in subnets]
    assert all(b.subnet_of(network) for b in blocks)
    assert not any(a.overlaps(b) for i, a in enumerate(blocks) for b in blocks[i + 1 :])
    assert all(s.inputs["vpcId"] == vpc.id for s in subnets)
    assert all(s.inputs["mapPublicIpOnLaunch"] is False for s in subnets)


def test_subnet_layout_is_stable_when_azs_are_added_and_fits_a_small_vpc() -> None:
    two_public, two_private = subnet_cidrs("10.0.0.0/16", 2)
    six_public, six_private = subnet_cidrs("10.0.0.0/16", 6)
    assert six_public[:2] == two_public and six_private[:2] == two_private
    small_public, small_private = subnet_cidrs("10.0.0.0/24", 6)
    assert {ipaddress.IPv4Network(c).prefixlen for c in small_public + small_private} == {28}
    assert len(set(small_public + small_private)) == 12


def test_public_subnets_route_to_the_internet_gateway_and_private_ones_do_not() -> None:
    net = net_run()
    igw = net.one(IGW)
    assert igw.inputs["vpcId"] == net.one(VPC).id
    tables = by_id(net, ROUTE_TABLE)
    public_rt = by_name(net, ROUTE_TABLE, "public")
    private_rt = by_name(net, ROUTE_TABLE, "private")
    subnet_ids = {s.id: s.name for s in net.of_type(SUBNET)}
    table_of = {
        subnet_ids[a.inputs["subnetId"]]: tables[a.inputs["routeTableId"]].name
        for a in net.of_type(ASSOCIATION)
    }
    assert len(table_of) == 6
    assert all(table == name.split("-")[0] for name, table in table_of.items())

    routes = {
        (r.inputs["routeTableId"], r.inputs["destinationCidrBlock"]): r for r in net.of_type(ROUTE)
    }
    assert routes[(public_rt.id, "0.0.0.0/0")].inputs["gatewayId"] == igw.id
    assert "gatewayId" not in routes[(private_rt.id, "0.0.0.0/0")].inputs
    assert [r for r in net.of_type(ROUTE) if r.inputs.get("gatewayId") == igw.id] == [
        routes[(public_rt.id, "0.0.0.0/0")]
    ]


def test_nat_gateway_on_gives_private_subnets_a_default_route_through_it() -> None:
    net = net_run(nat_gateway=True)
    nat = net.one(NAT)
    eip = net.one(EIP)
    assert nat.inputs["allocationId"] == eip.id and eip.inputs["domain"] == "vpc"
    public_ids = {s.id for s in net.of_type(SUBNET) if s.name.startswith("public-")}
    assert nat.inputs["subnetId"] in public_ids
    private_rt = by_name(net, ROUTE_TABLE, "private")
    (default,) = [r for r in net.of_type(ROUTE) if r.inputs["routeTableId"] == private_rt.id]
    assert default.inputs["destinationCidrBlock"] == "0.0.0.0/0"
    assert default.inputs["natGatewayId"] == nat.id


def test_nat_gateway_off_leaves_private_subnets_without_a_default_route() -> None:
    net = net_run(nat_gateway=False)
    assert net.of_type(NAT) == [] and net.of_type(EIP) == []
    private_rt = by_name(net, ROUTE_TABLE, "private")
    assert [r for r in net.of_type(ROUTE) if r.inputs["routeTableId"] == private_rt.id] == []
    assert len(net.of_type(ROUTE)) == 1  # the public default route only


def _rules(net: ProgramRun, type_: str) -> dict[str, set[tuple[str, int, int, str]]]:
    """Per security group name: (protocol, from, to, peer group name or CIDR) of its rules."""
    groups = {g.id: g.name for g in net.of_type(SG)}
    out: dict[str, set[tuple[str, int, int, str]]] = {name: set() for name in groups.values()}
    for rule in net.of_type(type_):
        i = rule.inputs
        peer = groups[i["referencedSecurityGroupId"]] if "referencedSecurityGroupId" in i else None
        assert (peer is None) != ("cidrIpv4" not in i), f"{rule.name}: exactly one peer or CIDR"
        source = peer or i["cidrIpv4"]
        out[groups[i["securityGroupId"]]].add(
            (i["ipProtocol"], int(i["fromPort"]), int(i["toPort"]), source)
        )
    return out


def test_security_group_ingress_is_least_privilege() -> None:
    ingress = _rules(net_run(), INGRESS)
    assert ingress == {
        "alb-sg": {("tcp", 80, 80, "0.0.0.0/0"), ("tcp", 443, 443, "0.0.0.0/0")},
        "app-sg": {("tcp", 8080, 8080, "alb-sg")},
        "db-sg": {("tcp", 3307, 3307, "app-sg")}
        | {("tcp", 3307, 3307, c) for c in MIGRATION_CIDRS},
    }


def test_security_group_egress_is_explicit_and_narrow() -> None:
    egress = _rules(net_run(), EGRESS)
    assert egress == {
        "alb-sg": {("tcp", 8080, 8080, "app-sg")},
        "app-sg": {("tcp", 3307, 3307, "db-sg"), ("tcp", 443, 443, "0.0.0.0/0")},
        "db-sg": set(),
    }
    # Inline rules would hide rules from these checks and fight the separate rule resources.
    assert all(
        "ingress" not in g.inputs and "egress" not in g.inputs for g in net_run().of_type(SG)
    )


def test_database_takes_only_app_traffic_without_a_migration_allowlist() -> None:
    ingress = _rules(run_networking(net_args(migration_cidrs=[])), INGRESS)
    assert ingress["db-sg"] == {("tcp", 3307, 3307, "app-sg")}


def test_networking_exports_validate_and_name_the_declared_resources() -> None:
    net = net_run()
    outputs = NetworkingOutputs.model_validate(values(net))
    assert set(net.exports) == set(NetworkingOutputs.model_fields)
    assert not any(v.secret for v in net.exports.values())
    assert outputs.vpc_id == net.one(VPC).id and outputs.vpc_cidr == "10.20.0.0/16"
    names = {s.id: s.name for s in net.of_type(SUBNET)}
    assert [names[i] for i in outputs.public_subnet_ids] == [f"public-{REGION}{c}" for c in "abc"]
    assert [names[i] for i in outputs.private_subnet_ids] == [f"private-{REGION}{c}" for c in "abc"]
    groups = {g.name: g.id for g in net.of_type(SG)}
    assert outputs.alb_security_group_id == groups["alb-sg"]
    assert outputs.app_security_group_id == groups["app-sg"]
    assert outputs.db_security_group_id == groups["db-sg"]


@pytest.mark.parametrize(
    "overrides",
    [
        {"az_count": 1},
        {"az_count": 7},
        {"vpc_cidr": "10.0.0.0/8"},
        {"vpc_cidr": "10.0.0.1/16"},
        {"migration_cidrs": ["not-a-cidr"]},
        {"db_port": 0},
    ],
)
def test_networking_args_reject_bad_values(overrides: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        net_args(**overrides)


# --- database -------------------------------------------------------------------------------


def test_subnet_group_holds_exactly_the_private_subnets_and_the_instance_uses_it() -> None:
    db = db_run()
    group = db.one(SUBNET_GROUP)
    assert group.inputs["subnetIds"] == ["subnet-private-a", "subnet-private-b"]
    assert db.one(INSTANCE).inputs["dbSubnetGroupName"] == group.inputs["name"]


def test_instance_is_private_encrypted_mysql_in_the_db_security_group() -> None:
    db = db_run()
    instance = db.one(INSTANCE).inputs
    assert instance["engine"] == "mysql" and instance["engineVersion"] == "8.0"
    assert instance["publiclyAccessible"] is False
    assert instance["storageEncrypted"] is True
    assert instance["vpcSecurityGroupIds"] == ["sg-db"]
    assert instance["port"] == 3307 and instance["dbName"] == "app"
    assert instance["copyTagsToSnapshot"] is True
    params = db.one(PARAMETER_GROUP)
    assert instance["parameterGroupName"] == params.inputs["name"]
    assert params.inputs["family"] == "mysql8.0"
    settings = {p["name"]: p["value"] for p in params.inputs["parameters"]}
    assert settings == {"character_set_server": "utf8mb4", "collation_server": "utf8mb4_unicode_ci"}


def test_require_secure_transport_is_set_only_when_asked() -> None:
    params = run_database(db_args(require_secure_transport=True)).one(PARAMETER_GROUP)
    settings = {p["name"]: p["value"] for p in params.inputs["parameters"]}
    assert settings["require_secure_transport"] == "ON"


def test_password_is_generated_secret_and_never_plaintext_in_any_input() -> None:
    db = db_run()
    export = db.exports["password"]
    assert export.secret is True
    password = export.value
    assert isinstance(password, str) and len(password) >= 32
    generator = db.one(PASSWORD).inputs
    assert not set("/@\"' ") & set(generator["overrideSpecial"])

    for resource in db.resources.values():
        for text in plain_strings(dict(resource.inputs)):
            assert password not in text, f"password in plaintext in {resource.type} {resource.name}"
    # The scan sees the password where it must go, marked secret: so it would see it elsewhere.
    assert password in list(secret_strings(dict(db.one(INSTANCE).inputs)))
    assert list(secret_strings(dict(db.one(SECRET_VERSION).inputs))) == [password]


def test_secret_version_belongs_to_the_exported_secret() -> None:
    db = db_run()
    secret = db.one(SECRET)
    assert db.one(SECRET_VERSION).inputs["secretId"] == secret.id
    assert db.exports["password_secret_arn"].value == secret.outputs["arn"]


def test_dev_arguments_leave_prod_hardening_off() -> None:
    instance = db_run(prod=False).one(INSTANCE).inputs
    assert instance["multiAz"] is False
    assert instance["deletionProtection"] is False
    assert instance["skipFinalSnapshot"] is True and "finalSnapshotIdentifier" not in instance
    assert instance["backupRetentionPeriod"] == 1
    assert instance["applyImmediately"] is True


def test_prod_arguments_turn_prod_hardening_on() -> None:
    instance = db_run(prod=True).one(INSTANCE).inputs
    assert instance["multiAz"] is True
    assert instance["deletionProtection"] is True
    assert instance["skipFinalSnapshot"] is False
    assert instance["finalSnapshotIdentifier"] == f"{PROJECT}-prod-mysql-final"
    assert instance["backupRetentionPeriod"] == 14
    assert instance["applyImmediately"] is False


def test_hardening_follows_the_arguments_not_the_environment_name() -> None:
    instance = run_database(
        db_args(multi_az=True, deletion_protection=True, final_snapshot=True)
    ).one(INSTANCE)
    assert instance.inputs["multiAz"] is True and instance.inputs["deletionProtection"] is True
    assert instance.inputs["skipFinalSnapshot"] is False


def test_database_exports_validate_with_the_password_as_a_secret() -> None:
    db = db_run()
    assert set(db.exports) == set(DatabaseOutputs.model_fields)
    outputs = DatabaseOutputs.model_validate(values(db))
    instance = db.one(INSTANCE)
    assert outputs.host == instance.outputs["address"] and outputs.port == 3307
    assert (outputs.database, outputs.user) == ("app", "stackflow")
    assert outputs.instance_id == instance.inputs["identifier"] == f"{PROJECT}-dev-mysql"
    assert outputs.password.get_secret_value() == db.exports["password"].value
    assert [k for k, v in db.exports.items() if v.secret] == ["password"]


# --- app ------------------------------------------------------------------------------------


def _container(program_run: ProgramRun) -> dict[str, Any]:
    (container,) = json.loads(program_run.one(TASK_DEFINITION).inputs["containerDefinitions"])
    assert isinstance(container, dict)
    return container


def test_service_runs_in_private_subnets_with_the_app_security_group() -> None:
    service = app_run().one(SERVICE).inputs
    assert service["launchType"] == "FARGATE" and service["desiredCount"] == 2
    network = service["networkConfiguration"]
    assert network["securityGroups"] == ["sg-app"]
    assert network["subnets"] == ["subnet-private-a", "subnet-private-b"]
    assert network["assignPublicIp"] is False


def test_service_runs_in_public_subnets_with_a_public_ip_when_there_is_no_nat() -> None:
    network = app_run(tasks_in_public_subnets=True).one(SERVICE).inputs["networkConfiguration"]
    assert network["securityGroups"] == ["sg-app"]
    assert network["subnets"] == ["subnet-public-a", "subnet-public-b"]
    assert network["assignPublicIp"] is True


def test_task_definition_takes_the_password_from_secrets_manager() -> None:
    container = _container(app_run())
    assert container["secrets"] == [{"name": "DB_PASSWORD", "valueFrom": SECRET_ARN}]
    environment = {e["name"]: e["value"] for e in container["environment"]}
    assert environment == {
        "DB_HOST": "db.internal",
        "DB_PORT": "3307",
        "DB_NAME": "app",
        "DB_USER": "stackflow",
    }


def test_values_from_other_stacks_reach_the_container_environment_after_its_own() -> None:
    """`container_env` is how a stack added to the graph hands its outputs to the app: its values
    follow the program's own, sorted by name, and the password stays a secret."""
    extra = {"QUEUE_URL": "https://queue.internal/q", "AUDIT_LOG_GROUP": "/sf/dev/audit"}
    container = _container(run_app(app_args(container_env=extra)))
    assert [(e["name"], e["value"]) for e in container["environment"]] == [
        ("DB_HOST", "db.internal"),
        ("DB_PORT", "3307"),
        ("DB_NAME", "app"),
        ("DB_USER", "stackflow"),
        ("AUDIT_LOG_GROUP", "/sf/dev/audit"),
        ("QUEUE_URL", "https://queue.internal/q"),
    ]
    assert container["secrets"] == [{"name": "DB_PASSWORD", "valueFrom": SECRET_ARN}]


@pytest.mark.parametrize(
    "container_env",
    [{"DB_HOST": "elsewhere"}, {"DB_PASSWORD": "plain"}, {"1BAD": "x"}, {"A-B": "x"}, {"": "x"}],
)
def test_container_env_refuses_the_programs_own_variables_and_bad_names(
    container_env: dict[str, str],
) -> None:
    with pytest.raises(ValidationError):
        app_args(container_env=container_env)


def test_task_definition_is_fargate_with_logs_and_the_port() -> None:
    a = app_run()
    task = a.one(TASK_DEFINITION).inputs
    assert task["requiresCompatibilities"] == ["FARGATE"] and task["networkMode"] == "awsvpc"
    assert (task["cpu"], task["memory"]) == ("256", "512")
    roles = {r.name: r for r in a.of_type(ROLE)}
    assert task["executionRoleArn"] == roles["execution-role"].outputs["arn"]
    assert task["taskRoleArn"] == roles["task-role"].outputs["arn"]
    container = _container(a)
    assert container["image"] == "public.ecr.aws/nginx/nginx:stable"
    assert container["portMappings"] == [{"containerPort": 8080, "protocol": "tcp"}]
    logs = container["logConfiguration"]
    log_group = a.one("aws:cloudwatch/logGroup:LogGroup").inputs
    assert logs["logDriver"] == "awslogs"
    assert logs["options"]["awslogs-group"] == log_group["name"]
    assert logs["options"]["awslogs-region"] == REGION
    assert log_group["retentionInDays"] == 14


def test_execution_role_may_read_only_the_one_secret_and_the_task_role_nothing() -> None:
    a = app_run()
    roles = {r.name: r for r in a.of_type(ROLE)}
    execution, task = roles["execution-role"], roles["task-role"]
    (inline,) = a.of_type(ROLE_POLICY)
    assert inline.inputs["role"] == execution.id
    statements = json.loads(inline.inputs["policy"])["Statement"]
    assert statements == [
        {"Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": SECRET_ARN}
    ]
    (attachment,) = a.of_type(ROLE_ATTACHMENT)
    assert attachment.inputs["role"] == execution.id
    assert attachment.inputs["policyArn"].endswith("/AmazonECSTaskExecutionRolePolicy")
    for role in (execution, task):
        trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
        assert [s["Principal"] for s in trust] == [{"Service": "ecs-tasks.amazonaws.com"}]
    attached_roles = {r.inputs["role"] for r in a.of_type(ROLE_ATTACHMENT) + a.of_type(ROLE_POLICY)}
    assert task.id not in attached_roles


def test_load_balancer_forwards_port_80_to_the_ip_target_group_of_the_service() -> None:
    a = app_run()
    lb = a.one(LOAD_BALANCER).inputs
    assert lb["loadBalancerType"] == "application" and lb["internal"] is False
    assert lb["subnets"] == ["subnet-public-a", "subnet-public-b"]
    assert lb["securityGroups"] == ["sg-alb"]
    group = a.one(TARGET_GROUP)
    assert group.inputs["targetType"] == "ip" and group.inputs["port"] == 8080
    assert group.inputs["vpcId"] == "vpc-1"
    assert group.inputs["healthCheck"]["path"] == "/healthz"
    listener = a.one(LISTENER).inputs
    assert listener["port"] == 80 and listener["protocol"] == "HTTP"
    assert listener["loadBalancerArn"] == a.one(LOAD_BALANCER).id
    assert listener["defaultActions"] == [{"type": "forward", "targetGroupArn": group.id}]
    (mapping,) = a.one(SERVICE).inputs["loadBalancers"]
    assert mapping == {"targetGroupArn": group.id, "containerName": "app", "containerPort": 8080}


def test_app_exports_validate_and_the_url_is_the_load_balancer() -> None:
    a = app_run()
    assert set(a.exports) == set(AppOutputs.model_fields)
    outputs = AppOutputs.model_validate(values(a))
    dns = a.one(LOAD_BALANCER).outputs["dnsName"]
    assert outputs.load_balancer_dns == dns and outputs.url == f"http://{dns}"
    assert outputs.cluster_name == f"{PROJECT}-dev-cluster"
    assert outputs.service_name == a.one(SERVICE).inputs["name"]


# --- names and tags -------------------------------------------------------------------------


def test_names_fit_aws_limits_deterministically() -> None:
    long_project, long_environment = "p" * 31, "staging-eu-feature-x"
    a = app_args(project=long_project, environment=long_environment)
    run_a = run_app(a)
    names = [run_a.one(t).inputs["name"] for t in (LOAD_BALANCER, TARGET_GROUP)]
    assert all(len(n) <= 32 and not n.endswith("-") for n in names)
    assert names[0] != names[1]
    again = run_app(a)
    assert [again.one(t).inputs["name"] for t in (LOAD_BALANCER, TARGET_GROUP)] == names
    other = run_app(app_args(project=long_project, environment="staging-eu-feature-y"))
    assert other.one(LOAD_BALANCER).inputs["name"] != names[0]
    identifier = run_database(db_args(project=long_project, environment=long_environment)).one(
        INSTANCE
    )
    assert len(identifier.inputs["identifier"]) <= 63


def test_base_args_name_and_fit_name() -> None:
    assert BaseArgs(project="sf", environment="dev").name("alb") == "sf-dev-alb"
    assert fit_name("short", 32) == "short"
    fitted = fit_name("a" * 23 + "-" + "b" * 20, 32)
    assert len(fitted) == 32 and fitted.startswith("a" * 23)
    assert fit_name("x" * 40, 32) != fit_name("x" * 39 + "y", 32)


def _sdk_class(type_token: str) -> type[Any]:
    package, module_path, name = type_token.split(":")
    module: Any = {"aws": aws, "random": random}[package]
    submodule = module_path.split("/")[0]
    if submodule != "index":
        module = getattr(module, submodule)
    cls = getattr(module, name)
    assert isinstance(cls, type)
    return cls


def _taggable(type_token: str) -> bool:
    """Whether the resource type accepts tags, read from the SDK's constructor."""
    return "tags" in inspect.signature(_sdk_class(type_token)._internal_init).parameters


def test_taggable_is_read_correctly_from_the_sdk() -> None:
    assert _taggable(VPC) and _taggable(INSTANCE) and _taggable(INGRESS)
    assert not _taggable(ROUTE) and not _taggable(ROLE_POLICY) and not _taggable(PASSWORD)


@pytest.mark.parametrize(
    ("stack", "program_run", "must_include"),
    [
        ("networking", lambda: net_run(True), {VPC, SUBNET, NAT, EIP, SG, INGRESS, EGRESS}),
        ("database", lambda: db_run(True), {SUBNET_GROUP, PARAMETER_GROUP, INSTANCE, SECRET}),
        ("app", lambda: app_run(False), {ROLE, TASK_DEFINITION, SERVICE, LOAD_BALANCER, LISTENER}),
    ],
)
def test_every_taggable_resource_carries_the_four_tags(
    stack: str, program_run: Callable[[], ProgramRun], must_include: set[str]
) -> None:
    declared = program_run().resources.values()
    environment = "prod" if stack == "database" else "dev"
    expected = tags(PROJECT, environment, stack)
    taggable = [r for r in declared if _taggable(r.type)]
    assert {r.type for r in taggable} >= must_include
    untagged = [
        f"{r.type} {r.name}"
        for r in taggable
        if not expected.items() <= dict(r.inputs.get("tags") or {}).items()
    ]
    assert untagged == []


def test_tags_are_the_four_keys() -> None:
    assert tags("sf", "dev", "app") == {
        "project": "sf",
        "environment": "dev",
        "stack": "app",
        "managed-by": "stackflow",
    }


# --- the programs wired together as the graph wires them --------------------------------------


def test_outputs_flow_from_networking_to_database_and_app() -> None:
    net = NetworkingOutputs.model_validate(values(net_run()))
    db_program = run_database(
        db_args(
            private_subnet_ids=net.private_subnet_ids, db_security_group_id=net.db_security_group_id
        )
    )
    db = DatabaseOutputs.model_validate(values(db_program))
    assert db_program.one(SUBNET_GROUP).inputs["subnetIds"] == net.private_subnet_ids
    assert db_program.one(INSTANCE).inputs["vpcSecurityGroupIds"] == [net.db_security_group_id]

    app_program = run_app(
        app_args(
            vpc_id=net.vpc_id,
            public_subnet_ids=net.public_subnet_ids,
            private_subnet_ids=net.private_subnet_ids,
            alb_security_group_id=net.alb_security_group_id,
            app_security_group_id=net.app_security_group_id,
            db_host=db.host,
            db_port=db.port,
            db_name=db.database,
            db_user=db.user,
            db_password_secret_arn=db.password_secret_arn,
        )
    )
    service = app_program.one(SERVICE).inputs["networkConfiguration"]
    assert service["securityGroups"] == [net.app_security_group_id]
    assert service["subnets"] == net.private_subnet_ids
    container = _container(app_program)
    assert container["secrets"][0]["valueFrom"] == db.password_secret_arn
    password = db.password.get_secret_value()
    for resource in app_program.resources.values():
        assert not any(password in s for s in plain_strings(dict(resource.inputs)))


@pytest.mark.parametrize("module", ["common", "networking", "database", "app"])
def test_programs_import_only_pulumi_pydantic_and_the_standard_library(module: str) -> None:
    allowed = {"pulumi", "pulumi_aws", "pulumi_random", "pydantic", "programs", "__future__"}
    path = Path(__file__).resolve().parents[2] / "programs" / f"{module}.py"
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            roots.add(node.module.split(".")[0])
    assert roots - allowed - sys.stdlib_module_names == set()
