"""The local cloud's server (moto on loopback, not AWS): persistence across restarts, sealed
secrets, a journal that reads do not grow, the knobs, and start/stop/status from other processes."""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pymysql
import pytest
from botocore.exceptions import ClientError

from cli.commands.cloud import add_arguments
from cli.commands.cloud import run as cli_run
from stackflow import PROJECT_ROOT
from stackflow.localcloud.context import CloudContext
from stackflow.localcloud.errors import CloudServerError
from stackflow.localcloud.knobs import KnobsError, clear_knobs, get_knobs, set_knobs, take
from stackflow.localcloud.paths import cloud_root, journal_key, journal_path, passphrase
from stackflow.localcloud.server import CloudServer, cloud_status, ensure_cloud, framed, stop_cloud
from stackflow.localcloud.server.requests import parse_request
from stackflow.localcloud.server.sealing import seal, unseal
from stackflow.processes import free_port
from tests.fixtures.localcloud import LocalCloud

pytestmark = pytest.mark.integration
REGION = "eu-west-1"


def _quiet(_text: str) -> None:
    return None


def _journal(root: Path) -> list[dict[str, Any]]:
    return framed.read(journal_path(root))


@pytest.fixture
def private_cloud(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A state folder and port for a test that starts and stops its own local cloud (moto only,
    no data plane); whatever it left running is stopped at the end."""
    state_dir = tmp_path / "state"
    try:
        yield state_dir, free_port()
    finally:
        stop_cloud(cloud_root(state_dir))


def _tags(items: list[dict[str, str]] | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in items or []}


def _snapshot(ctx: CloudContext, vpc_id: str) -> dict[str, Any]:
    """What a refresh would read back about the test's resources."""
    ec2, rds, sm = ctx.client("ec2"), ctx.client("rds"), ctx.client("secretsmanager")
    vpc = ec2.describe_vpcs(VpcIds=[vpc_id])["Vpcs"][0]
    subnets = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])["Subnets"]
    groups = ec2.describe_security_groups(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])
    db = rds.describe_db_instances(DBInstanceIdentifier="restart-db")["DBInstances"][0]
    secret = sm.describe_secret(SecretId="restart/secret")
    return {
        "vpc": (vpc["VpcId"], _tags(vpc.get("Tags")), vpc["CidrBlock"]),
        "subnets": sorted(
            (s["SubnetId"], s["AvailabilityZone"], s["CidrBlock"], str(_tags(s.get("Tags"))))
            for s in subnets
        ),
        "groups": sorted(
            (g["GroupId"], g["GroupName"], str(_tags(g.get("Tags"))))
            for g in groups["SecurityGroups"]
        ),
        "db": (
            db["DBInstanceArn"],
            db["DbiResourceId"],
            db["InstanceCreateTime"],
            db["Endpoint"]["Address"],
            _tags(db.get("TagList")),
        ),
        "secret": (secret["ARN"], secret["CreatedDate"], _tags(secret.get("Tags"))),
    }


def test_restart_keeps_ids_and_tags(private_cloud: tuple[Path, int]) -> None:
    """Stop and start the local cloud: every id, tag and timestamp is what it was, although
    reads were interleaved with the creates before the restart (and are not replayed)."""
    state_dir, port = private_cloud
    server = ensure_cloud(cloud_root(state_dir), port, region=REGION, dataplane=False, say=_quiet)
    ctx = CloudContext(server.url, REGION)
    ec2, rds, sm = ctx.client("ec2"), ctx.client("rds"), ctx.client("secretsmanager")
    env_tag = [{"Key": "environment", "Value": "dev"}]
    vpc_id = ec2.create_vpc(
        CidrBlock="10.42.0.0/16",
        TagSpecifications=[
            {"ResourceType": "vpc", "Tags": [*env_tag, {"Key": "Name", "Value": "v"}]}
        ],
    )["Vpc"]["VpcId"]
    ec2.describe_vpcs()
    subnet_id = ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.42.1.0/24")["Subnet"]["SubnetId"]
    ec2.create_tags(Resources=[subnet_id], Tags=env_tag)
    ec2.describe_subnets()
    ec2.create_security_group(
        GroupName="restart-sg",
        Description="restart test",
        VpcId=vpc_id,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": env_tag}],
    )
    ctx.client("sts").get_caller_identity()
    rds.create_db_instance(
        DBInstanceIdentifier="restart-db",
        Engine="mysql",
        EngineVersion="8.0.35",
        DBInstanceClass="db.t3.micro",
        MasterUsername="admin",
        MasterUserPassword="restart-test-password",
        AllocatedStorage=20,
        Tags=env_tag,
    )
    rds.describe_db_instances()
    sm.create_secret(Name="restart/secret", SecretString="restart-test-secret", Tags=env_tag)
    before = _snapshot(ctx, vpc_id)
    entries = len(_journal(server.root))

    assert stop_cloud(cloud_root(state_dir))
    assert cloud_status(cloud_root(state_dir)) is None
    restarted = ensure_cloud(
        cloud_root(state_dir), port, region=REGION, dataplane=False, say=_quiet
    )
    assert restarted.pid != server.pid

    assert restarted.url == server.url  # same port: the clients above keep working
    after = _snapshot(ctx, vpc_id)
    assert after == before
    assert after["vpc"][1] == {"environment": "dev", "Name": "v"}
    assert len(_journal(server.root)) == entries  # replay writes nothing


def _everything(ctx: CloudContext) -> str:
    """Every describe of the app-side services, whole, as comparable text."""
    elb, ecs = ctx.client("elbv2"), ctx.client("ecs")
    balancers = elb.describe_load_balancers()["LoadBalancers"]
    seen = {
        "lbs": balancers,
        "tgs": elb.describe_target_groups()["TargetGroups"],
        "listeners": [
            elb.describe_listeners(LoadBalancerArn=b["LoadBalancerArn"])["Listeners"]
            for b in balancers
        ],
        "clusters": ecs.describe_clusters(clusters=ecs.list_clusters()["clusterArns"])["clusters"],
        "task_definitions": [
            ecs.describe_task_definition(taskDefinition=arn)["taskDefinition"]
            for arn in ecs.list_task_definitions()["taskDefinitionArns"]
        ],
        "services": ecs.describe_services(
            cluster="app", services=ecs.list_services(cluster="app")["serviceArns"]
        )["services"],
        "roles": ctx.client("iam").list_roles()["Roles"],
        "attached": ctx.client("iam").list_attached_role_policies(RoleName="exec")[
            "AttachedPolicies"
        ],
        "log_groups": ctx.client("logs").describe_log_groups()["logGroups"],
        "nat": ctx.client("ec2").describe_nat_gateways()["NatGateways"],
        "route_tables": ctx.client("ec2").describe_route_tables()["RouteTables"],
    }
    return json.dumps(seen, default=str, sort_keys=True)


def test_restart_keeps_the_app_side_whole(private_cloud: tuple[Path, int]) -> None:
    """Load balancer, listener, target group, ECS cluster, task definition and service, IAM role
    with a managed policy, log group, NAT gateway and routes: after a restart of the local cloud
    every describe answers exactly as before (ARNs, DNS names, ids, timestamps)."""
    state_dir, port = private_cloud
    server = ensure_cloud(cloud_root(state_dir), port, region=REGION, dataplane=False, say=_quiet)
    ctx = CloudContext(server.url, REGION)
    ec2 = ctx.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.50.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.50.{i}.0/24", AvailabilityZone=f"{REGION}{z}")[
            "Subnet"
        ]["SubnetId"]
        for i, z in ((1, "a"), (2, "b"))
    ]
    igw = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
    eip = ec2.allocate_address(Domain="vpc")["AllocationId"]
    nat = ec2.create_nat_gateway(SubnetId=subnets[0], AllocationId=eip)["NatGateway"]
    table = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    ec2.create_route(
        RouteTableId=table, DestinationCidrBlock="0.0.0.0/0", NatGatewayId=nat["NatGatewayId"]
    )
    ec2.associate_route_table(RouteTableId=table, SubnetId=subnets[1])
    group = ec2.create_security_group(GroupName="lb", Description="lb", VpcId=vpc)["GroupId"]
    elb = ctx.client("elbv2")
    lb = elb.create_load_balancer(Name="app-lb", Subnets=subnets, SecurityGroups=[group])
    lb_arn = lb["LoadBalancers"][0]["LoadBalancerArn"]
    tg_arn = elb.create_target_group(
        Name="app-tg", Protocol="HTTP", Port=80, VpcId=vpc, TargetType="ip"
    )["TargetGroups"][0]["TargetGroupArn"]
    elb.create_listener(
        LoadBalancerArn=lb_arn,
        Protocol="HTTP",
        Port=80,
        DefaultActions=[{"Type": "forward", "TargetGroupArn": tg_arn}],
    )
    iam = ctx.client("iam")
    role = iam.create_role(RoleName="exec", AssumeRolePolicyDocument='{"Version":"2012-10-17"}')
    iam.attach_role_policy(
        RoleName="exec",
        PolicyArn="arn:aws:iam::aws:policy/service-role/AmazonECSTaskExecutionRolePolicy",
    )
    ctx.client("logs").create_log_group(logGroupName="/ecs/app")
    ecs = ctx.client("ecs")
    ecs.create_cluster(clusterName="app")
    task_definition = ecs.register_task_definition(
        family="app",
        networkMode="awsvpc",
        requiresCompatibilities=["FARGATE"],
        cpu="256",
        memory="512",
        executionRoleArn=role["Role"]["Arn"],
        containerDefinitions=[
            {"name": "app", "image": "app:1", "portMappings": [{"containerPort": 80}]}
        ],
    )["taskDefinition"]["taskDefinitionArn"]
    ecs.create_service(
        cluster="app",
        serviceName="app",
        taskDefinition=task_definition,
        desiredCount=1,
        launchType="FARGATE",
        networkConfiguration={
            "awsvpcConfiguration": {"subnets": subnets, "securityGroups": [group]}
        },
        loadBalancers=[{"targetGroupArn": tg_arn, "containerName": "app", "containerPort": 80}],
    )
    before = _everything(ctx)

    assert stop_cloud(cloud_root(state_dir))
    restarted = ensure_cloud(
        cloud_root(state_dir), port, region=REGION, dataplane=False, say=_quiet
    )
    assert restarted.url == server.url
    assert _everything(ctx) == before
    assert lb_arn in before and "AmazonECSTaskExecutionRolePolicy" in before


def test_journal_holds_no_secret_in_any_encoding(local_cloud: LocalCloud) -> None:
    """After a CreateDBInstance and a CreateSecret, no file under the local cloud's root holds
    the password: not as is, not base64, not URL-encoded (the data plane's files included)."""
    password = f"Pw+{secrets.token_urlsafe(12)}/x=y&z"
    secret_text = f"S3cr/{secrets.token_urlsafe(12)}+value"
    local_cloud.client("rds").create_db_instance(
        DBInstanceIdentifier="sealed-db",
        Engine="mysql",
        EngineVersion="8.0.35",
        DBInstanceClass="db.t3.micro",
        MasterUsername="app",
        MasterUserPassword=password,
        AllocatedStorage=20,
        DBName="app",
        Port=free_port(),  # never 3306: another local cloud may serve that on this machine
    )
    local_cloud.client("secretsmanager").create_secret(
        Name="sealed/secret", SecretString=secret_text
    )
    forms = set()
    for value in (password, secret_text):
        raw = value.encode()
        forms |= {
            raw,
            base64.b64encode(raw),
            base64.urlsafe_b64encode(raw),
            base64.b64encode(raw).rstrip(b"="),
            quote(value, safe="").encode(),
            quote_plus(value).encode(),
            json.dumps(value).encode(),
        }
    # The server runs in the root; moto's recorder would write to the project root by default.
    candidates = [*local_cloud.root.rglob("*"), PROJECT_ROOT / "moto_recording"]
    leaks = [
        f"{path} holds a form of a secret"
        for path in candidates
        if path.is_file() and not path.is_symlink()
        for form in [path.read_bytes()]
        if any(f in form for f in forms)
    ]
    assert not leaks, leaks
    fernet = journal_key(local_cloud.root)
    # the session's local cloud is shared: this test's entries are the ones naming its resources
    entries = [
        e
        for e in _journal(local_cloud.root)
        if e["action"] in ("CreateDBInstance", "CreateSecret")
        and ("sealed-db" in json.dumps(e["body"]) or "sealed/secret" in json.dumps(e["body"]))
    ]
    assert {e["action"] for e in entries} == {"CreateDBInstance", "CreateSecret"}
    db_entry = next(e for e in entries if e["action"] == "CreateDBInstance")
    sealed = db_entry["body"]["form"]["MasterUserPassword"]
    assert set(sealed) == {"sealed"}
    assert unseal(db_entry["body"], fernet)["form"]["MasterUserPassword"] == password


def test_reads_do_not_grow_the_journal(local_cloud: LocalCloud) -> None:
    """Describe/List/Get calls (what a refresh or drift check makes) are not journaled."""
    local_cloud.client("ec2").create_vpc(CidrBlock="10.77.0.0/16")
    before = _journal(local_cloud.root)
    assert before and before[-1]["action"] == "CreateVpc"
    ec2 = local_cloud.client("ec2")
    ec2.describe_vpcs()
    ec2.describe_subnets()
    ec2.describe_security_groups()
    local_cloud.client("rds").describe_db_instances()
    local_cloud.client("secretsmanager").list_secrets()
    local_cloud.client("sts").get_caller_identity()
    local_cloud.client("iam").list_roles()
    local_cloud.client("logs").describe_log_groups()
    local_cloud.client("ecs").list_clusters()
    local_cloud.client("elbv2").describe_load_balancers()
    assert _journal(local_cloud.root) == before


def test_a_refused_call_is_not_journaled(local_cloud: LocalCloud) -> None:
    """AWS's refusals (here: an unknown VPC) change nothing, so replay must not repeat them."""
    before = len(_journal(local_cloud.root))
    with pytest.raises(Exception, match="InvalidVpcID"):
        local_cloud.client("ec2").create_subnet(VpcId="vpc-00000000", CidrBlock="10.0.0.0/24")
    assert len(_journal(local_cloud.root)) == before


def test_knobs_take_consumes_counts_across_calls(local_cloud: LocalCloud) -> None:
    """A fault with count 2 hits the next two matching calls (whoever asks), then no more; the
    largest matching latency applies; the spec is kept in knobs.json."""
    url = local_cloud.url
    set_knobs(
        url,
        {
            "latency_s": {"*": 0.1, "database": 0.5, "env:dev": 0.2},
            "faults": [
                {
                    "kind": "transient",
                    "count": 2,
                    "node": "database",
                    "type": "aws:rds/instance:Instance",
                    "operations": ["create"],
                }
            ],
        },
    )
    try:
        rds = ("database", "dev", "aws:rds/instance:Instance", "create")
        first, second, third = take(url, *rds), take(url, *rds), take(url, *rds)
        assert first["fault"] == {
            "kind": "transient",
            "code": "Throttling",
            "message": "Rate exceeded",
        }
        assert second["fault"] == first["fault"]
        assert third["fault"] is None
        assert first["latency_s"] == 0.5
        other = take(url, "networking", "prod", "aws:ec2/vpc:Vpc", "create")
        assert other == {"latency_s": 0.1, "fault": None}
        assert take(url, "database", "dev", "aws:rds/instance:Instance", "read")["fault"] is None
        assert get_knobs(url).faults[0].count == 0
        kept = json.loads((local_cloud.root / "knobs.json").read_text())
        assert kept["faults"][0]["count"] == 0
        with pytest.raises(KnobsError, match="kind"):
            set_knobs(url, {"faults": [{"kind": "sometimes"}]})
    finally:
        clear_knobs(url)
    assert take(url, *rds) == {"latency_s": 0.0, "fault": None}


def test_a_failed_database_bootstrap_fails_the_create_naming_its_log(
    private_cloud: tuple[Path, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The local cloud's CreateDBInstance fails, as AWS shapes an error, when the data plane
    cannot initialise a MariaDB data folder (`mariadb-install-db` fails twice): the answer names
    the log, and no instance is left behind in the cloud or its journal."""
    state_dir, port = private_cloud
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "mariadb-install-db").write_text("#!/bin/sh\necho 'no room at the inn' >&2\nexit 1\n")
    (tools / "mariadb-install-db").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    server = ensure_cloud(cloud_root(state_dir), port, region=REGION, say=_quiet)
    rds = CloudContext(server.url, REGION).client("rds")

    with pytest.raises(ClientError) as refused:
        rds.create_db_instance(
            DBInstanceIdentifier="no-bootstrap",
            Engine="mysql",
            DBInstanceClass="db.t3.micro",
            MasterUsername="admin",
            MasterUserPassword="bootstrap-test-password",
            AllocatedStorage=20,
        )

    error = refused.value.response["Error"]
    assert error["Code"] == "InternalFailure"
    assert str(server.root / "dataplane" / "install.log") in error["Message"]
    assert "bootstrap-test-password" not in error["Message"]
    assert rds.describe_db_instances()["DBInstances"] == []
    assert not [e for e in _journal(server.root) if e["action"] == "CreateDBInstance"]


def _vpcs(ctx: CloudContext) -> set[str]:
    vpcs = ctx.client("ec2").describe_vpcs()["Vpcs"]
    return {v["CidrBlock"] for v in vpcs if not v.get("IsDefault")}


def test_a_torn_last_journal_line_loses_nothing_else(private_cloud: tuple[Path, int]) -> None:
    """A crash mid-write leaves a torn last line: at the next start it is cut off (and said in
    the log), and the changes before it and after it all survive another restart."""
    state_dir, port = private_cloud
    root = cloud_root(state_dir)
    server = ensure_cloud(root, port, region=REGION, dataplane=False, say=_quiet)
    CloudContext(server.url, REGION).client("ec2").create_vpc(CidrBlock="10.71.0.0/16")
    assert stop_cloud(root)
    torn = framed.frame({"seq": 99, "action": "CreateVpc", "body": None})[:30]
    with journal_path(root).open("ab") as journal:
        journal.write(torn)  # what a server killed in the middle of a write leaves

    server = ensure_cloud(root, port, region=REGION, dataplane=False, say=_quiet)
    ctx = CloudContext(server.url, REGION)
    ctx.client("ec2").create_vpc(CidrBlock="10.72.0.0/16")
    assert "its last line was cut off mid-write" in server.log.read_text()
    assert stop_cloud(root)
    server = ensure_cloud(root, port, region=REGION, dataplane=False, say=_quiet)

    assert _vpcs(CloudContext(server.url, REGION)) == {"10.71.0.0/16", "10.72.0.0/16"}
    assert [e["action"] for e in _journal(root)] == ["CreateVpc", "CreateVpc"]


def test_a_garbled_journal_line_is_refused_naming_the_file_and_the_line(
    private_cloud: tuple[Path, int],
) -> None:
    """A line that changed after it was written (its checksum does not match) stops the start
    with an error that names the journal and the line, and no traceback; put back, all is there."""
    state_dir, port = private_cloud
    root = cloud_root(state_dir)
    server = ensure_cloud(root, port, region=REGION, dataplane=False, say=_quiet)
    ec2 = CloudContext(server.url, REGION).client("ec2")
    ec2.create_vpc(CidrBlock="10.73.0.0/16")
    ec2.create_vpc(CidrBlock="10.74.0.0/16")
    assert stop_cloud(root)
    good = journal_path(root).read_bytes()
    journal_path(root).write_bytes(good.replace(b"10.73.0.0", b"10.75.0.0"))

    with pytest.raises(CloudServerError) as refused:
        ensure_cloud(root, port, region=REGION, dataplane=False, say=_quiet)
    message = str(refused.value)
    assert f"{journal_path(root)} line 1 is damaged (its checksum does not match" in message
    assert "Traceback" not in message

    journal_path(root).write_bytes(good)
    server = ensure_cloud(root, port, region=REGION, dataplane=False, say=_quiet)
    assert _vpcs(CloudContext(server.url, REGION)) == {"10.73.0.0/16", "10.74.0.0/16"}


def test_a_killed_database_server_is_started_again_with_its_data(
    private_cloud: tuple[Path, int],
) -> None:
    """kill -9 the mariadbd of a local-cloud RDS instance: the local cloud starts it again, and
    a connection through the data plane works, with the data it had."""
    state_dir, port = private_cloud
    root = cloud_root(state_dir)
    server = ensure_cloud(root, port, region=REGION, say=_quiet)
    ctx = CloudContext(server.url, REGION)
    password = secrets.token_urlsafe(16)
    ctx.client("rds").create_db_instance(
        DBInstanceIdentifier="kept-alive",
        Engine="mysql",
        DBInstanceClass="db.t3.micro",
        MasterUsername="admin",
        MasterUserPassword=password,
        DBName="app",
        AllocatedStorage=20,
    )
    where = ctx.dataplane()["databases"]["kept-alive"]

    def connect() -> pymysql.connections.Connection[Any]:
        return pymysql.connect(
            host=where["host"],
            port=where["port"],
            user="admin",
            password=password,
            database="app",
            autocommit=True,
            connect_timeout=2,
        )

    with connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE kept (id INT PRIMARY KEY)")
        cur.execute("INSERT INTO kept VALUES (42)")
    pid_file = root / "dataplane" / "db" / "kept-alive" / "mariadbd.pid"
    killed = int(pid_file.read_text())
    os.kill(killed, signal.SIGKILL)

    def serves_the_data_again() -> bool:
        try:
            with connect() as conn, conn.cursor() as cur:
                cur.execute("SELECT id FROM kept")
                return cur.fetchall() == ((42,),)
        except pymysql.err.OperationalError:
            return False

    said = "kept-alive was not running (its mariadbd exited); started it again"
    wait_until(serves_the_data_again, "the killed database server serves its data again")
    wait_until(lambda: said in server.log.read_text(), "the local cloud says it restarted it")
    assert int(pid_file.read_text()) != killed
    assert ctx.dataplane()["databases"]["kept-alive"]["running"] is True


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    """Wait for an event (`condition` turning true), failing with `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s:g}s: {what}"
        time.sleep(0.1)


def test_concurrent_starts_share_one_server_and_stop_ends_it(
    private_cloud: tuple[Path, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three callers starting the same folder's local cloud at once get one server; after
    `stop`, status (API and CLI) says it is not running, and a second stop finds nothing.
    moto's own recorder stays off even when the caller's environment turns it on."""
    state_dir, port = private_cloud
    monkeypatch.setenv("MOTO_ENABLE_RECORDING", "true")
    started: list[CloudServer] = []
    errors: list[BaseException] = []

    def start() -> None:
        try:
            started.append(
                ensure_cloud(
                    cloud_root(state_dir), port, region=REGION, dataplane=False, say=_quiet
                )
            )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    assert not errors, errors
    assert len({s.pid for s in started}) == 1 and len(started) == 3
    status = cloud_status(cloud_root(state_dir))
    assert status is not None and status.pid == started[0].pid
    CloudContext(status.url, REGION).client("ec2").create_vpc(CidrBlock="10.60.0.0/16")
    assert not list(status.root.rglob("moto_recording"))

    assert stop_cloud(cloud_root(state_dir))
    assert cloud_status(cloud_root(state_dir)) is None
    assert not stop_cloud(cloud_root(state_dir))
    assert _cli(state_dir, port, "status") == (
        0,
        f"local cloud (moto on 127.0.0.1:{port}): not running\n",
    )


def test_cli_status_and_ls(local_cloud: LocalCloud) -> None:
    """`cloud status` and `cloud ls` say "local cloud", count and list the resources per
    environment, and filter on --env."""
    ec2 = local_cloud.client("ec2")
    tags = [{"Key": "environment", "Value": "cli-env"}, {"Key": "Name", "Value": "cli-vpc"}]
    vpc_id = ec2.create_vpc(
        CidrBlock="10.88.0.0/16", TagSpecifications=[{"ResourceType": "vpc", "Tags": tags}]
    )["Vpc"]["VpcId"]
    local_cloud.client("logs").create_log_group(logGroupName="/ecs/stackflow-cli-env-app")
    port = local_cloud.server.port
    code, text = _cli(local_cloud.state_dir, port, "status")
    assert code == 0 and text.startswith(f"local cloud (moto on 127.0.0.1:{port}): running, ")
    code, text = _cli(local_cloud.state_dir, port, "ls", environment="cli-env")
    assert code == 0
    assert "environment cli-env (2 resources)" in text
    assert vpc_id in text and "cli-vpc" in text and "available" in text
    assert "/ecs/stackflow-cli-env-app" in text  # placed by its name: it has no tags
    code, text = _cli(local_cloud.state_dir, port, "ls", "--json", environment="cli-env")
    rows = json.loads(text)["resources"]
    assert {(r["kind"], r["environment"]) for r in rows} == {
        ("vpc", "cli-env"),
        ("log-group", "cli-env"),
    }


def test_seal_and_parse_both_protocols(tmp_path: Path) -> None:
    """Secret fields are sealed at any depth and come back; the query and JSON protocols are
    told apart, with the service from the credential scope."""
    fernet = journal_key(tmp_path)
    auth = "AWS4-HMAC-SHA256 Credential=testing/20250101/eu-west-1/{}/aws4_request, Signature=x"
    query = parse_request(
        "POST",
        "/",
        "",
        {"Content-Type": "application/x-www-form-urlencoded", "Authorization": auth.format("rds")},
        b"Action=CreateDBInstance&MasterUserPassword=p%2Bw&Version=2014-10-31",
    )
    assert (query.service, query.action, query.protocol, query.mutating) == (
        "rds",
        "CreateDBInstance",
        "query",
        True,
    )
    assert query.params["MasterUserPassword"] == "p+w"
    target = parse_request(
        "POST",
        "/",
        "",
        {
            "X-Amz-Target": "secretsmanager.GetSecretValue",
            "Authorization": auth.format("secretsmanager"),
        },
        b'{"SecretId": "x"}',
    )
    assert (target.service, target.action, target.protocol, target.mutating) == (
        "secretsmanager",
        "GetSecretValue",
        "json",
        False,
    )
    body = {"Name": "n", "SecretString": "s", "Nested": [{"Password": "p", "Keep": 1}]}
    sealed = seal(body, fernet)
    assert set(sealed["SecretString"]) == {"sealed"} and sealed["Name"] == "n"
    assert set(sealed["Nested"][0]["Password"]) == {"sealed"} and sealed["Nested"][0]["Keep"] == 1
    assert unseal(sealed, fernet) == body


def test_passphrase_is_generated_once(tmp_path: Path) -> None:
    """Concurrent first calls agree on one passphrase, kept 0600."""
    found: list[str] = []
    threads = [
        threading.Thread(target=lambda: found.append(passphrase(tmp_path))) for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(found)) == 1 and len(found[0]) >= 40
    assert (tmp_path / "passphrase").stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["passphrase"]


def _cli(state_dir: Path, port: int, *argv: str, environment: str | None = None) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", "-e", dest="environment")
    add_arguments(parser)
    args = parser.parse_args([*argv, *(["--env", environment] if environment else [])])
    from stackflow.settings import get_settings

    settings = get_settings(state_dir=state_dir, aws={"region": REGION}, localcloud={"port": port})
    out, err = io.StringIO(), io.StringIO()
    code = cli_run(args, settings, out=out, err=err)
    return code, out.getvalue() + err.getvalue()
