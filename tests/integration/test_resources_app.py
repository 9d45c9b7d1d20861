"""The app stack's resource types (ECS, load balancing, IAM, log groups) against the local cloud
(moto), not AWS: moto's server in this process on loopback (and once the real cloud server).

Per type: create returns the id and the computed outputs; a read of the untouched resource
overlays to exactly the same state (a refresh shows no change); an in-place update; console
drift; delete, after which it reads as gone, and a second delete is fine. Then the whole of
programs/app.py through Pulumi's mock runtime, every resource created by these entries."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from pulumi.runtime import mocks as pulumi_mocks

from programs.app import EXECUTION_POLICY_ARN, AppArgs, app
from stackflow.localcloud.context import CloudContext
from stackflow.localcloud.registry import Props, Registry, ResourceType, auto_name
from stackflow.localcloud.resources import register_module
from tests.fixtures.localcloud import LocalCloud, local_cloud  # noqa: F401 (not in conftest yet)
from tests.unit.pulumi_mocks import AwsMocks, run_program

pytestmark = pytest.mark.integration

REGION = "eu-west-1"
TAGS = {"project": "sf", "environment": "dev", "stack": "app", "managed-by": "stackflow"}


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cloud(bare_moto: CloudContext) -> CloudContext:
    return bare_moto


@pytest.fixture(scope="module")
def aws() -> Registry:
    registry = Registry("aws")
    ecs = ("ecs", "ecs_tasks", "ecs_services")
    for module in (*ecs, "elb", "elb_target_groups", "elb_listeners", "iam", "logs"):
        register_module(registry, module)
    return registry


@pytest.fixture(scope="module")
def network(cloud: CloudContext) -> dict[str, Any]:
    """What the networking stack would have made: a VPC, two public and two private subnets,
    the load balancer's and the app's security groups, and the database password's secret."""
    ec2 = cloud.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.30.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.30.{i}.0/24", AvailabilityZone=f"{REGION}{az}")[
            "Subnet"
        ]["SubnetId"]
        for i, az in enumerate("abab")
    ]
    alb_sg = ec2.create_security_group(GroupName="alb", Description="alb", VpcId=vpc)["GroupId"]
    app_sg = ec2.create_security_group(GroupName="app", Description="app", VpcId=vpc)["GroupId"]
    secret = cloud.client("secretsmanager").create_secret(
        Name=f"sf/dev/mysql-password-{uuid.uuid4().hex[:6]}", SecretString="not-a-real-password"
    )
    return {
        "vpc": vpc,
        "public": subnets[:2],
        "private": subnets[2:],
        "alb_sg": alb_sg,
        "app_sg": app_sg,
        "secret_arn": secret["ARN"],
    }


# --- helpers --------------------------------------------------------------------------------


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(rtype: ResourceType, cloud: CloudContext, inputs: Props) -> tuple[str, Props]:
    """Create as the servicer does; return the id and the outputs ({**inputs, **computed})."""
    resource_id, computed = rtype.create(cloud, inputs)
    assert set(computed) <= set(rtype.computed) | {"cluster"}, computed
    return resource_id, {**inputs, **computed}


def refreshed(rtype: ResourceType, cloud: CloudContext, resource_id: str, state: Props) -> Props:
    """The state after a refresh: what read observed, overlaid on the old state."""
    observed = rtype.read(cloud, resource_id, state)
    assert observed is not None, f"{rtype.token} {resource_id} reads as gone"
    return {**state, **observed}


def assert_clean(rtype: ResourceType, cloud: CloudContext, resource_id: str, state: Props) -> None:
    """A refresh of the untouched resource changes nothing: same keys, values and types."""
    after = refreshed(rtype, cloud, resource_id, state)
    assert json.dumps(after, sort_keys=True) == json.dumps(state, sort_keys=True)


def update(
    rtype: ResourceType, cloud: CloudContext, resource_id: str, state: Props, inputs: Props
) -> Props:
    """Update in place as the servicer does; return the new outputs."""
    assert rtype.update is not None
    changed = frozenset(k for k in set(state) | set(inputs) if state.get(k) != inputs.get(k))
    changed -= set(rtype.computed)
    assert not changed & rtype.force_new, f"{sorted(changed & rtype.force_new)} would replace"
    kept = {k: v for k, v in state.items() if k in rtype.computed}
    return {**kept, **inputs, **rtype.update(cloud, resource_id, state, inputs, changed)}


def assert_deleted(
    rtype: ResourceType, cloud: CloudContext, resource_id: str, state: Props
) -> None:
    """Delete; then the resource reads as gone, and deleting it again is fine."""
    rtype.delete(cloud, resource_id, state)
    assert rtype.read(cloud, resource_id, state) is None
    rtype.delete(cloud, resource_id, state)


def assume_role_policy(indent: int | None = None) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "ecs-tasks.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                }
            ],
        },
        indent=indent,
    )


def container_definitions(image: str = "public.ecr.aws/nginx/nginx:stable") -> str:
    return json.dumps(
        [
            {
                "name": "app",
                "image": image,
                "essential": True,
                "portMappings": [{"containerPort": 8080, "protocol": "tcp"}],
                "environment": [
                    {"name": "DB_HOST", "value": "db.internal"},
                    {"name": "DB_PORT", "value": "3306"},
                ],
                "logConfiguration": {
                    "logDriver": "awslogs",
                    "options": {"awslogs-group": "/ecs/x", "awslogs-region": REGION},
                },
            }
        ]
    )


# --- per type -------------------------------------------------------------------------------


def test_caller_identity(cloud: CloudContext, aws: Registry) -> None:
    """getCallerIdentity answers in pulumi-aws's result shape: accountId, arn, userId, id."""
    found = aws.functions["aws:index/getCallerIdentity:getCallerIdentity"](cloud, {})
    assert found["accountId"] == cloud.account_id == found["id"]
    assert found["arn"].startswith("arn:aws:")
    assert found["userId"]


def test_cluster(cloud: CloudContext, aws: Registry) -> None:
    """An ECS cluster: id = ARN; tags update in place; a console tag is drift."""
    rtype = aws.resource("aws:ecs/cluster:Cluster")
    name = unique("cluster")
    cluster_id, state = create(rtype, cloud, {"name": name, "tags": dict(TAGS)})
    assert cluster_id == state["arn"] and cluster_id.endswith(f":cluster/{name}")
    assert state["tagsAll"] == TAGS
    assert_clean(rtype, cloud, cluster_id, state)

    state = update(rtype, cloud, cluster_id, state, {"name": name, "tags": {"stack": "app2"}})
    assert_clean(rtype, cloud, cluster_id, state)
    assert refreshed(rtype, cloud, cluster_id, state)["tags"] == {"stack": "app2"}

    cloud.client("ecs").tag_resource(resourceArn=cluster_id, tags=[{"key": "k", "value": "v"}])
    drifted = refreshed(rtype, cloud, cluster_id, state)
    assert drifted["tags"] == {"stack": "app2", "k": "v"}
    # The next update makes the tags the program's again.
    state = update(rtype, cloud, cluster_id, drifted, {"name": name, "tags": {"stack": "app2"}})
    assert refreshed(rtype, cloud, cluster_id, state)["tags"] == {"stack": "app2"}
    assert_deleted(rtype, cloud, cluster_id, state)


def test_log_group(cloud: CloudContext, aws: Registry) -> None:
    """A log group: id = name, arn without ":*"; retention updates in place."""
    rtype = aws.resource("aws:cloudwatch/logGroup:LogGroup")
    name = f"/ecs/{unique('app')}"
    inputs = {"name": name, "retentionInDays": 14.0, "tags": dict(TAGS)}
    group_id, state = create(rtype, cloud, inputs)
    assert group_id == name
    assert state["arn"] == f"arn:aws:logs:{REGION}:{cloud.account_id}:log-group:{name}"
    assert_clean(rtype, cloud, group_id, state)

    state = update(rtype, cloud, group_id, state, {**inputs, "retentionInDays": 30})
    assert_clean(rtype, cloud, group_id, state)
    cloud.client("logs").put_retention_policy(logGroupName=name, retentionInDays=7)
    assert refreshed(rtype, cloud, group_id, state)["retentionInDays"] == 7
    cloud.client("logs").delete_retention_policy(logGroupName=name)
    assert refreshed(rtype, cloud, group_id, state)["retentionInDays"] == 0  # never expire
    assert_deleted(rtype, cloud, group_id, state)


def test_role(cloud: CloudContext, aws: Registry) -> None:
    """A role: id = name; the state's policy text survives a read; description, policy and
    tags update in place; a policy changed in the console reads back as the cloud's."""
    rtype = aws.resource("aws:iam/role:Role")
    assert rtype.auto_name == "name"
    name = auto_name("execution-role", uuid.uuid4().bytes, max_length=rtype.auto_name_max)
    inputs = {
        "name": name,
        "description": "pulls images",
        "assumeRolePolicy": assume_role_policy(indent=2),  # AWS reformats; the text survives
        "tags": dict(TAGS),
    }
    role_id, state = create(rtype, cloud, inputs)
    assert role_id == name
    assert state["arn"] == f"arn:aws:iam::{cloud.account_id}:role/{name}"
    assert state["uniqueId"] and state["createDate"].endswith("Z")
    assert_clean(rtype, cloud, role_id, state)

    changed = {**inputs, "description": "changed", "assumeRolePolicy": assume_role_policy()}
    state = update(rtype, cloud, role_id, state, {**changed, "tags": {"stack": "app"}})
    assert_clean(rtype, cloud, role_id, state)
    assert cloud.client("iam").get_role(RoleName=name)["Role"]["Description"] == "changed"

    console = json.loads(assume_role_policy())
    console["Statement"][0]["Principal"]["Service"] = "ec2.amazonaws.com"
    cloud.client("iam").update_assume_role_policy(RoleName=name, PolicyDocument=json.dumps(console))
    drifted = refreshed(rtype, cloud, role_id, state)["assumeRolePolicy"]
    assert json.loads(drifted) == console
    assert_deleted(rtype, cloud, role_id, state)


def test_role_policy_attachment_and_role_policy(cloud: CloudContext, aws: Registry) -> None:
    """The ECS execution policy attachment (id "<role>/<policy ARN>") and an inline policy
    (id "<role>:<name>", updated in place)."""
    role_type = aws.resource("aws:iam/role:Role")
    role, role_state = create(
        role_type, cloud, {"name": unique("role"), "assumeRolePolicy": assume_role_policy()}
    )

    attachment = aws.resource("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
    inputs = {"role": role, "policyArn": EXECUTION_POLICY_ARN}
    attachment_id, attachment_state = create(attachment, cloud, inputs)
    assert attachment_id == f"{role}/{EXECUTION_POLICY_ARN}"
    assert attachment.update is None
    assert_clean(attachment, cloud, attachment_id, attachment_state)

    policy_type = aws.resource("aws:iam/rolePolicy:RolePolicy")
    statement = {"Effect": "Allow", "Action": "s3:*", "Resource": "*"}
    document: dict[str, Any] = {"Version": "2012-10-17", "Statement": [statement]}
    inputs = {"role": role, "name": "db-secret", "policy": json.dumps(document, indent=1)}
    policy_id, policy_state = create(policy_type, cloud, inputs)
    assert policy_id == f"{role}:db-secret"
    assert_clean(policy_type, cloud, policy_id, policy_state)
    document["Statement"][0]["Action"] = "secretsmanager:GetSecretValue"
    policy_state = update(
        policy_type, cloud, policy_id, policy_state, {**inputs, "policy": json.dumps(document)}
    )
    assert_clean(policy_type, cloud, policy_id, policy_state)

    assert_deleted(attachment, cloud, attachment_id, attachment_state)
    assert_deleted(policy_type, cloud, policy_id, policy_state)
    assert_deleted(role_type, cloud, role, role_state)
    # With the role gone, both read as gone too.
    assert attachment.read(cloud, attachment_id, attachment_state) is None
    assert policy_type.read(cloud, policy_id, policy_state) is None


def test_task_definition(cloud: CloudContext, aws: Registry) -> None:
    """A task definition: id = family; the container definitions' text survives a read; only
    tags change in place; a deregistered revision reads as gone."""
    rtype = aws.resource("aws:ecs/taskDefinition:TaskDefinition")
    family = unique("app")
    inputs = {
        "family": family,
        "requiresCompatibilities": ["FARGATE"],
        "networkMode": "awsvpc",
        "cpu": "256",
        "memory": "512",
        "containerDefinitions": container_definitions(),
        "tags": dict(TAGS),
    }
    td_id, state = create(rtype, cloud, inputs)
    assert td_id == family
    assert state["revision"] == 1
    assert state["arn"] == f"{state['arnWithoutRevision']}:1"
    assert state["arnWithoutRevision"].endswith(f":task-definition/{family}")
    assert_clean(rtype, cloud, td_id, state)
    assert {"containerDefinitions", "cpu", "family"} <= rtype.force_new
    assert "tags" not in rtype.force_new

    state = update(rtype, cloud, td_id, state, {**inputs, "tags": {"stack": "app"}})
    assert_clean(rtype, cloud, td_id, state)

    # A state whose definitions differ from the cloud's reads back as the cloud's.
    other = {**state, "containerDefinitions": container_definitions(image="busybox")}
    observed = json.loads(refreshed(rtype, cloud, td_id, other)["containerDefinitions"])
    assert observed[0]["image"] == "public.ecr.aws/nginx/nginx:stable"
    assert_deleted(rtype, cloud, td_id, state)


def test_load_balancer(cloud: CloudContext, aws: Registry, network: dict[str, Any]) -> None:
    """A load balancer: id = ARN, computed arnSuffix/dnsName/zoneId/vpcId; security groups,
    attributes and tags update in place; a console tag is drift."""
    rtype = aws.resource("aws:lb/loadBalancer:LoadBalancer")
    name = unique("alb")
    inputs = {
        "name": name,
        "loadBalancerType": "application",
        "internal": False,
        "subnets": list(network["public"]),
        "securityGroups": [network["alb_sg"]],
        "dropInvalidHeaderFields": True,
        "tags": dict(TAGS),
    }
    lb_id, state = create(rtype, cloud, inputs)
    found = cloud.client("elbv2").describe_load_balancers(LoadBalancerArns=[lb_id])
    balancer = found["LoadBalancers"][0]
    assert lb_id == state["arn"] == balancer["LoadBalancerArn"]
    assert state["arnSuffix"] == lb_id.split(":loadbalancer/")[1]
    assert state["arnSuffix"].startswith(f"app/{name}/")
    assert state["dnsName"] == balancer["DNSName"]  # bare moto: no data plane to ask
    assert state["vpcId"] == network["vpc"] and state["zoneId"]
    assert_clean(rtype, cloud, lb_id, state)

    changed = {
        **inputs,
        "securityGroups": [network["alb_sg"], network["app_sg"]],
        "dropInvalidHeaderFields": False,
        "tags": {"stack": "app"},
    }
    state = update(rtype, cloud, lb_id, state, changed)
    assert_clean(rtype, cloud, lb_id, state)
    attributes = cloud.client("elbv2").describe_load_balancer_attributes(LoadBalancerArn=lb_id)
    assert {"Key": "routing.http.drop_invalid_header_fields.enabled", "Value": "false"} in (
        attributes["Attributes"]
    )

    cloud.client("elbv2").add_tags(ResourceArns=[lb_id], Tags=[{"Key": "k", "Value": "v"}])
    drifted = refreshed(rtype, cloud, lb_id, state)
    assert drifted["tags"] == {"stack": "app", "k": "v"}
    # The next update makes the tags the program's again.
    state = update(rtype, cloud, lb_id, drifted, changed)
    assert refreshed(rtype, cloud, lb_id, state)["tags"] == {"stack": "app"}
    assert_deleted(rtype, cloud, lb_id, state)


def test_load_balancer_dns_name_is_the_data_planes_host(
    cloud: CloudContext, aws: Registry, network: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a cloud server around moto, dnsName is the data plane's loopback host for the
    load balancer, in create and read alike."""
    rtype = aws.resource("aws:lb/loadBalancer:LoadBalancer")
    name = unique("alb")
    served = {"databases": {}, "load_balancers": {name: {"host": "127.0.0.9", "ports": [80]}}}
    monkeypatch.setattr(cloud, "dataplane", lambda: served)
    inputs = {"name": name, "subnets": list(network["public"]), "internal": False}
    lb_id, state = create(rtype, cloud, inputs)
    assert state["dnsName"] == "127.0.0.9"
    assert_clean(rtype, cloud, lb_id, state)
    assert_deleted(rtype, cloud, lb_id, state)


def test_load_balancer_through_the_cloud_server(
    local_cloud: LocalCloud,  # noqa: F811
    aws: Registry,
) -> None:
    """Through the real cloud server, dnsName is the loopback host its data plane allocated on
    CreateLoadBalancer; a refresh keeps it."""
    cloud = local_cloud.context
    ec2 = cloud.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.40.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.40.{i}.0/24", AvailabilityZone=f"{REGION}{az}")[
            "Subnet"
        ]["SubnetId"]
        for i, az in enumerate("ab")
    ]
    rtype = aws.resource("aws:lb/loadBalancer:LoadBalancer")
    name = unique("alb")
    lb_id, state = create(rtype, cloud, {"name": name, "subnets": subnets, "internal": False})
    host = cloud.dataplane()["load_balancers"][name]["host"]
    assert state["dnsName"] == host and host.startswith("127.") and host != "127.0.0.1"
    assert_clean(rtype, cloud, lb_id, state)
    assert_deleted(rtype, cloud, lb_id, state)


def test_target_group(cloud: CloudContext, aws: Registry, network: dict[str, Any]) -> None:
    """A target group: id = ARN; the healthCheck block reads back as given (floats kept);
    health check and tags update in place; a console edit of the path is drift."""
    rtype = aws.resource("aws:lb/targetGroup:TargetGroup")
    health_check = {
        "enabled": True,
        "path": "/healthz",
        "protocol": "HTTP",
        "port": "traffic-port",
        "matcher": "200-399",
        "interval": 15.0,
        "healthyThreshold": 2.0,
        "unhealthyThreshold": 3.0,
    }
    inputs = {
        "name": unique("app-8080"),
        "vpcId": network["vpc"],
        "targetType": "ip",
        "protocol": "HTTP",
        "port": 8080.0,
        "healthCheck": health_check,
        "tags": dict(TAGS),
    }
    tg_id, state = create(rtype, cloud, inputs)
    assert tg_id == state["arn"] and state["arnSuffix"].startswith("targetgroup/")
    group = cloud.client("elbv2").describe_target_groups(TargetGroupArns=[tg_id])
    assert group["TargetGroups"][0]["HealthCheckIntervalSeconds"] == 15
    assert_clean(rtype, cloud, tg_id, state)
    assert {"port", "protocol", "vpcId", "name"} <= rtype.force_new

    changed = {**inputs, "healthCheck": {**health_check, "path": "/ready"}, "tags": {}}
    state = update(rtype, cloud, tg_id, state, changed)
    assert_clean(rtype, cloud, tg_id, state)
    cloud.client("elbv2").modify_target_group(TargetGroupArn=tg_id, HealthCheckPath="/console")
    assert refreshed(rtype, cloud, tg_id, state)["healthCheck"]["path"] == "/console"
    assert_deleted(rtype, cloud, tg_id, state)


def test_listener(cloud: CloudContext, aws: Registry, network: dict[str, Any]) -> None:
    """A listener: id = ARN; port and default actions update in place."""
    lb_type = aws.resource("aws:lb/loadBalancer:LoadBalancer")
    tg_type = aws.resource("aws:lb/targetGroup:TargetGroup")
    rtype = aws.resource("aws:lb/listener:Listener")
    lb_id, lb_state = create(
        lb_type, cloud, {"name": unique("alb"), "subnets": network["public"], "internal": False}
    )
    tg_inputs = {"name": unique("tg"), "vpcId": network["vpc"], "targetType": "ip"}
    tg_id, tg_state = create(tg_type, cloud, {**tg_inputs, "protocol": "HTTP", "port": 8080})
    inputs = {
        "loadBalancerArn": lb_id,
        "port": 80.0,
        "protocol": "HTTP",
        "defaultActions": [{"type": "forward", "targetGroupArn": tg_id}],
        "tags": dict(TAGS),
    }
    listener_id, state = create(rtype, cloud, inputs)
    assert listener_id == state["arn"] and ":listener/app/" in listener_id
    assert_clean(rtype, cloud, listener_id, state)

    fixed = {"contentType": "text/plain", "messageBody": "down", "statusCode": "503"}
    actions = [{"type": "fixed-response", "fixedResponse": fixed}]
    changed = {**inputs, "port": 8081.0, "defaultActions": actions}
    state = update(rtype, cloud, listener_id, state, changed)
    assert_clean(rtype, cloud, listener_id, state)
    found = cloud.client("elbv2").describe_listeners(ListenerArns=[listener_id])["Listeners"]
    assert found[0]["Port"] == 8081

    assert_deleted(rtype, cloud, listener_id, state)
    assert_deleted(tg_type, cloud, tg_id, tg_state)
    assert_deleted(lb_type, cloud, lb_id, lb_state)


def test_service(cloud: CloudContext, aws: Registry, network: dict[str, Any]) -> None:
    """A service: id = ARN; desiredCount and taskDefinition update in place; a console scale
    is drift; delete scales to zero first; a missing cluster reads as gone."""
    cluster_type = aws.resource("aws:ecs/cluster:Cluster")
    td_type = aws.resource("aws:ecs/taskDefinition:TaskDefinition")
    rtype = aws.resource("aws:ecs/service:Service")
    cluster_id, cluster_state = create(cluster_type, cloud, {"name": unique("cluster")})
    td_inputs = {
        "family": unique("app"),
        "requiresCompatibilities": ["FARGATE"],
        "networkMode": "awsvpc",
        "cpu": "256",
        "memory": "512",
        "containerDefinitions": container_definitions(),
    }
    td_id, td_state = create(td_type, cloud, td_inputs)
    name = unique("app")
    inputs = {
        "name": name,
        "cluster": cluster_id,
        "taskDefinition": td_state["arn"],
        "desiredCount": 2.0,
        "launchType": "FARGATE",
        "networkConfiguration": {
            "subnets": list(network["private"]),
            "securityGroups": [network["app_sg"]],
            "assignPublicIp": False,
        },
        "healthCheckGracePeriodSeconds": 60.0,
        "deploymentCircuitBreaker": {"enable": True, "rollback": True},
        "propagateTags": "SERVICE",
        "tags": dict(TAGS),
    }
    service_id, state = create(rtype, cloud, inputs)
    assert service_id == state["arn"] and service_id.endswith(f"/{name}")
    assert_clean(rtype, cloud, service_id, state)

    td2_id, td2_state = create(td_type, cloud, {**td_inputs, "cpu": "512", "memory": "1024"})
    assert td2_id == td_id and td2_state["revision"] == 2
    changed = {**inputs, "desiredCount": 1, "taskDefinition": td2_state["arn"], "tags": {}}
    state = update(rtype, cloud, service_id, state, changed)
    assert_clean(rtype, cloud, service_id, state)
    found = cloud.client("ecs").describe_services(cluster=cluster_id, services=[service_id])
    assert found["services"][0]["taskDefinition"] == td2_state["arn"]

    cloud.client("ecs").update_service(cluster=cluster_id, service=service_id, desiredCount=5)
    assert refreshed(rtype, cloud, service_id, state)["desiredCount"] == 5
    assert_deleted(rtype, cloud, service_id, state)
    assert_deleted(td_type, cloud, td_id, td_state)
    assert_deleted(td_type, cloud, td2_id, td2_state)
    assert_deleted(cluster_type, cloud, cluster_id, cluster_state)
    assert rtype.read(cloud, service_id, state) is None  # its cluster is gone too


def test_unserved_input_is_refused(cloud: CloudContext, aws: Registry) -> None:
    """An input the entry would silently ignore is refused, naming it."""
    rtype = aws.resource("aws:ecs/cluster:Cluster")
    with pytest.raises(NotImplementedError, match="serviceConnectDefaults"):
        rtype.create(cloud, {"name": unique("c"), "serviceConnectDefaults": {"namespace": "x"}})


# --- the whole app program ------------------------------------------------------------------


class LocalCloudMocks(AwsMocks):
    """Pulumi's mock runtime, with every resource and function served by the registry entries
    against the local cloud (the servicer's part, Check's auto-naming included, done here)."""

    def __init__(self, cloud: CloudContext, registry: Registry, project: str) -> None:
        super().__init__(project, "dev", REGION)
        self.cloud, self.registry = cloud, registry
        self.seed = uuid.uuid4().bytes
        self.created: list[tuple[ResourceType, str, str, Props]] = []

    def new_resource(
        self, args: pulumi_mocks.MockResourceArgs
    ) -> tuple[str | None, dict[str, Any]]:
        rtype = self.registry.resource(args.typ)
        inputs = dict(args.inputs)
        if rtype.auto_name and not inputs.get(rtype.auto_name):
            inputs[rtype.auto_name] = auto_name(
                args.name, self.seed, max_length=rtype.auto_name_max
            )
        resource_id, state = create(rtype, self.cloud, inputs)
        with self._lock:
            self.registered.append((args.typ, args.name, inputs))
            self.created.append((rtype, args.name, resource_id, state))
        return resource_id, state

    def call(self, args: pulumi_mocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        with self._lock:
            self.calls.append((args.token, dict(args.args)))
        return self.registry.functions[args.token](self.cloud, dict(args.args)), []


def test_app_program_end_to_end(
    cloud: CloudContext, aws: Registry, network: dict[str, Any]
) -> None:
    """programs/app.py, every resource created by these entries in the local cloud: the exports
    resolve, a refresh changes nothing, the service scales in place, and everything deletes."""
    project = f"sf{uuid.uuid4().hex[:4]}"
    args = AppArgs(
        project=project,
        environment="dev",
        region=REGION,
        vpc_id=network["vpc"],
        public_subnet_ids=network["public"],
        private_subnet_ids=network["private"],
        alb_security_group_id=network["alb_sg"],
        app_security_group_id=network["app_sg"],
        tasks_in_public_subnets=False,
        db_host="127.0.0.2",
        db_port=3306,
        db_name="app",
        db_user="stackflow",
        db_password_secret_arn=network["secret_arn"],
        image="public.ecr.aws/nginx/nginx:stable",
        cpu=256,
        memory_mb=512,
        desired_count=2,
        port=8080,
        health_check_path="/healthz",
        log_retention_days=14,
    )
    mocks = LocalCloudMocks(cloud, aws, f"stackflow-app-{project}")
    result = run_program(lambda: app(args), mocks, project=mocks.project, stack="dev")
    exports = {k: v.value for k, v in result.exports.items()}
    created = {
        (rtype.token, name): (rtype, rid, state) for rtype, name, rid, state in mocks.created
    }
    assert len(created) == 11

    _, _, lb_state = created[("aws:lb/loadBalancer:LoadBalancer", "alb")]
    assert exports["url"] == f"http://{lb_state['dnsName']}"
    assert exports["load_balancer_dns"] == lb_state["dnsName"]
    assert exports["cluster_name"] == f"{project}-dev-cluster"
    assert exports["service_name"] == f"{project}-dev-app"

    for rtype, resource_id, state in created.values():
        assert_clean(rtype, cloud, resource_id, state)

    # What the data plane's stand-in follows: service -> target group -> listener -> LB.
    _, service_id, service_state = created[("aws:ecs/service:Service", "app")]
    _, tg_id, _ = created[("aws:lb/targetGroup:TargetGroup", "app")]
    ecs_client = cloud.client("ecs")
    service = ecs_client.describe_services(cluster=service_state["cluster"], services=[service_id])[
        "services"
    ][0]
    assert service["loadBalancers"][0]["targetGroupArn"] == tg_id
    definition = ecs_client.describe_task_definition(taskDefinition=service["taskDefinition"])
    container = definition["taskDefinition"]["containerDefinitions"][0]
    assert {"name": "DB_PASSWORD", "valueFrom": network["secret_arn"]} in container["secrets"]
    assert mocks.calls == [("aws:index/getCallerIdentity:getCallerIdentity", {})]

    service_type = aws.resource("aws:ecs/service:Service")
    inputs = next(i for t, n, i in mocks.registered if t == service_type.token and n == "app")
    scaled = update(service_type, cloud, service_id, service_state, {**inputs, "desiredCount": 0})
    assert_clean(service_type, cloud, service_id, scaled)
    created[(service_type.token, "app")] = (service_type, service_id, scaled)

    for rtype, resource_id, state in reversed(list(created.values())):
        assert_deleted(rtype, cloud, resource_id, state)
