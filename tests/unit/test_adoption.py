"""Adopting what a create whose answer was lost made (`stackflow.engine.automation.adoption`):
the failed creates read from engine events as the CLI emits them, whose a resource is (its tags,
or for a type without tags a parent in the stack's state) judged against moto's AWS in this
process, and the adopt-and-run-again loop, gated or not. The whole path on the real engine and
the local cloud is tests/faults/test_lost_answers.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pulumi.automation.events import EngineEvent

from stackflow.engine.automation import adoption
from stackflow.engine.automation.adoption import CreateWatch, ExistingCreate, adopting, judge
from stackflow.engine.base import ChangeCounts, Listener, Operation, OperationResult, StackSpec
from stackflow.engine.envelope import SECRET_SIG
from stackflow.engine.pending import CloudClients
from stackflow.engine.pending.owners import tags_of
from stackflow.errors import PermanentStackError, PlanChanged

pytestmark = pytest.mark.unit

REGION = "eu-west-1"
ENV = "dev-1"
SPEC = StackSpec("stackflow", ENV, "database", program=dict)
OURS = {"project": "stackflow", "environment": ENV, "stack": "database", "managed-by": "stackflow"}
URN = f"urn:pulumi:{ENV}::stackflow-database::aws:rds/instance:Instance::mysql"
REFUSAL = (
    "creating aws:rds/instance:Instance (mysql): operation error RDS: CreateDBInstance, https "
    "response error StatusCode: 400, RequestID: abc, api error DBInstanceAlreadyExists: DB "
    "instance already exists"
)


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> Iterator[CloudClients]:
    from moto import mock_aws

    for key in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONFIG_FILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        yield CloudClients(REGION, where="the local cloud")


def aws_tags(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def instance(clients: CloudClients, tags: dict[str, str]) -> str:
    """An RDS instance as a lost create leaves it; its resource id."""
    made = clients.client("rds").create_db_instance(
        DBInstanceIdentifier=f"stackflow-{ENV}-mysql",
        Engine="mysql",
        DBInstanceClass="db.t4g.micro",
        AllocatedStorage=20,
        MasterUsername="app",
        MasterUserPassword="not-a-secret-1",
        Tags=aws_tags(tags),
    )["DBInstance"]
    return str(made["DbiResourceId"])


def existing(kind: str, name: str, **inputs: Any) -> ExistingCreate:
    urn = f"urn:pulumi:{ENV}::stackflow-database::{kind}::{name}"
    return ExistingCreate(urn, kind, inputs, "", "", "SomethingAlreadyExists")


def test_the_failed_creates_aws_refused_as_existing_come_from_the_engine_events() -> None:
    """The create's URN, type and inputs from its step event (a secret input, which events show
    as "[secret]", left out), AWS's code from the diagnostic for that URN; a create refused for
    another reason, and one that met no refusal, are not among them."""
    watch = CreateWatch()
    inputs = {
        "identifier": f"stackflow-{ENV}-mysql",
        "tags": OURS,
        "password": {SECRET_SIG: "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "[secret]"},
    }
    other = URN.replace("mysql", "other")
    for urn in (URN, other, URN.replace("mysql", "fine")):
        new = {"type": "aws:rds/instance:Instance", "urn": urn, "inputs": inputs}
        new |= {"parent": "urn:stack", "provider": "urn:provider::id"}
        step = {"op": "create", "urn": urn, "type": new["type"], "provider": "", "new": new}
        watch(EngineEvent.from_json({"resourcePreEvent": {"metadata": step}}))
    for urn, text in ((URN, REFUSAL), (other, REFUSAL.replace("AlreadyExists", "Quota"))):
        said = {"urn": urn, "message": text, "color": "never", "severity": "error"}
        watch(EngineEvent.from_json({"diagnosticEvent": said}))

    (found,) = watch.existing()
    assert (found.urn, found.type, found.code) == (
        URN,
        "aws:rds/instance:Instance",
        "DBInstanceAlreadyExists",
    )
    assert set(found.inputs) == {"identifier", "tags"}  # the secret is not there to keep
    assert (found.parent, found.provider) == ("urn:stack", "urn:provider::id")


def test_a_resource_is_adopted_only_when_its_tags_name_this_project_environment_and_stack(
    clients: CloudClients,
) -> None:
    made = instance(clients, OURS)
    create = existing(
        "aws:rds/instance:Instance", "mysql", identifier=f"stackflow-{ENV}-mysql", tags=OURS
    )
    assert judge(create, SPEC, clients, set(), set()) == (made, "")
    # held by a state already: never adopted twice
    held = {("aws:rds/instance:Instance", made)}
    assert judge(create, SPEC, clients, held, set())[1] == (
        f"what matches ({made}) is in a stack's state already"
    )
    # another project's, environment's or stack's, by any one of its tags
    rds = clients.client("rds")
    arn = rds.describe_db_instances()["DBInstances"][0]["DBInstanceArn"]
    for key, other in (("project", "shop"), ("environment", "dev-2"), ("stack", "app")):
        rds.add_tags_to_resource(ResourceName=arn, Tags=aws_tags({**OURS, key: other}))
        assert judge(create, SPEC, clients, set(), set()) == (
            "",
            f"{made} is tagged {key}={other!r}: not this project, environment and stack",
        )
    gone = existing("aws:rds/instance:Instance", "mysql", identifier="nothing-1", tags=OURS)
    assert "nothing matches its inputs" in judge(gone, SPEC, clients, set(), set())[1]


def test_a_type_without_tags_is_adopted_only_beside_a_parent_this_stacks_state_holds(
    clients: CloudClients,
) -> None:
    ec2 = clients.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.9.1.0/24")["Subnet"]["SubnetId"]
    table = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    association = ec2.associate_route_table(RouteTableId=table, SubnetId=subnet)
    kind = "aws:ec2/routeTableAssociation:RouteTableAssociation"
    create = existing(kind, "public-a", routeTableId=table, subnetId=subnet)

    own = {("aws:ec2/routeTable:RouteTable", table)}
    assert judge(create, SPEC, clients, own, own) == (association["AssociationId"], "")
    refused = judge(create, SPEC, clients, set(), set())
    assert refused == (
        "",
        f"{association['AssociationId']} has no tags, and none of its inputs names a resource "
        "this stack's state holds (its parent)",
    )


def test_each_tag_reader_reads_the_tags_aws_answers(clients: CloudClients) -> None:
    """One resource of each type a reader serves beyond RDS instances, tagged as a stack's
    program tags it; each reader gives those tags back from the id its type's lookup finds."""
    tags = {**OURS, "stack": "app"}
    name = "stackflow-dev-1-x"
    ec2 = clients.client("ec2")
    specs = [{"ResourceType": "vpc", "Tags": aws_tags(tags)}]
    vpc = ec2.create_vpc(CidrBlock="10.8.0.0/16", TagSpecifications=specs)["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.8.{i}.0/24", AvailabilityZone=REGION + z)[
            "Subnet"
        ]["SubnetId"]
        for i, z in ((1, "a"), (2, "b"))
    ]
    clients.client("rds").create_db_subnet_group(
        DBSubnetGroupName=name,
        DBSubnetGroupDescription="x",
        SubnetIds=subnets,
        Tags=aws_tags(tags),
    )
    clients.client("iam").create_role(
        RoleName=name, AssumeRolePolicyDocument="{}", Tags=aws_tags(tags)
    )
    secret = clients.client("secretsmanager").create_secret(Name=name, Tags=aws_tags(tags))
    clients.client("logs").create_log_group(logGroupName=name, tags=tags)
    balancer = clients.client("elbv2").create_load_balancer(
        Name="lb-x", Subnets=subnets, Tags=aws_tags(tags)
    )["LoadBalancers"][0]["LoadBalancerArn"]
    ecs_tags = [{"key": k, "value": v} for k, v in tags.items()]
    clients.client("ecs").create_cluster(clusterName=name, tags=ecs_tags)
    found = {
        "aws:ec2/vpc:Vpc": vpc,
        "aws:rds/subnetGroup:SubnetGroup": name,
        "aws:iam/role:Role": name,
        "aws:secretsmanager/secret:Secret": secret["ARN"],
        "aws:cloudwatch/logGroup:LogGroup": name,
        "aws:lb/loadBalancer:LoadBalancer": balancer,
        "aws:ecs/cluster:Cluster": name,
    }
    read = {kind: tags_of(clients, kind, ident, {}) for kind, ident in found.items()}
    assert read == dict.fromkeys(found, tags)
    assert tags_of(clients, "aws:ecs/service:Service", "x", {}) is None  # no reader: none


def result() -> OperationResult:
    return OperationResult("database", Operation.UP, ChangeCounts(update=1), {}, 1.0, "automation")


def test_adopting_runs_the_update_again_once_it_adopted_and_a_gated_one_asks_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ungated: the update runs again and its result says what was adopted. Gated (an approved
    plan did not show the adoption): PlanChanged, so the plan is made and asked for again. Not
    an existing create's refusal: raised as it is, nothing adopted."""
    seen: list[str] = []
    monkeypatch.setattr(
        adoption, "adopt", lambda *args, **kw: seen.append("adopt") or "adopted X as x-1"
    )

    def attempt_failing_once(watch: CreateWatch) -> OperationResult:
        seen.append("attempt")
        if seen.count("attempt") == 1:
            new = {"type": "aws:rds/instance:Instance", "urn": URN, "inputs": {}}
            step = {"op": "create", "urn": URN, "type": new["type"], "provider": "", "new": new}
            watch(EngineEvent.from_json({"resourcePreEvent": {"metadata": step}}))
            said = {"urn": URN, "message": REFUSAL, "color": "never", "severity": "error"}
            watch(EngineEvent.from_json({"diagnosticEvent": said}))
            raise PermanentStackError(SPEC.label, "AWS refused the request")
        return result()

    ran = adopting(None, SPEC, Listener(), attempt_failing_once, None, gated=False)  # type: ignore[arg-type]
    assert seen == ["attempt", "adopt", "attempt"] and ran.healed == "adopted X as x-1"

    seen.clear()
    with pytest.raises(PlanChanged, match="adopted X as x-1; the approved plan would have"):
        adopting(None, SPEC, Listener(), attempt_failing_once, None, gated=True)  # type: ignore[arg-type]
    assert seen == ["attempt", "adopt"]

    seen.clear()

    def refused(_watch: CreateWatch) -> OperationResult:
        seen.append("attempt")
        raise PermanentStackError(SPEC.label, "AWS refused the request (InvalidParameterValue)")

    with pytest.raises(PermanentStackError, match="InvalidParameterValue"):
        adopting(None, SPEC, Listener(), refused, None, gated=False)  # type: ignore[arg-type]
    assert seen == ["attempt"]
