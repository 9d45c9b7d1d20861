"""Prefect events emitted by the flows, read back from a real Prefect server's event API, and the
automation a drift event starts. The flows run on the simulated engine (the Pulumi engine cannot run
here) with the database stack bound to a real MariaDB; the server, its event store and its
automation services are real."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from stackflow.settings import MysqlTarget

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
NOTIFY_YAML = ROOT / "deployments" / "automations" / "drift-notify.yaml"
PLACEHOLDER_ID = "00000000-0000-0000-0000-000000000000"
EVENT_WAIT_S = 60.0  # events reach the server's store asynchronously (client worker, persister)


@pytest.fixture
def sim_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefect_server: Any, fresh_schema: MysqlTarget
) -> Iterator[dict[str, Any]]:
    """STACKFLOW_* settings for one test: simulated engine, its own state folder and schema."""
    t = fresh_schema
    password = t.password.get_secret_value()
    env = {
        "STACKFLOW_STATE_DIR": str(tmp_path / "state"),
        "STACKFLOW_ENGINE": "simulated",
        "STACKFLOW_STATE_PASSPHRASE": "events-passphrase",
        "STACKFLOW_SIM_MYSQL": "external",
        "STACKFLOW_SIM_MYSQL_URL": f"mysql://{quote(t.user)}:{quote(password, safe='')}@{t.host}:{t.port}/{t.database}",
        "STACKFLOW_RETRY_DELAY_S": "0",
        "STACKFLOW_MIGRATIONS_WAIT_TIMEOUT_S": "20",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    yield {"state_dir": tmp_path / "state", "password": password}
    # send what the flows left queued while the server is still up (else the process's exit
    # retries it against a stopped server for about a minute)
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=15)
    EventsWorker.drain_all(timeout=15)


def unique_env(prefix: str) -> str:
    """An environment name no other test on the shared server uses (dev kind unless pr-*)."""
    return f"{prefix}{uuid.uuid4().hex[:6]}"


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


def test_simulated_deploy_failure_and_drift_emit_labelled_events(
    sim_env: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """stack.updated / stack.failed / drift.detected, each naming environment and stack."""
    from flows.pipeline import DriftDetected, PipelineFailed, deploy, drift
    from stackflow.engine.simulated import clear_faults, inject_fault

    env = unique_env("ev")
    since = datetime.now(UTC) - timedelta(seconds=1)
    deploy(environment=env)  # all three stacks updated
    inject_fault(sim_env["state_dir"], "app", permanent=True, operations=("up",))
    with pytest.raises(PipelineFailed, match="app"):
        # networking and database run again but change nothing (no event); app fails
        deploy(environment=env, force=True, return_state=True).result()
    clear_faults(sim_env["state_dir"])
    monkeypatch.setenv("STACKFLOW_SIM_DRIFT", '["networking", "app"]')
    with pytest.raises(DriftDetected):
        drift(environment=env, return_state=True).result()

    expected = Counter(
        {
            ("stackflow.stack.updated", "networking"): 1,
            ("stackflow.stack.updated", "database"): 1,
            ("stackflow.stack.updated", "app"): 1,
            ("stackflow.stack.failed", "app"): 1,
            ("stackflow.drift.detected", "networking"): 1,
            ("stackflow.drift.detected", "app"): 1,
        }
    )
    events = read_events(env, since, lambda got: len(got) >= expected.total())
    got = Counter((e.event, e.resource["stackflow.stack"]) for e in events)
    assert got == expected

    flow_runs = {
        "stackflow.stack.updated": "deploy",
        "stackflow.stack.failed": "deploy",
        "stackflow.drift.detected": "drift",
    }
    for e in events:
        stack = e.resource["stackflow.stack"]
        assert e.resource["stackflow.environment"] == env
        assert e.resource.id == f"stackflow.stack.{env}.{stack}"
        assert e.resource.name == f"{env}/{stack}"
        assert e.payload["simulated"] is True
        # emitted inside the flow run, which Prefect adds as a related resource
        runs = [r for r in e.related if r.role == "flow-run"]
        assert len(runs) == 1, e.related
        assert runs[0].name == f"{flow_runs[e.event]}-{env}"
        assert sim_env["password"] not in e.model_dump_json()
    [failed] = [e for e in events if e.event == "stackflow.stack.failed"]
    assert failed.payload["operation"] == "up"
    assert failed.payload["note"]  # why it failed


def test_cleanup_expired_destroys_an_expired_simulated_pr_environment(
    sim_env: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """pr-123 past its TTL is destroyed, forgotten and announced; pr-456 within its TTL is kept."""
    from flows.cleanup import cleanup_expired
    from flows.pipeline import deploy
    from stackflow.engine import get_engine
    from stackflow.engine.simulated import read_journal
    from stackflow.environments import list_environments
    from stackflow.graph import GRAPH, bare_spec
    from stackflow.settings import get_settings

    state_dir = sim_env["state_dir"]
    since = datetime.now(UTC) - timedelta(seconds=1)
    monkeypatch.setenv("STACKFLOW_TTL_HOURS", "0.0001")  # 0.36 s
    deploy(environment="pr-123")
    monkeypatch.setenv("STACKFLOW_TTL_HOURS", "24")
    deploy(environment="pr-456")
    records = {r.name: r for r in list_environments(state_dir)}
    assert records["pr-123"].expired() and not records["pr-456"].expired()

    assert cleanup_expired(dry_run=True) == {
        "expired": ["pr-123"],
        "destroyed": [],
        "dry_run": True,
    }
    assert {r.name for r in list_environments(state_dir)} == {"pr-123", "pr-456"}

    assert cleanup_expired() == {"expired": ["pr-123"], "destroyed": ["pr-123"], "dry_run": False}
    assert [r.name for r in list_environments(state_dir)] == ["pr-456"]
    for env, kept in (("pr-123", False), ("pr-456", True)):
        settings = get_settings(environment=env)
        engine = get_engine(settings)
        for stack in GRAPH.stacks:
            assert engine.exists(bare_spec(settings, stack)) is kept, f"{env}/{stack}"
    destroyed = [
        j["stack"]
        for j in read_journal(state_dir)
        if j["op"] == "destroy" and j["phase"] == "end" and j["stack"].startswith("pr-123/")
    ]
    assert destroyed == ["pr-123/app", "pr-123/database", "pr-123/networking"]  # reverse order
    assert not any(
        j["stack"].startswith("pr-456/") for j in read_journal(state_dir) if j["op"] == "destroy"
    )

    events = read_events(
        "pr-123", since, lambda got: any(e.event == "stackflow.environment.expired" for e in got)
    )
    [expired] = [e for e in events if e.event == "stackflow.environment.expired"]
    assert expired.resource.id == "stackflow.environment.pr-123"
    assert expired.resource["stackflow.environment"] == "pr-123"
    assert expired.payload["ttl_hours"] == 0.0001
    # emitted by the same run as pr-123's, so it would be stored by now
    kept = read_events("pr-456", since, lambda got: True)
    assert [e.event for e in kept if e.event == "stackflow.environment.expired"] == []


class Listener:
    """A local HTTP endpoint that records the JSON bodies posted to it (the notification target)."""

    def __init__(self) -> None:
        import json
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.received: list[dict[str, Any]] = []
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                received.append(json.loads(self.rfile.read(length) or b"{}"))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


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


def test_simulated_drift_runs_preview_and_notifies_through_automations(
    sim_env: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """What one drift run (two drifted stacks, two events) starts on the server: exactly one
    preview run of that environment (the automation serve.py attaches to preview/<env>), and one
    notification per drifted stack (the example in deployments/automations/drift-notify.yaml,
    sent by the server through a custom-webhook block to a local listener)."""
    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.client.schemas.sorting import FlowRunSort

    from deployments.serve import build_deployments
    from flows.pipeline import DriftDetected, deploy, drift

    env = unique_env("dr")
    [preview] = [d for d in build_deployments([env]) if d.flow_name == "preview"]
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
            deploy(environment=env)
            since = datetime.now(UTC) - timedelta(seconds=1)
            monkeypatch.setenv("STACKFLOW_SIM_DRIFT", '["networking", "app"]')
            with pytest.raises(DriftDetected):
                drift(environment=env, return_state=True).result()
            drifted = read_events(
                env,
                since,
                lambda got: sum(e.event == "stackflow.drift.detected" for e in got) >= 2,
            )
            assert sum(e.event == "stackflow.drift.detected" for e in drifted) == 2

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
            assert [m["subject"] for m in messages] == [
                f"stackflow: drift in {env}/app",
                f"stackflow: drift in {env}/networking",
            ]
            for m in messages:
                assert f"Drift check of {env} found stack" in m["body"]
                assert "simulated: True" in m["body"]
                assert "{{" not in m["body"] + m["subject"]  # every placeholder rendered
                assert sim_env["password"] not in m["body"]
        finally:
            for run in preview_runs():  # nothing serves them here: leave none behind
                client.delete_flow_run(run.id)
            client.delete_resource_owned_automations(f"prefect.deployment.{deployment_id}")
            client.delete_deployment(deployment_id)
            client.delete_automation(notify_id)
            client.delete_block_document(block_id)
            listener.close()
