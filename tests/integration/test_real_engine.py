"""The real Pulumi engine (the CLI v3.259.0 and the Automation API) running the project's flows on
the **local cloud**: moto's AWS APIs on loopback behind the project's own `aws`/`random` provider
plugins, a MariaDB server per RDS instance and a stand-in app per load balancer. Nothing here
touches AWS; every figure and message these tests check says "local cloud".

The session shares one local cloud and one Prefect server. One environment (`shared`) is deployed
once for the module: the tests that only look at it, or change it and put it back, run on it in
file order, and the last of them destroys it. Tests that need an environment of their own give it
a name of their own, so tests never see each other's stacks.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import boto3
import pymysql
import pytest

from tests.realenv import (
    ROOT,
    STACKS,
    cli,
    declare,
    intervals,
    process_env,
    real_variables,
    summary_of,
    unique,
    update_history,
)
from tests.realenv import outputs as stack_outputs

pytestmark = pytest.mark.integration


def _environment(folder: Path, local_cloud: Any, prefect_server: Any) -> dict[str, Any]:
    """Settings for the real engine on the session's local cloud, in a state folder of their own."""
    home = folder / "home"
    # A user who uses Pulumi elsewhere: their own Pulumi home, which the local cloud must not touch.
    (home / ".pulumi" / "plugins").mkdir(parents=True)
    (home / ".pulumi" / "credentials.json").write_text('{"current": "file://~"}')
    variables = real_variables(folder / "state", local_cloud, prefect_server)
    env = process_env(variables, HOME=str(home))  # ~/.pulumi of this "user" must stay untouched
    return {
        "env": env,
        "variables": variables,
        "state": folder / "state",
        "home": home,
        "cloud": local_cloud,
    }


@pytest.fixture(scope="module")
def shared(
    tmp_path_factory: pytest.TempPathFactory, local_cloud: Any, prefect_server: Any
) -> dict[str, Any]:
    """One environment deployed once, by the CLI from a working folder of its own, for the tests
    that only look at it, change it and put it back (deploys are the slow part: shared, not
    repeated)."""
    real = _environment(tmp_path_factory.mktemp("shared"), local_cloud, prefect_server)
    real["name"] = unique("dev")
    workdir = tmp_path_factory.mktemp("anywhere")  # any working folder will do
    up = cli(real["env"], "up", "--env", real["name"], cwd=workdir)
    assert up.returncode == 0, up.stdout + up.stderr
    real["first_up"] = up
    return real


@pytest.fixture
def real(tmp_path: Path, local_cloud: Any, prefect_server: Any) -> dict[str, Any]:
    """Settings for one test of its own on the real engine and the session's local cloud."""
    return _environment(tmp_path, local_cloud, prefect_server)


def use(variables: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Exactly these STACKFLOW_* settings in this process, for flows called in-process."""
    for key in [k for k in os.environ if k.startswith("STACKFLOW_")]:
        monkeypatch.delenv(key)
    for key, value in variables.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def in_process(shared: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The shared environment's settings in this process, for flows called in-process."""
    use(shared["variables"], monkeypatch)
    yield
    from stackflow.localprefect import drain_prefect_queues

    drain_prefect_queues()


def outputs(real: dict[str, Any], environment: str) -> dict[str, dict[str, Any]]:
    return stack_outputs(real["variables"], environment)


def statuses(summary: dict[str, Any]) -> dict[str, str]:
    """Each node's status in a run summary (the dict a flow returns)."""
    return {s["stack"]: s["status"] for s in summary["stacks"]}


def encodings(secret: str) -> list[str]:
    return [
        secret,
        base64.b64encode(secret.encode()).decode(),
        quote(secret, safe=""),
        quote(secret),
    ]


def files_holding(folder: Path, secret: str, skip: tuple[Path, ...] = ()) -> list[str]:
    found = []
    for path in folder.rglob("*"):
        if not path.is_file() or path in skip or path.is_symlink():
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if any(form.encode() in data for form in encodings(secret)):
            found.append(str(path))
    return found


def connect(db: dict[str, Any], **options: Any) -> Any:
    """A connection to an environment's database with the credentials its outputs carry."""
    return pymysql.connect(
        host=db["host"],
        port=int(db["port"]),
        user=db["user"],
        password=str(db["password"]),
        database=db["database"],
        **options,
    )


def test_up_deploys_on_the_local_cloud_then_a_second_up_makes_no_engine_call(
    shared: dict[str, Any],
) -> None:
    """Quick-start shape on the local cloud: three real stacks, migrations on the environment's own
    MariaDB server, a healthy verify; then 0 engine calls; secrets never in plaintext on disk."""
    real, env_name, up = shared, shared["name"], shared["first_up"]
    assert "[local cloud: moto on loopback, nothing was deployed to AWS]" in up.stdout
    assert "engine operations: 3" in up.stdout
    assert summary_of(up) == {
        "networking": "updated",
        "database": "updated",
        "migrate": "migrated",
        "app": "updated",
        "verify": "healthy",
    }

    # In order (Pulumi's own history): the database's update began after networking's had ended;
    # the app's began after networking's too, beside the database's (what needs only networking
    # is created meanwhile), and ended after it (what reads the database waits for it).
    spans = {s: intervals(real["state"], env_name, s) for s in STACKS}
    assert all(len(v) == 1 for v in spans.values()), spans
    assert spans["networking"][0][1] <= spans["database"][0][0]
    assert spans["networking"][0][1] <= spans["app"][0][0]
    assert spans["database"][0][1] <= spans["app"][0][1]

    again = cli(real["env"], "up", "--env", env_name)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "engine operations: 0" in again.stdout

    # The backend holds the three real stacks, listed by the real CLI.
    from stackflow.localcloud.paths import passphrase
    from stackflow.pulumi_cli import find_cli

    cli_path = find_cli()
    assert cli_path is not None
    backend = real["state"] / "pulumi-local"
    for project in ("stackflow-networking", "stackflow-database", "stackflow-app"):
        listed = subprocess.run(
            [str(cli_path), "stack", "ls", "--json", "--project", project],
            env={
                **real["env"],
                "PULUMI_BACKEND_URL": f"file://{backend}",
                "PULUMI_HOME": str(real["cloud"].root / "pulumi-home"),
                "PULUMI_CONFIG_PASSPHRASE": passphrase(real["cloud"].root),
            },
            capture_output=True,
            text=True,
            cwd=real["state"],
        )
        assert listed.returncode == 0, listed.stderr
        stacks = {s["name"].rsplit("/", 1)[-1]: s for s in json.loads(listed.stdout)}
        assert env_name in stacks and stacks[env_name]["resourceCount"] > 0

    out = outputs(real, env_name)
    password = str(out["database"]["password"])
    assert out["database"]["host"].startswith("127.") and out["database"]["host"] != "127.0.0.1"
    checkpoint = next(backend.rglob(f"stackflow-database/{env_name}.json")).read_text()
    assert '"aws:rds/instance:Instance"' in checkpoint
    assert "ciphertext" in checkpoint and password not in checkpoint

    # No file of the state folder or of the local cloud holds the password or the passphrase.
    root = real["cloud"].root
    phrase = passphrase(root)
    assert files_holding(real["state"], password) == []
    assert files_holding(root, password) == []
    assert files_holding(real["state"], phrase) == []
    assert files_holding(root, phrase, skip=(root / "passphrase",)) == []
    # The user's own Pulumi home was never touched: no plugin, log or file added or changed.
    assert sorted(
        str(p.relative_to(real["home"])) for p in (real["home"] / ".pulumi").rglob("*")
    ) == [
        ".pulumi/credentials.json",
        ".pulumi/plugins",
    ]

    # Outputs travelled downstream: the app's task definition carries the database's address.
    ecs = real["cloud"].client("ecs")
    family = ecs.describe_task_definition(taskDefinition=f"stackflow-{env_name}-app")
    container = family["taskDefinition"]["containerDefinitions"][0]
    environment = {e["name"]: e["value"] for e in container["environment"]}
    assert environment["DB_HOST"] == out["database"]["host"]
    assert environment["DB_PORT"] == str(out["database"]["port"])

    # `outputs --json`: JSON only on stdout, the password masked, nowhere in any output.
    shown = cli(real["env"], "outputs", "--env", env_name, "--json")
    assert shown.returncode == 0, shown.stderr
    listed_outputs = json.loads(shown.stdout)
    assert sorted(listed_outputs) == sorted(STACKS)
    assert listed_outputs["database"]["password"] == "[secret]"
    assert listed_outputs["database"]["port"] == out["database"]["port"]
    assert listed_outputs["networking"]["vpc_id"] == out["networking"]["vpc_id"]
    for result in (up, again, shown):
        assert password not in result.stdout + result.stderr

    # The migration really ran on this environment's own database server.
    db = out["database"]
    with (
        connect(db) as conn,
        conn.cursor() as cur,
    ):
        cur.execute("SHOW TABLES LIKE 'hello_pulumi'")
        assert cur.fetchone() is not None


def test_up_publishes_the_summary_artifact_with_secrets_masked(shared: dict[str, Any]) -> None:
    """The markdown artifact of the shared environment's `up` on the local cloud: says local
    cloud, one row per stack, the password listed masked and never in clear."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    key = f"up-{shared['name']}"
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key]))
        )
    assert artifacts, f"no {key} artifact"
    # the first version: the deploy that created the stacks (later ones are no-op ups)
    markdown = str(min(artifacts, key=lambda a: a.created or 0).data)
    assert "**local cloud**" in markdown
    for stack in STACKS:
        assert f"| {stack} | up | updated |" in markdown
    assert "`password`: `[secret]`" in markdown
    assert str(outputs(shared, shared["name"])["database"]["password"]) not in markdown


def test_a_forced_stack_is_the_only_engine_call_and_targeting_reads_upstream_from_state(
    shared: dict[str, Any], in_process: None
) -> None:
    """The deploy flow, in-process, on the local cloud: an unchanged environment makes no engine
    call; `force` on one stack runs exactly that stack; a changed setting of the app, targeted
    alone, updates only the app, with the database's outputs read from state."""
    from flows.pipeline import deploy

    name = shared["name"]
    again = deploy(environment=name)
    assert again["engine_calls"] == []
    assert {s: statuses(again)[s] for s in (*STACKS, "migrate")} == {
        "networking": "unchanged",
        "database": "unchanged",
        "app": "unchanged",
        "migrate": "unchanged",
    }
    forced = deploy(environment=name, stacks=["networking"], force=True)
    assert forced["engine_calls"] == ["up:networking"]
    assert statuses(forced) == {"networking": "unchanged"}  # ran, changed nothing

    declare(shared["variables"], name, app={"desired_count": 2})  # the environment's file
    try:
        targeted = deploy(environment=name, stacks=["app"])
    finally:
        declare(shared["variables"], name)  # back to its kind's defaults
    assert targeted["engine_calls"] == ["up:app"]
    assert [s["stack"] for s in targeted["stacks"]] == ["app"]
    assert statuses(targeted) == {"app": "updated"}
    ecs = shared["cloud"].client("ecs")
    cluster = f"stackflow-{name}-cluster"
    [service] = ecs.describe_services(cluster=cluster, services=[f"stackflow-{name}-app"])[
        "services"
    ]
    assert service["desiredCount"] == 2
    back = deploy(environment=name, stacks=["app"])
    assert back["engine_calls"] == ["up:app"] and statuses(back) == {"app": "updated"}


def test_preview_names_each_resource_and_the_properties_that_change_on_the_local_cloud(
    shared: dict[str, Any],
) -> None:
    """`preview` through the CLI on the local cloud, with two app settings changed in the
    environment's file: the ECS service is an in-place update of `desiredCount` (1 => 2), the task
    definition a replacement forced by its container definitions; `--json` carries the same data,
    the secret database password appears in neither, and nothing is deployed."""
    env, name = shared["env"], shared["name"]
    db_password = str(outputs(shared, name)["database"]["password"])
    before = outputs(shared, name)["app"]

    declare(shared["variables"], name, app={"desired_count": 2, "cpu": 512})
    try:
        text = cli(env, "preview", "--env", name, "--stacks", "app")
        as_json = cli(env, "preview", "--env", name, "--stacks", "app", "--json")
    finally:
        declare(shared["variables"], name)  # as deployed, for the tests after this one
    assert text.returncode == 0, text.stdout + text.stderr
    lines = text.stdout.splitlines()
    service = next(i for i, line in enumerate(lines) if "aws:ecs/service:Service" in line)
    assert lines[service].split()[0] == "~"
    assert "desiredCount: 1 => 2" in "\n".join(lines[service:])
    task_def = next(i for i, line in enumerate(lines) if "aws:ecs/taskDefinition" in line)
    assert lines[task_def].split()[0] == "+-"
    assert any(
        "(forces replacement)" in line and "cpu" in line.lower() for line in lines[task_def:]
    ), text.stdout

    # the run's page in the Prefect UI, at the path the UI serves
    [link] = re.findall(r"^Prefect UI: (\S+)$", text.stdout, re.MULTILINE)
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/runs/flow-run/[0-9a-f-]{36}", link), link

    assert as_json.returncode == 0, as_json.stderr
    summary = json.loads(as_json.stdout)
    assert summary["ui_url"].startswith(link.rsplit("/", 1)[0])
    [app] = summary["stacks"]
    changes = {r["type"]: r for r in app["resources"]}
    svc = changes["aws:ecs/service:Service"]
    assert svc["change"] == "update" and svc["replaced_by"] == []
    [count] = [p for p in svc["properties"] if p["name"] == "desiredCount"]
    assert (count["old"], count["new"]) == (1, 2)
    td = changes["aws:ecs/taskDefinition:TaskDefinition"]
    assert td["change"] == "replace" and "cpu" in td["replaced_by"]
    assert app["changes"]["update"] >= 1 and app["changes"]["replace"] >= 1
    for out in (text.stdout, text.stderr, as_json.stdout, as_json.stderr):
        assert db_password not in out
    assert outputs(shared, name)["app"] == before  # a preview deploys nothing


def test_refresh_runs_independent_stacks_at_the_same_time(
    shared: dict[str, Any], in_process: None
) -> None:
    """Refresh needs no upstream outputs, so the three stacks refresh at once: with 3 s of local
    cloud latency on reading one resource of each stack, their refreshes overlap in time."""
    from flows.pipeline import refresh
    from stackflow.localcloud.knobs import clear_knobs, set_knobs

    slow = {
        "aws:ec2/vpc:Vpc": 3,
        "aws:rds/instance:Instance": 3,
        "aws:ecs/cluster:Cluster": 3,
    }
    set_knobs(shared["cloud"].url, {"latency_s": slow})
    try:
        summary = refresh(environment=shared["name"])
    finally:
        clear_knobs(shared["cloud"].url)
    assert statuses(summary) == {s: "refreshed" for s in STACKS}
    spans = [intervals(shared["state"], shared["name"], s)[-1] for s in STACKS]
    assert all(end - start >= 3 for start, end in spans), spans
    assert max(start for start, _ in spans) < min(end for _, end in spans), spans


def test_drift_fails_the_flow_run_and_names_the_stack(
    shared: dict[str, Any], in_process: None
) -> None:
    """A tag added to the VPC through the AWS API of the local cloud: the drift flow fails with
    DriftDetected naming networking (the CLI's drift exit code is tested below)."""
    from flows.pipeline import DriftDetected, drift

    name = shared["name"]
    clean = drift(environment=name, stacks=["networking"])
    assert clean["engine_calls"] == ["drift:networking"]
    assert statuses(clean) == {"networking": "no-drift"}
    vpc_id = outputs(shared, name)["networking"]["vpc_id"]
    ec2 = shared["cloud"].client("ec2")
    ec2.create_tags(Resources=[vpc_id], Tags=[{"Key": "flow-drift", "Value": "yes"}])
    try:
        state = drift(environment=name, stacks=["networking"], return_state=True)
        with pytest.raises(DriftDetected, match="networking"):
            state.result()
    finally:
        ec2.delete_tags(Resources=[vpc_id], Tags=[{"Key": "flow-drift"}])
    # put back by hand: the stack's state was not touched, so drift finds nothing again
    assert statuses(drift(environment=name, stacks=["networking"])) == {"networking": "no-drift"}


def test_refresh_of_an_untouched_environment_changes_nothing_and_drift_is_found_and_put_back(
    shared: dict[str, Any],
) -> None:
    """Local cloud: a refresh right after `up` reads every resource type back unchanged; a tag added
    to the VPC, a log group deleted and the database password pasted into a tag of the RDS
    instance through the AWS API are drift, named in `drift`'s summary (resource, property, value
    stored, value found; the password masked there and in the log), and the next `up` restores
    all three."""
    real, env_name = shared, shared["name"]
    refresh = cli(real["env"], "refresh", "--env", env_name)
    assert refresh.returncode == 0, refresh.stdout + refresh.stderr
    assert summary_of(refresh) == {s: "refreshed" for s in STACKS}
    for line in refresh.stdout.splitlines():
        if line.split()[:1] and line.split()[0] in STACKS:
            assert line.split()[2:6] == ["0", "0", "0", "0"], line  # nothing created/updated/...

    out = outputs(real, env_name)
    cloud = real["cloud"]
    ec2, logs = cloud.client("ec2"), cloud.client("logs")
    vpc_id = out["networking"]["vpc_id"]
    ec2.create_tags(Resources=[vpc_id], Tags=[{"Key": "console-edit", "Value": "yes"}])
    group = f"/ecs/stackflow-{env_name}-app"
    logs.delete_log_group(logGroupName=group)
    password = str(out["database"]["password"])
    rds = cloud.client("rds")
    arn = rds.describe_db_instances(DBInstanceIdentifier=out["database"]["instance_id"])[
        "DBInstances"
    ][0]["DBInstanceArn"]
    rds.add_tags_to_resource(ResourceName=arn, Tags=[{"Key": "pasted", "Value": password}])

    drift = cli(real["env"], "drift", "--env", env_name)
    assert drift.returncode == 3, drift.stdout + drift.stderr
    assert summary_of(drift) == {s: "drift" for s in STACKS}
    said = drift.stdout
    assert re.search(
        rf"^{env_name}/networking: drift\n +~ aws:ec2/vpc:Vpc  vpc\n"
        r' +tags\["console-edit"\]: stored \(none\), found yes$',
        said,
        re.M,
    ), said
    assert re.search(
        r"^ +- aws:cloudwatch/logGroup:LogGroup  app-logs\n +gone from the cloud", said, re.M
    ), said
    assert re.search(
        r"^ +~ aws:rds/instance:Instance  mysql\n +tags.pasted: stored \(none\), found \[secret\]$",
        said,
        re.M,
    ), said
    log = max((real["state"] / "logs").glob(f"drift-{env_name}-*.log"))  # this command's
    for text in (drift.stdout, drift.stderr, log.read_text()):
        assert password not in text

    fix = cli(real["env"], "up", "--env", env_name)
    assert fix.returncode == 0, fix.stdout + fix.stderr
    assert summary_of(fix)["networking"] == "updated"
    assert summary_of(fix)["database"] == "updated"
    tags = {t["Key"] for t in ec2.describe_vpcs(VpcIds=[vpc_id])["Vpcs"][0].get("Tags", [])}
    assert "console-edit" not in tags
    assert logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]
    assert "pasted" not in {
        t["Key"] for t in rds.list_tags_for_resource(ResourceName=arn)["TagList"]
    }


def test_the_local_cloud_keeps_its_resources_across_a_restart(shared: dict[str, Any]) -> None:
    """Local cloud: after `cloud stop`, the next `up` starts it again although every stack is
    skipped (no engine call would have): the replayed journal brings back every resource with the
    same ids, every database server for migrate and app stand-in for verify; `cloud start` then
    reuses that server, and `drift` finds nothing."""
    real, env_name = shared, shared["name"]
    before = outputs(real, env_name)

    stop = cli(real["env"], "cloud", "stop")
    assert stop.returncode == 0, stop.stdout + stop.stderr
    again = cli(real["env"], "up", "--env", env_name)
    assert again.returncode == 0, again.stdout + again.stderr
    summary = summary_of(again)
    assert [summary[s] for s in ("networking", "database", "app")] == ["unchanged"] * 3
    assert summary["migrate"] == "unchanged"  # it reached the database the restart serves
    assert summary["verify"] == "healthy"  # the app stand-in answers again
    start = cli(real["env"], "cloud", "start")
    assert start.returncode == 0, start.stdout + start.stderr
    assert "local cloud" in start.stdout

    drift = cli(real["env"], "drift", "--env", env_name)
    assert drift.returncode == 0, drift.stdout + drift.stderr
    assert outputs(real, env_name) == before
    ec2 = boto3.client(
        "ec2",
        region_name="eu-west-1",
        endpoint_url=real["cloud"].url,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    assert ec2.describe_vpcs(VpcIds=[before["networking"]["vpc_id"]])["Vpcs"]
    db = before["database"]
    with connect(db) as conn:
        assert conn.open


def _changes(summary: dict[str, Any], stack: str) -> dict[str, dict[str, Any]]:
    """type -> resource, as `preview --json` lists what a stack would change."""
    [found] = [s for s in summary["stacks"] if s["stack"] == stack]
    return {r["type"]: r for r in found["resources"]}


def _property(resource: dict[str, Any], prefix: str) -> dict[str, Any]:
    [found] = [p for p in resource["properties"] if p["name"].startswith(prefix)]
    return found


def test_a_third_az_and_a_new_database_port_preview_what_up_then_does_on_the_local_cloud(
    shared: dict[str, Any],
) -> None:
    """Local cloud: the environment's file moves to three AZs and MySQL port 3307. `preview`
    shows what follows downstream, not only in networking: the DB subnet group, the load
    balancer and the ECS service each get the new subnet (known after networking's up), the
    task definition's DB_PORT 3306 => 3307. The approval plan of a gated `up --yes` shows the
    same, its up applies exactly those changes (Pulumi's own history counts them) and the cloud
    holds three subnets and the new port. (Runs after the tests that need the defaults; the next
    test destroys the environment.)"""
    env, name = shared["env"], shared["name"]
    sections: dict[str, Any] = {"network": {"az_count": 3}, "database": {"port": 3307}}
    declare(shared["variables"], name, **sections)
    previewed = cli(env, "preview", "--env", name, "--json")
    assert previewed.returncode == 0, previewed.stdout + previewed.stderr
    summary = json.loads(previewed.stdout)
    notes = {s["stack"]: s["note"] for s in summary["stacks"]}
    assert "networking: public_subnet_ids, private_subnet_ids known after its up" in notes["app"]
    assert "database: port changes" in notes["app"]

    db = _changes(summary, "database")
    subnets = db["aws:rds/subnetGroup:SubnetGroup"]
    assert subnets["change"] == "update"
    assert _property(subnets, "subnetIds")["new"] == "(known after apply)"
    port = _property(db["aws:rds/instance:Instance"], "port")
    assert (port["old"], port["new"]) == (3306, 3307)
    app = _changes(summary, "app")
    alb = app["aws:lb/loadBalancer:LoadBalancer"]
    assert alb["change"] == "update" and _property(alb, "subnets[2]")["kind"] == "add"
    service = app["aws:ecs/service:Service"]
    assert service["change"] == "update"
    assert _property(service, "networkConfiguration.subnets[2]")["new"] == "(known after apply)"
    task = app["aws:ecs/taskDefinition:TaskDefinition"]
    moved = _property(task, "containerDefinitions")
    assert task["change"] == "replace" and (moved["old"], moved["new"]) == ("3306", "3307")
    assert outputs(shared, name)["database"]["port"] == 3306  # a preview deploys nothing

    declare(shared["variables"], name, approval={"required": True}, **sections)
    try:
        up = cli(env, "up", "--env", name, "--yes")
    finally:
        declare(shared["variables"], name)  # the file as the other tests know it
    assert up.returncode == 0, up.stdout + up.stderr
    plan = up.stderr
    for shown in (
        r"~ aws:rds/subnetGroup:SubnetGroup  db-subnets\n +subnetIds\[2\]: \+ \(known after apply\)",
        r"~ aws:lb/loadBalancer:LoadBalancer  alb\n +subnets\[2\]: \+ \(known after apply\)",
        r"containerDefinitions\[0\]\.environment\[\d\]\.value: 3306 => 3307  \(forces replacement\)",
        r"networkConfiguration\.subnets\[2\]: \+ \(known after apply\)",
    ):
        assert re.search(shown, plan), plan
    assert "approval (round 1): approved via command line --yes" in up.stdout
    assert summary_of(up) == {
        "networking": "updated",
        "database": "updated",
        "migrate": "unchanged",
        "app": "updated",
        "verify": "healthy",
    }
    # What the up did is what the preview said, stack by stack (Pulumi's record of the update)
    for stack in STACKS:
        done = update_history(shared["state"], name, stack)[-1]["resourceChanges"]
        [said] = [s["changes"] for s in summary["stacks"] if s["stack"] == stack]
        assert {k: v for k, v in done.items() if k != "same" and v} == {
            k: v for k, v in said.items() if k != "same" and v
        }, (stack, done, said)

    out = outputs(shared, name)
    cloud = shared["cloud"]
    [group] = cloud.client("rds").describe_db_subnet_groups(
        DBSubnetGroupName=f"stackflow-{name}-db-subnets"
    )["DBSubnetGroups"]
    assert len(group["Subnets"]) == 3 and out["database"]["port"] == 3307
    [lb] = cloud.client("elbv2").describe_load_balancers(Names=[f"stackflow-{name}-alb"])[
        "LoadBalancers"
    ]
    assert len(lb["AvailabilityZones"]) == 3
    ecs = cloud.client("ecs")
    [svc] = ecs.describe_services(
        cluster=out["app"]["cluster_name"], services=[out["app"]["service_name"]]
    )["services"]
    assert len(svc["networkConfiguration"]["awsvpcConfiguration"]["subnets"]) == 3
    task_def = ecs.describe_task_definition(taskDefinition=svc["taskDefinition"])
    variables = task_def["taskDefinition"]["containerDefinitions"][0]["environment"]
    assert {v["name"]: v["value"] for v in variables}["DB_PORT"] == "3307"


def test_two_environments_have_their_own_database_servers_and_destroy_leaves_the_other(
    shared: dict[str, Any], real: dict[str, Any]
) -> None:
    """Local cloud: dev and staging side by side get separate MariaDB servers with separate
    credentials; `destroy --yes` of dev leaves nothing of dev in the cloud, and staging works.
    (Last of the tests on the shared environment: it destroys it.)"""
    dev, staging = shared["name"], unique("staging")
    result = cli(real["env"], "up", "--env", staging, "--stacks", "networking,database")
    assert result.returncode == 0, result.stdout + result.stderr
    # staging adds the NAT types (elastic IP, NAT gateway, private route): they read back too
    refresh = cli(real["env"], "refresh", "--env", staging, "--stacks", "networking")
    assert refresh.returncode == 0, refresh.stdout + refresh.stderr
    row = next(
        line.split() for line in refresh.stdout.splitlines() if line.startswith("networking")
    )
    assert row[1:6] == ["refreshed", "0", "0", "0", "0"] and int(row[6]) >= 27, row
    dev_db, staging_db = outputs(shared, dev)["database"], outputs(real, staging)["database"]
    assert dev_db["host"] != staging_db["host"]
    assert dev_db["password"] != staging_db["password"]

    gone = cli(shared["env"], "destroy", "--env", dev, "--yes")
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert "local cloud" in gone.stdout
    assert summary_of(gone) == {s: "destroyed" for s in STACKS}
    # in reverse order: each stack's destroy began after its downstream's had ended
    ends = {
        s: [r for r in update_history(shared["state"], dev, s) if r["kind"] == "destroy"]
        for s in STACKS
    }
    assert all(len(v) == 1 for v in ends.values()), ends
    assert ends["app"][0]["endTime"] <= ends["database"][0]["startTime"]
    assert ends["database"][0]["endTime"] <= ends["networking"][0]["startTime"]

    listed = cli(real["env"], "cloud", "ls", "--env", dev, "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["resources"] == []
    assert "local_cloud" in json.loads(listed.stdout)
    with pytest.raises(pymysql.err.OperationalError):
        connect(dev_db, connect_timeout=3)
    with connect(staging_db) as conn:
        assert conn.open


def test_destroying_prod_is_refused_before_anything_is_deleted(real: dict[str, Any]) -> None:
    """Local cloud: prod's database has deletion protection; `destroy --yes` refuses before it
    deletes anything, naming deletion protection, and moto (standing in for AWS) refuses a direct
    delete with AWS's own error code."""
    prod = unique("prod")
    # prod's `up` waits for approval of its plan: --yes approves the plan it prints
    up = cli(real["env"], "up", "--env", prod, "--stacks", "networking,database", "--yes")
    assert up.returncode == 0, up.stdout + up.stderr
    assert "approval (round 1): approved via command line --yes" in up.stdout, up.stdout

    refused = cli(real["env"], "destroy", "--env", prod, "--yes")
    assert refused.returncode != 0
    assert "deletion protection" in refused.stderr
    assert "Traceback" not in refused.stdout + refused.stderr

    rds = real["cloud"].client("rds")
    identifier = f"stackflow-{prod}-mysql"
    assert rds.describe_db_instances(DBInstanceIdentifier=identifier)["DBInstances"]
    with pytest.raises(rds.exceptions.ClientError) as info:
        rds.delete_db_instance(DBInstanceIdentifier=identifier, SkipFinalSnapshot=True)
    assert info.value.response["Error"]["Code"] == "InvalidParameterCombination"
    db = outputs(real, prod)["database"]
    with connect(db) as conn:
        assert conn.open


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return found


def _cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_a_killed_cli_leaves_no_plugin_behind(real: dict[str, Any]) -> None:
    """Local cloud: a provider plugin whose call hangs (the hang knob) exits as soon as the Pulumi
    CLI that started it is killed, because the CLI's end closes the plugin's stdin."""
    import signal

    from stackflow.localcloud.knobs import clear_knobs, set_knobs

    name = unique("dev")
    hang = {"kind": "hang", "environment": name, "type": "aws:ec2/vpc:Vpc"}
    set_knobs(real["cloud"].url, {"faults": [hang]})
    run = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "flows" / "run.py"),
            "up",
            "--env",
            name,
            "--stacks",
            "networking",
        ],
        env=real["env"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        plugins: list[int] = []
        deadline = time.monotonic() + 120
        while not plugins and time.monotonic() < deadline:
            clis = [p for p in _children(run.pid) if _cmdline(p).split(" ")[0].endswith("pulumi")]
            for cli_pid in clis:
                plugins = [
                    p
                    for p in _children(cli_pid)
                    if "stackflow.localcloud.plugin aws" in _cmdline(p)
                    or "pulumi-resource-aws" in _cmdline(p)
                ]
                if plugins:
                    os.kill(cli_pid, signal.SIGKILL)
            time.sleep(0.2)
        assert plugins, "the aws plugin never started"
        deadline = time.monotonic() + 10
        while any(_cmdline(p) for p in plugins) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in plugins if _cmdline(p)], "a plugin outlived the killed CLI"
    finally:
        run.kill()
        run.wait(timeout=30)
        clear_knobs(real["cloud"].url)


def test_preview_of_a_new_environment_shows_what_settings_decide_and_changes_nothing(
    real: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The preview flow on the local cloud, for an environment never deployed: networking plans
    its creates; database and app are previewed against what networking's and the database's
    previews know (their ids known only after their up), and say so; each create lists the values
    settings decide and "known after apply" for the rest; no environment record, and nothing in
    the local cloud."""
    from flows.pipeline import preview

    use(real["variables"], monkeypatch)
    name = unique("dev")
    summary = preview(environment=name)
    by = {s["stack"]: s for s in summary["stacks"]}
    assert by["networking"]["status"] == "previewed"
    assert by["networking"]["changes"]["create"] >= 20
    assert "networking: vpc_id, public_subnet_ids, private_subnet_ids" in by["database"]["note"]
    assert "database: host, password, password_secret_arn known after" in by["app"]["note"]
    assert by["database"]["changes"]["create"] > 0 and by["app"]["changes"]["create"] > 0
    created = {r["type"]: r for r in by["database"]["resources"]}
    mysql = {p["name"]: p["new"] for p in created["aws:rds/instance:Instance"]["properties"]}
    assert mysql["port"] == 3306 and mysql["engineVersion"] == "8.0"
    assert mysql["vpcSecurityGroupIds"] == ["(known after apply)"]
    assert mysql["password"] == "(known after apply)"  # generated by its up, then secret
    subnets = created["aws:rds/subnetGroup:SubnetGroup"]["properties"]
    assert {p["name"]: p["new"] for p in subnets}["subnetIds"] == ["(known after apply)"] * 2
    assert not (real["state"] / "environments").exists()
    listed = cli(real["env"], "cloud", "ls", "--env", name, "--json")
    assert json.loads(listed.stdout)["resources"] == []


def test_destroying_prod_without_confirmation_is_refused_before_the_engine_runs(
    real: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The destroy flow, in-process: prod without `confirm` fails with ConfirmationRequired naming
    the environment, before any engine call (the state folder is not even created)."""
    from flows.pipeline import destroy
    from stackflow.errors import ConfirmationRequired

    use(real["variables"], monkeypatch)
    state = destroy(environment=unique("prod"), return_state=True)
    with pytest.raises(ConfirmationRequired, match="prod-"):
        state.result()
    assert not (real["state"] / "pulumi-local").exists()
