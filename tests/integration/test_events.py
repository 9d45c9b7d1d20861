"""Prefect events emitted by the flows, read back from a real Prefect server's event API, and the
automation a drift event starts. The flows run on the real Pulumi engine and the session's
**local cloud** (moto on loopback, not AWS); drift is made the way it happens, by a change made
through the AWS API behind stackflow's back. The server, its event store and its automation
services are real."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.realenv import declare, outputs, real_variables, unique
from tests.webhook import Listener

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
NOTIFY_YAML = ROOT / "deployments" / "automations" / "drift-notify.yaml"
PLACEHOLDER_ID = "00000000-0000-0000-0000-000000000000"
EVENT_WAIT_S = 60.0  # events reach the server's store asynchronously (client worker, persister)


@pytest.fixture
def real_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefect_server: Any, local_cloud: Any
) -> Iterator[dict[str, Any]]:
    """STACKFLOW_* settings in this process for one test: its own state folder, the session's
    local cloud."""
    variables = real_variables(tmp_path / "state", local_cloud, prefect_server)
    for key in [k for k in os.environ if k.startswith("STACKFLOW_")]:
        monkeypatch.delenv(key)
    for key, value in variables.items():
        monkeypatch.setenv(key, value)
    yield {"state_dir": tmp_path / "state", "variables": variables, "cloud": local_cloud}
    # send what the flows left queued while the server is still up (else the process's exit
    # retries it against a stopped server for about a minute)
    from stackflow.localprefect import drain_prefect_queues

    drain_prefect_queues()


def drift_behind_our_back(real_env: dict[str, Any], environment: str) -> None:
    """Tag the VPC and the RDS instance through the local cloud's AWS API, as a console edit would;
    someone also pastes the database password into a tag of the instance (drift must mask it)."""
    out = outputs(real_env["variables"], environment)
    cloud = real_env["cloud"]
    tag = [{"Key": "console-edit", "Value": "yes"}]
    cloud.client("ec2").create_tags(Resources=[out["networking"]["vpc_id"]], Tags=tag)
    rds = cloud.client("rds")
    [instance] = rds.describe_db_instances(DBInstanceIdentifier=out["database"]["instance_id"])[
        "DBInstances"
    ]
    pasted = [{"Key": "pasted", "Value": str(out["database"]["password"])}]
    rds.add_tags_to_resource(ResourceName=instance["DBInstanceArn"], Tags=tag + pasted)


def read_events(environment: str, since: datetime, done: Callable[[list[Any]], bool]) -> list[Any]:
    """stackflow.* events labelled with `environment` since `since`, polled until `done`."""
    from prefect.client.orchestration import get_client
    from prefect.events.filters import (
        EventFilter,
        EventNameFilter,
        EventOccurredFilter,
        EventResourceFilter,
    )
    from prefect.events.schemas.events import ResourceSpecification

    deadline = time.monotonic() + EVENT_WAIT_S
    events: list[Any] = []
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            page = client.read_events(
                filter=EventFilter(
                    # built each time: `until` defaults to the moment the filter is made
                    occurred=EventOccurredFilter(since=since, until=datetime.now(UTC)),
                    event=EventNameFilter(prefix=["stackflow."]),
                    resource=EventResourceFilter(
                        labels=ResourceSpecification({"stackflow.environment": environment})
                    ),
                ),
                limit=50,  # the server's maximum page
            )
            events = list(page.events)
            if done(events):
                return events
            time.sleep(0.5)
    return events


def _drifted(kind: str, name: str, *properties: tuple[str, Any, Any]) -> dict[str, Any]:
    """One resource as drift reports it (`--json`, the event), its URN aside: what moved, the
    value stored and the value found."""
    return {
        "type": kind,
        "name": name,
        "drift": "changed",
        "properties": [{"name": n, "stored": s, "found": f} for n, s, f in properties],
    }


VPC_DRIFT = _drifted("aws:ec2/vpc:Vpc", "vpc", ('tags["console-edit"]', None, "yes"))
INSTANCE_DRIFT = _drifted(
    "aws:rds/instance:Instance",
    "mysql",
    ('tags["console-edit"]', None, "yes"),
    ("tags.pasted", None, "[secret]"),  # the password, masked
)


def _by_name(resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drift's resources without their URNs (checked to be Pulumi's)."""
    assert all(r["urn"].startswith("urn:pulumi:") for r in resources), resources
    return [{k: v for k, v in r.items() if k != "urn"} for r in resources]


def latest_artifact(key: str) -> str:
    """The markdown of the newest version of a Prefect artifact."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key]))
        )
    assert found, f"no {key} artifact"
    return str(max(found, key=lambda a: a.created or 0).data)


def test_every_operation_emits_labelled_events(real_env: dict[str, Any]) -> None:
    """Local cloud: stack.updated / stack.failed / drift.detected / stack.previewed /
    stack.destroyed, each naming environment and stack, each inside its flow run; the database
    password is in none of them. Drift (a tag on the VPC, two on the RDS instance, one of them
    the password pasted) is named in the summary `--json` prints, in each drift event and in the
    drift artifact: resource, property, stored value, value found, the password masked."""
    from flows.pipeline import DriftDetected, PipelineFailed, deploy, destroy, drift, preview
    from stackflow.localcloud.knobs import clear_knobs, set_knobs

    env = unique("ev")
    since = datetime.now(UTC) - timedelta(seconds=1)
    deploy(environment=env, stacks=["networking", "database"])  # two stacks updated
    fault = {"kind": "permanent", "environment": env, "type": "aws:ecs/cluster:Cluster"}
    set_knobs(real_env["cloud"].url, {"faults": [fault]})
    try:
        with pytest.raises(PipelineFailed, match="app"):
            deploy(environment=env, stacks=["app"], return_state=True).result()
    finally:
        clear_knobs(real_env["cloud"].url)
    drift_behind_our_back(real_env, env)
    with pytest.raises(DriftDetected) as found:
        drift(environment=env, stacks=["networking", "database"], return_state=True).result()
    password = str(outputs(real_env["variables"], env)["database"]["password"])
    # what moved, as `drift --json` prints it: resource, property, stored and found, masked
    assert found.value.summary is not None
    drifted = {s["stack"]: _by_name(s["resources"]) for s in found.value.summary["stacks"]}
    assert drifted == {"networking": [VPC_DRIFT], "database": [INSTANCE_DRIFT]}, drifted
    assert password not in json.dumps(found.value.summary)
    preview(environment=env, stacks=["networking"])
    destroy(environment=env)

    expected = Counter(
        {
            ("stackflow.stack.previewed", "networking"): 1,
            ("stackflow.stack.destroyed", "networking"): 1,
            ("stackflow.stack.destroyed", "database"): 1,
            ("stackflow.stack.destroyed", "app"): 1,
            ("stackflow.stack.updated", "networking"): 1,
            ("stackflow.stack.updated", "database"): 1,
            ("stackflow.stack.failed", "app"): 1,
            ("stackflow.drift.detected", "networking"): 1,
            ("stackflow.drift.detected", "database"): 1,
        }
    )
    # and once per run, not per stack, what a person may want to hear of (the notifications)
    once = Counter(
        {
            "stackflow.run.failed": 1,
            "stackflow.drift.found": 1,
            "stackflow.environment.destroyed": 1,
        }
    )
    everything = read_events(env, since, lambda got: len(got) >= expected.total() + once.total())
    events = [e for e in everything if "stackflow.stack" in e.resource]
    got = Counter((e.event, e.resource["stackflow.stack"]) for e in events)
    assert got == expected
    whole = {e.event: e for e in everything if "stackflow.stack" not in e.resource}
    assert Counter(e.event for e in everything if e.event in once) == once
    assert whole["stackflow.run.failed"].payload["stacks"] == ["app"]
    assert "api error InvalidParameterValue" in whole["stackflow.run.failed"].payload["error"]
    assert sorted(whole["stackflow.drift.found"].payload["stacks"]) == ["database", "networking"]
    assert whole["stackflow.environment.destroyed"].payload["what"] == "was destroyed"
    for e in whole.values():
        assert e.resource.id == f"stackflow.environment.{env}"
        assert e.payload["target"] == "local cloud"
        assert password not in e.model_dump_json()

    flow_runs = {
        "stackflow.stack.updated": "deploy",
        "stackflow.stack.failed": "deploy",
        "stackflow.drift.detected": "drift",
        "stackflow.stack.previewed": "preview",
        "stackflow.stack.destroyed": "destroy",
    }
    for e in events:
        stack = e.resource["stackflow.stack"]
        assert e.resource["stackflow.environment"] == env
        assert e.resource.id == f"stackflow.stack.{env}.{stack}"
        assert e.resource.name == f"{env}/{stack}"
        assert e.payload["target"] == "local cloud"
        # emitted inside the flow run, which Prefect adds as a related resource
        runs = [r for r in e.related if r.role == "flow-run"]
        assert len(runs) == 1, e.related
        assert runs[0].name == f"{flow_runs[e.event]}-{env}"
        assert password not in e.model_dump_json()
    [failed] = [e for e in events if e.event == "stackflow.stack.failed"]
    assert failed.payload["operation"] == "up"
    assert "api error InvalidParameterValue" in failed.payload["note"]  # why it failed
    drift_events = {
        e.resource["stackflow.stack"]: _by_name(e.payload["resources"])
        for e in events
        if e.event == "stackflow.drift.detected"
    }
    assert drift_events == {"networking": [VPC_DRIFT], "database": [INSTANCE_DRIFT]}
    artifact = latest_artifact(f"drift-{env}")
    assert "## Drift" in artifact and password not in artifact
    assert (
        '| networking | changed | `aws:ec2/vpc:Vpc` | vpc | `tags["console-edit"]` | (none) | yes |'
        in artifact
    )
    assert (
        "| database | changed | `aws:rds/instance:Instance` | mysql | `tags.pasted` | (none) | [secret] |"
        in artifact
    )
    [previewed] = [e for e in events if e.event == "stackflow.stack.previewed"]
    assert previewed.payload["operation"] == "preview"
    assert isinstance(previewed.payload["resources"], list)  # per resource, as `preview --json`
    assert {e.payload["operation"] for e in events if "destroyed" in e.event} == {"destroy"}


def test_cleanup_expired_destroys_an_expired_pr_environment(real_env: dict[str, Any]) -> None:
    """Local cloud: a pr- environment past its TTL is destroyed, forgotten and announced; one
    within its TTL is kept, stacks and resources."""
    from flows.cleanup import cleanup_expired
    from flows.pipeline import deploy
    from stackflow.dag import bare_spec
    from stackflow.engine import get_engine
    from stackflow.environment_records import list_environments, records_of
    from stackflow.settings import get_settings
    from tests.fixtures.template import template_graph

    old, young = unique("pr"), unique("pr")
    since = datetime.now(UTC) - timedelta(seconds=1)
    declare(real_env["variables"], old, ttl_hours=0.0001)  # 0.36 s
    deploy(environment=old, stacks=["networking"])
    declare(real_env["variables"], young, ttl_hours=24)
    deploy(environment=young, stacks=["networking"])
    store = records_of(get_settings(environment=old))  # beside the backend: every worker's
    records = {r.name: r for r in list_environments(store)}
    assert records[old].expired() and not records[young].expired()

    assert cleanup_expired(dry_run=True) == {"expired": [old], "destroyed": [], "dry_run": True}
    assert {r.name for r in list_environments(store)} == {old, young}

    assert cleanup_expired() == {"expired": [old], "destroyed": [old], "dry_run": False}
    assert [r.name for r in list_environments(store)] == [young]
    for env, kept in ((old, False), (young, True)):
        settings = get_settings(environment=env)
        engine = get_engine(settings)
        assert engine.exists(bare_spec(settings, "networking")) is kept, env
        for stack in template_graph().stacks:
            if stack != "networking":
                assert not engine.exists(bare_spec(settings, stack)), f"{env}/{stack}"
    ec2 = real_env["cloud"].client("ec2")
    for env, count in ((old, 0), (young, 1)):
        vpcs = ec2.describe_vpcs(Filters=[{"Name": "tag:environment", "Values": [env]}])
        assert len(vpcs["Vpcs"]) == count, env

    events = read_events(
        old, since, lambda got: any(e.event == "stackflow.environment.expired" for e in got)
    )
    [expired] = [e for e in events if e.event == "stackflow.environment.expired"]
    assert expired.resource.id == f"stackflow.environment.{old}"
    assert expired.resource["stackflow.environment"] == old
    assert expired.payload["ttl_hours"] == 0.0001
    # emitted by the same run as the old one's, so it would be stored by now
    kept = read_events(young, since, lambda got: True)
    assert [e.event for e in kept if e.event == "stackflow.environment.expired"] == []


def create_example_notify_automation(block_id: Any, tmp_path: Path) -> uuid.UUID:
    """deployments/automations/drift-notify.yaml with the block id filled in, created with the
    command the README gives (`prefect automation create --from-file`)."""
    text = NOTIFY_YAML.read_text()
    assert PLACEHOLDER_ID in text
    path = tmp_path / "drift-notify.yaml"
    path.write_text(text.replace(PLACEHOLDER_ID, str(block_id)))
    prefect = str(Path(sys.executable).with_name("prefect"))
    result = subprocess.run(
        [prefect, "automation", "create", "--from-file", str(path)],
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    found = re.search(
        r"Created automation 'stackflow drift notify' with id\s+([0-9a-f-]{36})", output
    )
    assert found, output
    return uuid.UUID(found.group(1))


def test_drift_runs_preview_and_notifies_through_automations(
    real_env: dict[str, Any], tmp_path: Path
) -> None:
    """Local cloud: what one drift run (two drifted stacks, two events) starts on the server: exactly one
    preview run of that environment (the automation serve.py attaches to preview/<env>), and one
    notification per drifted stack (the example in deployments/automations/drift-notify.yaml,
    sent by the server through a custom-webhook block to a local listener)."""
    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.client.schemas.sorting import FlowRunSort

    from deployments.serve import build_deployments
    from flows.pipeline import DriftDetected, deploy, drift

    env = unique("dr")
    [preview] = [d for d in build_deployments([env]) if d.flow_name == "preview" and d.name == env]
    deployment_id = preview.apply()
    listener = Listener()
    block_name = f"drift-{env}"
    block_id = CustomWebhookNotificationBlock(
        name="stackflow drift (test)",
        url=listener.url,
        json_data={"subject": "{{subject}}", "body": "{{body}}"},
    ).save(block_name)
    notify_id = create_example_notify_automation(block_id, tmp_path)

    def preview_runs() -> list[Any]:
        return list(
            client.read_flow_runs(
                deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id])),
                sort=FlowRunSort.EXPECTED_START_TIME_DESC,
                limit=50,
            )
        )

    def mine() -> list[dict[str, Any]]:
        return [m for m in listener.received if f"drift in {env}/" in m.get("subject", "")]

    with get_client(sync_client=True) as client:
        try:
            deploy(environment=env, stacks=["networking", "database"])
            since = datetime.now(UTC) - timedelta(seconds=1)
            drift_behind_our_back(real_env, env)
            with pytest.raises(DriftDetected):
                drift(environment=env, return_state=True).result()
            drifted = read_events(
                env,
                since,
                lambda got: sum(e.event == "stackflow.drift.detected" for e in got) >= 2,
            )
            assert sum(e.event == "stackflow.drift.detected" for e in drifted) == 2
            password = str(outputs(real_env["variables"], env)["database"]["password"])

            deadline = time.monotonic() + EVENT_WAIT_S
            while (not preview_runs() or len(mine()) < 2) and time.monotonic() < deadline:
                time.sleep(0.5)
            time.sleep(2)  # room for a wrong second preview run or a third message to show up

            runs = preview_runs()
            assert len(runs) == 1, f"{len(runs)} preview runs for one drift run"
            [run] = runs
            assert run.parameters == {"environment": env}
            assert run.created_by is not None and run.created_by.type == "AUTOMATION"
            assert run.created_by.display_value == f"preview/{env} on stackflow.drift.detected"

            messages = sorted(mine(), key=lambda m: m["subject"])
            # one notification per drifted stack: Prefect's automations deliver at least once (a
            # message whose handling failed under load is sent again), so a repeat is the same
            # event's, named by its id, never a third stack or a second event
            assert {m["subject"] for m in messages} == {
                f"stackflow: drift in {env}/database",
                f"stackflow: drift in {env}/networking",
            }
            drift_ids = {str(e.id) for e in drifted if e.event == "stackflow.drift.detected"}
            by_event: dict[str, set[str]] = {}
            for m in messages:
                found = re.search(r"Event ([0-9a-f-]{36})", m["body"])
                assert found, m["body"]
                by_event.setdefault(found.group(1), set()).add(m["subject"])
            assert set(by_event) == drift_ids, (by_event, drift_ids)
            assert all(len(subjects) == 1 for subjects in by_event.values()), by_event
            for m in messages:
                assert f"Drift check of {env} found stack" in m["body"]
                assert "on local cloud" in m["body"]
                assert "{{" not in m["body"] + m["subject"]  # every placeholder rendered
                assert password not in m["body"]
        finally:
            for run in preview_runs():  # nothing serves them here: leave none behind
                client.delete_flow_run(run.id)
            client.delete_resource_owned_automations(f"prefect.deployment.{deployment_id}")
            client.delete_deployment(deployment_id)
            client.delete_automation(notify_id)
            client.delete_block_document(block_id)
            listener.close()
