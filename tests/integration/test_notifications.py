"""Notifications through a local webhook: `[notifications] block` names a custom-webhook block
pointing at an HTTP endpoint in this process (on loopback), `python flows/run.py server
automation` installs the automations on the session's real Prefect server, and runs on the real
Pulumi engine and the session's **local cloud** (moto on loopback, not AWS) then make each kind
of notice happen: a run failed (its stack retried first), drift found in two stacks, an
environment destroyed, an approval waiting (then rejected), an environment expired, and a sync
refusing a commit. Each reaches the webhook exactly once: Prefect records one executed action per
event, and the webhook holds one message per event, never one per stack or per retry."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from stackflow.notifications import (
    APPROVAL_WAITING,
    DRIFT_FOUND,
    ENVIRONMENT_GONE,
    RUN_FAILED,
    SYNC_REFUSED,
)
from tests.realenv import (
    ROOT,
    cli,
    declare,
    deploy_answering,
    outputs,
    process_env,
    real_variables,
    unique,
)
from tests.webhook import Listener

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
WAIT_S = 120.0  # events reach the server's store, its triggers and its actions asynchronously
AUTHOR = ("Ana Author", "ana@example.invalid")


@dataclass
class Setup:
    variables: dict[str, str]
    listener: Listener
    block: str
    cloud: Any


@pytest.fixture
def setup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefect_server: Any, local_cloud: Any
) -> Iterator[Setup]:
    """This machine's variables in this process, with a notification block of the test's own
    pointing at a local webhook; the automations are removed at the end."""
    from prefect.blocks.notifications import CustomWebhookNotificationBlock

    variables = real_variables(tmp_path / "state", local_cloud, prefect_server)
    listener = Listener()
    name = f"notify-{uuid.uuid4().hex[:8]}"
    CustomWebhookNotificationBlock(
        name="stackflow (test)",
        url=listener.url,
        json_data={"subject": "{{subject}}", "body": "{{body}}"},
    ).save(name)
    variables["STACKFLOW_NOTIFICATIONS_BLOCK"] = f"custom-webhook/{name}"
    for key in [k for k in os.environ if k.startswith("STACKFLOW_")]:
        monkeypatch.delenv(key)
    for key, value in variables.items():
        monkeypatch.setenv(key, value)
    try:
        yield Setup(variables, listener, f"custom-webhook/{name}", local_cloud)
    finally:
        from prefect.client.orchestration import get_client

        from stackflow.localprefect import drain_prefect_queues
        from stackflow.notifications import install_notifications

        drain_prefect_queues()
        with get_client(sync_client=True) as client:
            install_notifications(client, None)
        listener.close()


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env={
            "GIT_AUTHOR_NAME": AUTHOR[0],
            "GIT_AUTHOR_EMAIL": AUTHOR[1],
            "GIT_COMMITTER_NAME": AUTHOR[0],
            "GIT_COMMITTER_EMAIL": AUTHOR[1],
            "HOME": str(cwd),
            "PATH": "/usr/bin:/bin",
        },
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def a_refused_commit(setup: Setup, folder: Path, environment: str) -> str:
    """A repository whose main branch the environment follows, at a commit that locks a package
    this worker was not set up with (the sync refuses it before anything runs)."""
    folder.mkdir(parents=True)
    origin, work = folder / "origin.git", folder / "work"
    git(folder, "init", "-q", "--bare", "-b", "main", str(origin))
    git(folder, "clone", "-q", str(origin), str(work))
    lock = (ROOT / "constraints.txt").read_text()
    (work / "constraints.txt").write_text(lock + "zzz-unheard-of==1.0\n")
    (work / "flows").mkdir()
    shutil.copy2(ROOT / "flows" / "run.py", work / "flows" / "run.py")  # what a worker runs
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "a new pin")
    git(work, "push", "-q", "origin", "main")
    project = Path(setup.variables["STACKFLOW_PROJECT_DIR"])
    shutil.copy2(ROOT / "constraints.txt", project / "constraints.txt")
    with (project / "stackflow.toml").open("a") as toml:
        toml.write(f'\n[git]\nrepository = "{origin}"\n')
    declare(setup.variables, environment, git={"branch": "main"})
    return git(work, "rev-parse", "HEAD")


def read_events(names: list[str], since: datetime, done: Callable[[list[Any]], bool]) -> list[Any]:
    """Events named `names` since `since`, polled until `done` says they are all there."""
    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventNameFilter, EventOccurredFilter

    deadline = time.monotonic() + WAIT_S
    found: list[Any] = []
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            page = client.read_events(
                filter=EventFilter(
                    occurred=EventOccurredFilter(since=since, until=datetime.now(UTC)),
                    event=EventNameFilter(name=names),
                ),
                limit=50,
            )
            found = list(page.events)
            token = page.next_page
            while token:  # the server's pages hold 50
                more = client.read_events_page(token)
                found += list(more.events)
                token = more.next_page
            if done(found):
                return found
            time.sleep(0.5)
    return found


def test_each_notice_reaches_the_webhook_once_per_event(setup: Setup, tmp_path: Path) -> None:
    from flows.cleanup import cleanup_expired
    from flows.pipeline import DriftDetected, PipelineFailed, deploy, destroy, drift
    from flows.sync import sync_environment
    from stackflow.localcloud.knobs import clear_knobs, set_knobs

    env = process_env(setup.variables)
    installed = cli(env, "server", "automation", "--json")
    assert installed.returncode == 0, installed.stderr
    assert len(json.loads(installed.stdout)["notifications"]) == 5
    again = cli(env, "server", "automation", "--json")
    assert json.loads(again.stdout)["notifications"] == []  # unchanged: left as they are

    main, gated, brief, follows = unique("dev"), unique("dev"), unique("pr"), unique("dev")
    since = datetime.now(UTC) - timedelta(seconds=1)
    deploy(environment=main, stacks=["networking", "database"])
    # app's cluster refused every time as throttled: retried (3 retries), then the run fails
    fault = {"kind": "transient", "environment": main, "type": "aws:ecs/cluster:Cluster"}
    set_knobs(setup.cloud.url, {"faults": [fault]})
    try:
        with pytest.raises(PipelineFailed, match="app"):
            deploy(environment=main, stacks=["app"], return_state=True).result()
    finally:
        clear_knobs(setup.cloud.url)
    found = outputs(setup.variables, main)
    tag = [{"Key": "console-edit", "Value": "yes"}]
    setup.cloud.client("ec2").create_tags(Resources=[found["networking"]["vpc_id"]], Tags=tag)
    rds = setup.cloud.client("rds")
    [instance] = rds.describe_db_instances(DBInstanceIdentifier=found["database"]["instance_id"])[
        "DBInstances"
    ]
    rds.add_tags_to_resource(ResourceName=instance["DBInstanceArn"], Tags=tag)
    with pytest.raises(DriftDetected):
        drift(environment=main, return_state=True).result()
    assert destroy(environment=main, return_state=True).is_completed()

    declare(setup.variables, gated, approval={"required": True, "timeout_s": 600})
    assert deploy_answering(gated, False, "not today").is_cancelled()
    declare(setup.variables, brief, ttl_hours=0.0001)  # 0.36 s: expired once its deploy ends
    deploy(environment=brief, stacks=["networking"])
    assert cleanup_expired()["destroyed"] == [brief]
    commit = a_refused_commit(setup, tmp_path / "gitops", follows)
    assert sync_environment(environment=follows, return_state=True).is_failed()

    expected = Counter(
        {
            (RUN_FAILED, main): 1,
            (DRIFT_FOUND, main): 1,
            (ENVIRONMENT_GONE, main): 1,
            (APPROVAL_WAITING, gated): 1,
            (ENVIRONMENT_GONE, brief): 1,
            (SYNC_REFUSED, follows): 1,
        }
    )
    ours = {main, gated, brief, follows}

    def mine(events: list[Any]) -> list[Any]:
        return [e for e in events if e.resource.get("stackflow.environment") in ours]

    names = sorted({name for name, _ in expected})
    triggering = mine(read_events(names, since, lambda got: len(mine(got)) >= expected.total()))
    assert Counter((e.event, e.resource["stackflow.environment"]) for e in triggering) == expected
    ids = {str(e.id) for e in triggering}

    def acted_on(event: Any) -> str | None:
        return next(
            (
                r.id.removeprefix("prefect.event.")
                for r in event.related
                if r.role == "triggering-event"
            ),
            None,
        )

    actions = read_events(
        ["prefect.automation.action.executed", "prefect.automation.action.failed"],
        since,
        lambda got: ids <= {acted_on(e) for e in got},
    )
    done = Counter(acted_on(e) for e in actions if acted_on(e) in ids)
    assert {e.event for e in actions if acted_on(e) in ids} == {
        "prefect.automation.action.executed"
    }
    assert done == Counter(dict.fromkeys(ids, 1)), done  # one action per event, each done once

    messages = [
        m for m in setup.listener.messages() if any(name in m.get("subject", "") for name in ours)
    ]
    subjects = Counter(m["subject"] for m in messages)
    assert subjects == Counter(
        {
            f"stackflow: up of {main} failed": 1,
            f"stackflow: drift in {main}": 1,
            f"stackflow: {main} was destroyed": 1,
            f"stackflow: {gated} waits for approval": 1,
            f"stackflow: {brief} expired and was destroyed": 1,
            f"stackflow: the sync of {follows} refused commit {commit[:12]}": 1,
        }
    ), subjects
    body = {m["subject"]: m["body"] for m in messages}
    failed = body[f"stackflow: up of {main} failed"]
    assert "failed at app: " in failed and "AWS throttled the requests" in failed
    drifted = body[f"stackflow: drift in {main}"]
    assert "networking" in drifted and "database" in drifted
    assert "destroyed by" in body[f"stackflow: {main} was destroyed"]
    waiting = body[f"stackflow: {gated} waits for approval"]
    assert "networking: " in waiting and "to create" in waiting
    assert "Approve or reject it: http://" in waiting  # the run's page in the Prefect UI
    assert "expired: its TTL of 0.0001 h" in body[f"stackflow: {brief} expired and was destroyed"]
    refused = body[f"stackflow: the sync of {follows} refused commit {commit[:12]}"]
    assert commit in refused and "zzz-unheard-of" in refused
    named = {m["body"].rsplit("Event ", 1)[1].rstrip(".") for m in messages}
    assert named == ids  # each message names the event it answers; no event sent twice

    # the refused commit is in the audit log under its author's name, marked unverified
    from stackflow.audit import read_log
    from stackflow.settings import get_settings

    report, _where = read_log(get_settings(follows))
    [entry] = [e for e in report.entries if e.action == "sync.refused"]
    assert (entry.actor, entry.verified, entry.commit) == (
        f"{AUTHOR[0]} <{AUTHOR[1]}>",
        False,
        commit,
    )
    assert entry.via == f"sync of commit {commit[:12]} (its author)"
