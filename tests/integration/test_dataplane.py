"""The local cloud data plane, not AWS: a real MariaDB per RDS instance on its own loopback address,
and an app stand-in per load balancer listener that finds its database the way ECS would.

The database tests drive `Dataplane` directly with the `ApiCall`s the cloud server would pass; the
app test runs moto's server in-process and relays each mutating call to the data plane as the
cloud server does."""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import signal
import socket
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote

import pymysql
import pytest
from pydantic import SecretStr

from stackflow.localcloud.context import CloudContext
from stackflow.localcloud.dataplane import SERVER_ARGS, ApiCall, Dataplane
from stackflow.localdb import (
    MariaDBBootstrapError,
    admin_connection,
    find_binary,
    prepare_template,
    running_server,
)
from stackflow.migrator.command import migrate
from stackflow.migrator.target import MysqlTarget
from stackflow.settings import MigrationSettings

pytestmark = pytest.mark.integration
# moto's backends are process-wide: a region other tests rarely use keeps these resources out of
# other in-process moto tests' listings.
REGION = "ca-central-1"
NO_CLOUD = "http://127.0.0.1:9"  # the database tests make no AWS call


def password() -> str:
    # Characters that base64 and URL-encoding change, so the leak scan checks three spellings.
    return f"{secrets.token_urlsafe(12)}+/={secrets.token_urlsafe(6)}"


def create_db(identifier: str, pw: str, *, user: str = "app", db: str = "appdb") -> ApiCall:
    params = {
        "Action": "CreateDBInstance",
        "DBInstanceIdentifier": identifier,
        "Engine": "mysql",
        "EngineVersion": "8.0.40",
        "DBInstanceClass": "db.t3.micro",
        "MasterUsername": user,
        "MasterUserPassword": pw,
        "DBName": db,
        "Port": "3306",
    }
    return ApiCall("rds", "CreateDBInstance", params, b"")


def rds(action: str, **params: str) -> ApiCall:
    return ApiCall("rds", action, {"Action": action, **params}, b"")


def connect(plane: Dataplane, identifier: str, pw: str, db: str = "appdb") -> Any:
    where = plane.endpoints()["databases"][identifier]
    return pymysql.connect(
        host=where["host"],
        port=where["port"],
        user="app",
        password=pw,
        database=db,
        autocommit=True,
        connect_timeout=3,
    )


def refused(plane: Dataplane, identifier: str, pw: str) -> int:
    """The MySQL error code a login gets (0: it was accepted)."""
    try:
        connect(plane, identifier, pw).close()
    except pymysql.err.OperationalError as exc:
        return int(exc.args[0])
    return 0


def mariadbd_pids(folder: Path) -> list[int]:
    """Pids of mariadbd processes started from a data folder under `folder`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"mariadbd" in cmdline and str(folder).encode() in cmdline:
            found.append(int(entry.name))
    return found


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One initialised data folder for every test's cloud root (it takes about a second)."""
    folder = tmp_path_factory.mktemp("dataplane") / "template"
    prepare_template(folder, server_args=SERVER_ARGS)
    return folder


@pytest.fixture
def root(tmp_path: Path, template: Path) -> Iterator[Path]:
    """A cloud root with the template in place; no mariadbd from it survives the test."""
    cloud = tmp_path / "cloud"
    shutil.copytree(template, cloud / "dataplane" / "template")
    yield cloud
    Dataplane(cloud, NO_CLOUD, REGION).stop_all()
    leftovers = mariadbd_pids(tmp_path)
    for pid in leftovers:
        os.kill(pid, signal.SIGKILL)
    assert not leftovers, f"stop_all left mariadbd running: {leftovers}"


@pytest.fixture
def plane(root: Path) -> Iterator[Dataplane]:
    dataplane = Dataplane(root, NO_CLOUD, REGION)
    yield dataplane
    dataplane.stop_all()


def test_each_instance_is_its_own_server_with_its_own_password(plane: Dataplane) -> None:
    """Same user and database names, different passwords: two servers on two addresses."""
    one, two = password(), password()
    plane.on_api_call(create_db("db-one", one))
    plane.on_api_call(create_db("db-two", two))

    dbs = plane.endpoints()["databases"]
    assert dbs["db-one"]["host"] != dbs["db-two"]["host"]
    for where in dbs.values():
        assert where["host"].startswith("127.") and where["host"] != "127.0.0.1"
        assert where["port"] == 3306 and where["running"] is True
    assert refused(plane, "db-one", one) == 0
    assert refused(plane, "db-two", two) == 0
    assert refused(plane, "db-one", two) == 1045
    assert refused(plane, "db-two", one) == 1045
    # Copied from the template, never initialised again (about 0.5 s each here; the bound is
    # loose so that a busy machine does not fail it).
    assert plane.template_seconds is None
    assert max(plane.start_times.values()) < 2.5, plane.start_times

    # The master user administers the instance, like RDS's: it may create databases.
    with connect(plane, "db-one", one) as conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE other")

    # Temporary tables go to a folder of the server's own, never the shared /tmp.
    base = plane.root / "dataplane" / "db" / "db-two"
    with admin_connection(base) as conn, conn.cursor() as cur:
        cur.execute("SELECT @@tmpdir")
        assert cur.fetchone() == (str(base / "tmp"),)
    assert (base / "tmp").stat().st_mode & 0o777 == 0o700


def fake_install_db(folder: Path, body: str) -> Path:
    """A `mariadb-install-db` in `folder` (put first on PATH) that counts its runs in `runs`,
    records its arguments in `args`, then runs `body` (shell)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "mariadb-install-db"
    script.write_text(
        f'#!/bin/sh\necho run >> "{folder}/runs"\necho "$@" >> "{folder}/args"\n{body}\n'
    )
    script.chmod(0o755)
    return folder


def test_a_bootstrap_that_keeps_failing_is_tried_twice_and_names_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The data plane prepares a database's data folder before the cloud creates the instance:
    a bootstrap that fails (here, on every try) is retried once, then fails naming its log."""
    tools = fake_install_db(tmp_path / "bin", "echo 'simulated bootstrap failure' >&2; exit 3")
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    plane = Dataplane(tmp_path / "cloud", NO_CLOUD, REGION)

    with pytest.raises(MariaDBBootstrapError) as failed:
        plane.before_api_call(create_db("db-one", password()))

    log = tmp_path / "cloud" / "dataplane" / "install.log"
    assert failed.value.log == log
    assert str(log) in str(failed.value) and "simulated bootstrap failure" in str(failed.value)
    assert (tools / "runs").read_text().count("run") == 2
    assert log.read_text().count("simulated bootstrap failure") == 2  # both tries are in it
    assert not (tmp_path / "cloud" / "dataplane" / "template").exists()


def test_a_bootstrap_that_fails_once_succeeds_on_its_retry_in_a_private_tmpdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = find_binary("mariadb-install-db")
    tools = fake_install_db(
        tmp_path / "bin",
        f'[ "$(wc -l < "{tmp_path}/bin/runs")" -eq 1 ] && exit 1\nexec {real} "$@"',
    )
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    template = tmp_path / "dataplane" / "template"

    assert prepare_template(template, server_args=SERVER_ARGS)

    assert (template / "mysql").is_dir()
    tries = (tools / "args").read_text().splitlines()
    assert len(tries) == 2
    private = tmp_path / "dataplane" / "tmp"
    assert all(f"--tmpdir={private}" in line.split() for line in tries)
    assert private.stat().st_mode & 0o777 == 0o700


def test_an_address_another_program_listens_on_is_skipped(plane: Dataplane) -> None:
    """Another program may already serve the first address of this cloud's pool."""
    from stackflow.localcloud.dataplane import address_pool

    first = str(address_pool(plane.root)[0])
    with socket.socket() as busy:
        busy.bind((first, 0))
        busy.listen()
        plane.on_api_call(create_db("db-one", password()))
    assert plane.endpoints()["databases"]["db-one"]["host"] != first


def test_two_clouds_draw_from_pools_of_their_own() -> None:
    """Two local clouds on one machine (two clones, two test workers) never hand out one address,
    even while one is stopped and nothing listens on its addresses: each has a /16 of its own."""
    from stackflow.localcloud.dataplane import address_pool

    pools = {address_pool(Path(f"/srv/clone-{i}/.stackflow/localcloud")) for i in (1, 2)}
    assert len(pools) == 2
    for first, last in pools:
        assert str(first).startswith("127.") and str(first).endswith(".0.2")
        assert int(last) - int(first) == 65532


def test_create_again_only_makes_sure_it_runs(plane: Dataplane) -> None:
    pw = password()
    plane.on_api_call(create_db("db-one", pw))
    with connect(plane, "db-one", pw) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE kept (id INT PRIMARY KEY)")
        cur.execute("INSERT INTO kept VALUES (7)")
    host = plane.endpoints()["databases"]["db-one"]["host"]
    plane.stop_all()
    assert plane.endpoints()["databases"]["db-one"]["running"] is False

    plane.on_api_call(create_db("db-one", pw))
    assert plane.endpoints()["databases"]["db-one"] == {"host": host, "port": 3306, "running": True}
    with connect(plane, "db-one", pw) as conn, conn.cursor() as cur:
        cur.execute("SELECT id FROM kept")
        assert cur.fetchall() == ((7,),)


def test_modify_changes_the_password(plane: Dataplane) -> None:
    old, new = password(), password()
    plane.on_api_call(create_db("db-one", old))
    plane.on_api_call(
        rds("ModifyDBInstance", DBInstanceIdentifier="db-one", MasterUserPassword=new)
    )
    assert refused(plane, "db-one", old) == 1045
    assert refused(plane, "db-one", new) == 0


def test_delete_writes_the_final_snapshot_and_stops_the_server(
    plane: Dataplane, root: Path
) -> None:
    pw = password()
    plane.on_api_call(create_db("db-one", pw))
    plane.on_api_call(create_db("db-two", pw))
    with connect(plane, "db-one", pw) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE color (id INT PRIMARY KEY, name VARCHAR(20))")
        cur.execute("INSERT INTO color VALUES (1, 'vermilion')")
    server = running_server(root / "dataplane" / "db" / "db-one")
    assert server is not None

    plane.on_api_call(
        rds(
            "DeleteDBInstance",
            DBInstanceIdentifier="db-one",
            SkipFinalSnapshot="false",
            FinalDBSnapshotIdentifier="db-one-final",
        )
    )
    dump = (root / "dataplane" / "snapshots" / "db-one-final.sql").read_text()
    assert "CREATE TABLE `color`" in dump and "vermilion" in dump
    assert "mysql.global_priv" not in dump  # accounts (and password hashes) stay out
    assert not mariadbd_pids(root / "dataplane" / "db" / "db-one")
    assert not (root / "dataplane" / "db" / "db-one").exists()
    assert "db-one" not in plane.endpoints()["databases"]

    plane.on_api_call(
        rds("DeleteDBInstance", DBInstanceIdentifier="db-two", SkipFinalSnapshot="true")
    )
    assert sorted(p.name for p in (root / "dataplane" / "snapshots").iterdir()) == [
        "db-one-final.sql"
    ]
    assert plane.endpoints()["databases"] == {}


def test_start_all_after_stop_all_brings_them_back_with_their_data(root: Path) -> None:
    """A new Dataplane on the same root (as after a server restart) needs no secret to start."""
    pw = password()
    first = Dataplane(root, NO_CLOUD, REGION)
    first.on_api_call(create_db("db-one", pw))
    first.on_api_call(create_db("db-two", pw, db="other"))
    with connect(first, "db-one", pw) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE kept (id INT PRIMARY KEY)")
        cur.execute("INSERT INTO kept VALUES (1), (2)")
    before = first.endpoints()
    first.stop_all()
    assert not mariadbd_pids(root)
    assert all(not d["running"] for d in first.endpoints()["databases"].values())

    second = Dataplane(root, NO_CLOUD, REGION)
    assert second.start_all() == []
    assert second.endpoints() == before
    with connect(second, "db-one", pw) as conn, conn.cursor() as cur:
        cur.execute("SELECT id FROM kept ORDER BY id")
        assert cur.fetchall() == ((1,), (2,))
    assert refused(second, "db-two", pw) == 1049  # db-two has "other", not "appdb"
    connect(second, "db-two", pw, db="other").close()
    assert max(second.start_times.values()) < 2.5, second.start_times


def test_no_file_under_the_root_holds_a_password(plane: Dataplane, root: Path) -> None:
    one, two, three = password(), password(), password()
    plane.on_api_call(create_db("db-one", one))
    plane.on_api_call(create_db("db-two", two))
    plane.on_api_call(
        rds("ModifyDBInstance", DBInstanceIdentifier="db-two", MasterUserPassword=three)
    )
    plane.on_api_call(
        rds("DeleteDBInstance", DBInstanceIdentifier="db-one", FinalDBSnapshotIdentifier="snap")
    )
    plane.stop_all()  # flush everything the servers keep in memory

    spellings = [
        spelling
        for pw in (one, two, three)
        for spelling in (pw.encode(), base64.b64encode(pw.encode()), quote(pw, safe="").encode())
    ]
    files = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
    assert len(files) > 10
    for path in files:
        data = path.read_bytes()
        assert not any(s in data for s in spellings), f"{path} holds a password"


# --- the app stand-in, against moto's server in this process ----------------------------------


@pytest.fixture
def cloud() -> Iterator[CloudContext]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield CloudContext(f"http://{host}:{port}", REGION)
    finally:
        server.stop()


def relay(client: Any, plane: Dataplane) -> None:
    """Pass the client's successful mutating calls to the data plane, as the cloud server does."""
    sent: dict[str, Any] = {}

    def before_send(request: Any, **_: Any) -> None:
        sent["body"] = request.body

    def after_call(http_response: Any, model: Any, **_: Any) -> None:
        body = sent.pop("body", b"") or b""
        text = body.decode() if isinstance(body, bytes) else str(body)
        if model.name.startswith(("Describe", "List", "Get")):
            return
        if 200 <= http_response.status_code < 300:
            params = dict(parse_qsl(text, keep_blank_values=True))
            service = client.meta.service_model.signing_name
            plane.on_api_call(ApiCall(service, model.name, params, http_response.content))

    client.meta.events.register("before-send", before_send)
    client.meta.events.register("after-call", after_call)


def get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return int(response.status), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_app_stand_in_reports_the_schema_version_it_reads_as_the_app(
    cloud: CloudContext, root: Path, tmp_path: Path
) -> None:
    """LB -> listener -> target group -> ECS service -> task definition -> secret -> database."""
    plane = Dataplane(root, cloud.endpoint, REGION)
    rds_client, elbv2 = cloud.client("rds"), cloud.client("elbv2")
    relay(rds_client, plane)
    relay(elbv2, plane)
    ec2, ecs, sm = cloud.client("ec2"), cloud.client("ecs"), cloud.client("secretsmanager")
    tag = uuid.uuid4().hex[:8]
    try:
        vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
        subnets = [
            ec2.create_subnet(
                VpcId=vpc, CidrBlock=f"10.9.{i}.0/24", AvailabilityZone=f"{REGION}{z}"
            )["Subnet"]["SubnetId"]
            for i, z in ((1, "a"), (2, "b"))
        ]
        lb = elbv2.create_load_balancer(Name=f"alb-{tag}", Subnets=subnets)["LoadBalancers"][0]
        group = elbv2.create_target_group(
            Name=f"app-{tag}", Protocol="HTTP", Port=8000, VpcId=vpc, TargetType="ip"
        )["TargetGroups"][0]["TargetGroupArn"]
        listener = elbv2.create_listener(
            LoadBalancerArn=lb["LoadBalancerArn"],
            Protocol="HTTP",
            Port=8080,
            DefaultActions=[{"Type": "forward", "TargetGroupArn": group}],
        )["Listeners"][0]["ListenerArn"]
        balancer = plane.endpoints()["load_balancers"][f"alb-{tag}"]
        assert balancer["ports"] == [8080]
        url = f"http://{balancer['host']}:8080/health"

        status, body = get(url)
        assert status == 503 and "no ECS service" in body["reason"], body

        old = password()
        rds_client.create_db_instance(
            DBInstanceIdentifier=f"db-{tag}",
            Engine="mysql",
            EngineVersion="8.0.40",
            DBInstanceClass="db.t3.micro",
            AllocatedStorage=20,
            MasterUsername="app",
            MasterUserPassword=old,
            DBName="appdb",
            Port=3306,
        )
        db = plane.endpoints()["databases"][f"db-{tag}"]
        secret = sm.create_secret(Name=f"db-password-{tag}", SecretString=old)["ARN"]
        cluster = ecs.create_cluster(clusterName=f"cluster-{tag}")["cluster"]["clusterArn"]
        family = ecs.register_task_definition(
            family=f"app-{tag}",
            networkMode="awsvpc",
            requiresCompatibilities=["FARGATE"],
            cpu="256",
            memory="512",
            containerDefinitions=[
                {
                    "name": "app",
                    "image": "example/app:1",
                    "portMappings": [{"containerPort": 8000}],
                    "environment": [
                        {"name": "DB_HOST", "value": db["host"]},
                        {"name": "DB_PORT", "value": str(db["port"])},
                        {"name": "DB_NAME", "value": "appdb"},
                        {"name": "DB_USER", "value": "app"},
                    ],
                    "secrets": [{"name": "DB_PASSWORD", "valueFrom": secret}],
                }
            ],
        )["taskDefinition"]["taskDefinitionArn"]
        ecs.create_service(
            cluster=cluster,
            serviceName=f"app-{tag}",
            taskDefinition=family,
            desiredCount=1,
            launchType="FARGATE",
            loadBalancers=[
                {"targetGroupArn": group, "containerName": "app", "containerPort": 8000}
            ],
        )

        assert get(url) == (200, {"status": "ok", "database": "appdb", "schema_version": None})

        migrations = tmp_path / "migrations"
        migrations.mkdir()
        (migrations / "V001__create_color.sql").write_text("CREATE TABLE color (id INT);")
        (migrations / "V002__add_shape.sql").write_text("CREATE TABLE shape (id INT);")
        target = MysqlTarget(db["host"], db["port"], "app", SecretStr(old), "appdb")
        migrate(target, MigrationSettings(wait_timeout_s=10), protected=False, folder=migrations)
        assert get(url) == (200, {"status": "ok", "database": "appdb", "schema_version": "2"})

        # The instance's password changes but the secret still holds the old one.
        new = password()
        rds_client.modify_db_instance(
            DBInstanceIdentifier=f"db-{tag}", MasterUserPassword=new, ApplyImmediately=True
        )
        status, body = get(url)
        assert status == 503 and "auth failed" in body["reason"], body
        assert old not in json.dumps(body) and new not in json.dumps(body)
        sm.put_secret_value(SecretId=secret, SecretString=new)
        assert get(url)[0] == 200

        rds_client.delete_db_instance(DBInstanceIdentifier=f"db-{tag}", SkipFinalSnapshot=True)
        status, body = get(url)
        assert status == 503 and "unreachable" in body["reason"], body

        elbv2.delete_listener(ListenerArn=listener)
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(url, timeout=5)
        assert plane.endpoints()["load_balancers"][f"alb-{tag}"]["ports"] == []
        elbv2.delete_load_balancer(LoadBalancerArn=lb["LoadBalancerArn"])
        assert plane.endpoints() == {"databases": {}, "load_balancers": {}}
    finally:
        plane.stop_all()


def test_start_all_rebinds_the_app_stand_ins(cloud: CloudContext, root: Path) -> None:
    """After a restart (a new Dataplane on the same root) the listener answers again."""
    plane = Dataplane(root, cloud.endpoint, REGION)
    elbv2 = cloud.client("elbv2")
    relay(elbv2, plane)
    ec2 = cloud.client("ec2")
    tag = uuid.uuid4().hex[:8]
    vpc = ec2.create_vpc(CidrBlock="10.8.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.8.1.0/24")["Subnet"]["SubnetId"]
    lb = elbv2.create_load_balancer(Name=f"alb-{tag}", Subnets=[subnet])["LoadBalancers"][0]
    group = elbv2.create_target_group(Name=f"tg-{tag}", Protocol="HTTP", Port=80, VpcId=vpc)[
        "TargetGroups"
    ][0]["TargetGroupArn"]
    elbv2.create_listener(
        LoadBalancerArn=lb["LoadBalancerArn"],
        Protocol="HTTP",
        Port=8081,
        DefaultActions=[{"Type": "forward", "TargetGroupArn": group}],
    )
    host = plane.endpoints()["load_balancers"][f"alb-{tag}"]["host"]
    plane.stop_all()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://{host}:8081/", timeout=5)

    again = Dataplane(root, cloud.endpoint, REGION)
    try:
        assert again.start_all() == []
        assert again.endpoints()["load_balancers"][f"alb-{tag}"] == {"host": host, "ports": [8081]}
        status, body = get(f"http://{host}:8081/")
        assert status == 503 and "no ECS service" in body["reason"], body
    finally:
        again.stop_all()
