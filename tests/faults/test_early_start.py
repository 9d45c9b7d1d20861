"""The app's `up` starts beside the database's, on the real Pulumi engine and the session's
**local cloud** (moto on loopback, a MariaDB per RDS instance; not AWS): what needs only
networking is created while the database is, and what reads the database (the task definition,
the role policy on its secret, the service) waits for the database and its migrations.

The database is held with a `hang` knob on its instance's create (the plugin never answers):
the app's load balancer, listener and target group reach the app's state while the instance has
not, whatever the machine's speed. The run and its `pulumi` processes are then SIGKILLed (a hung
create never lets Pulumi's graceful cancel end), and the next `up` clears what they left and
completes; the migration records the database's clock when it ran, which the task definition's
creation follows. Held the same way, then failed (the plugin holding the create is killed), the
database stops the app where it needs it: the app's summary row (table, JSON, artifact) and
`status` count the resources it created meanwhile, as many as its state holds.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from stackflow.localcloud.knobs import get_knobs, set_knobs
from stackflow.migrator.connection import connect
from stackflow.settings import MigrationSettings
from tests.faults.helpers import (
    RUN_PY,
    FaultEnv,
    checkpoint,
    kill_groups,
    lock_files,
    pulumi_pids,
    wait_until,
)

pytestmark = pytest.mark.faults

INSTANCE = "aws:rds/instance:Instance"
NEEDS_ONLY_NETWORKING = {
    "aws:lb/loadBalancer:LoadBalancer",
    "aws:lb/targetGroup:TargetGroup",
    "aws:lb/listener:Listener",
    "aws:ecs/cluster:Cluster",
}
READS_THE_DATABASE = {
    "aws:ecs/taskDefinition:TaskDefinition",
    "aws:iam/rolePolicy:RolePolicy",
    "aws:ecs/service:Service",
}
STAMP = "CREATE TABLE ran_at (at DATETIME(6) NOT NULL);\nINSERT INTO ran_at VALUES (UTC_TIMESTAMP(6));\n"


def _resources(fault_env: FaultEnv, stack: str) -> list[dict[str, Any]]:
    """The stack's resources in its state, as Pulumi's summary counts them (no providers)."""
    try:
        found = checkpoint(fault_env.state_dir, fault_env.environment, stack)
    except (OSError, ValueError, KeyError):
        return []  # no state yet, or a write under way
    resources = found.get("resources") or []
    return [r for r in resources if not r["type"].startswith("pulumi:providers:")]


def _types(fault_env: FaultEnv, stack: str) -> set[str]:
    return {r["type"] for r in _resources(fault_env, stack)}


def _hold_the_instance(fault_env: FaultEnv) -> None:
    """The database's instance create never answers (until its plugin is killed)."""
    hold = {"kind": "hang", "count": 1, "environment": fault_env.environment, "type": INSTANCE}
    set_knobs(fault_env.cloud.url, {"faults": [hold]})


def _held_beside(fault_env: FaultEnv) -> bool:
    """The instance's create is held and the app has made what needs only networking."""
    if any(f.count != 0 for f in get_knobs(fault_env.cloud.url).faults):
        return False  # the instance's create has not reached the cloud yet
    return _types(fault_env, "app") >= NEEDS_ONLY_NETWORKING


def _wait_held_beside(fault_env: FaultEnv, run: subprocess.Popen[bytes], log: Path) -> None:
    """Until `_held_beside`; the run must still go then (its log says why if not)."""
    wait_until(
        lambda: _held_beside(fault_env) or run.poll() is not None,
        timeout=240,
        what="the app's networking-only resources while the database instance is held",
        poll=0.2,
    )
    assert run.poll() is None, log.read_text()


def _created(fault_env: FaultEnv, stack: str, type_: str) -> datetime:
    found = checkpoint(fault_env.state_dir, fault_env.environment, stack)
    (resource,) = [r for r in found["resources"] if r["type"] == type_]
    return datetime.fromisoformat(resource["created"].replace("Z", "+00:00"))


def test_the_app_starts_beside_the_database_and_what_reads_it_waits_for_the_migrations(
    fault_env: FaultEnv, tmp_path: Path
) -> None:
    """Local cloud: with the database's instance held, the app's load balancer, listener, target
    group and cluster are in the app's state and nothing reading the database is. After a kill,
    the next `up` completes, and the task definition was created after the migration ran and
    after the instance."""
    env = fault_env.environment
    folder = tmp_path / "migrations"
    folder.mkdir()
    (folder / "V001__ran_at.sql").write_text(STAMP)
    fault_env.declare(migrations={"dir": str(folder)})
    _hold_the_instance(fault_env)

    log = tmp_path / "first.log"
    first = fault_env.start("up", "--env", env, log=log)
    running: list[int] = []  # the `pulumi` processes of the updates under way
    try:
        _wait_held_beside(fault_env, first, log)
        app_then, database_then = _types(fault_env, "app"), _types(fault_env, "database")
        running.extend(
            pid
            for stack in ("database", "app")
            for pid in pulumi_pids(fault_env.state_dir, env, stack)
        )
    finally:
        kill_groups(first.pid, *running)  # each `pulumi` leads a group of its own, with its plugins
        first.wait(timeout=30)
    assert INSTANCE not in database_then, database_then
    assert not (READS_THE_DATABASE & app_then), app_then
    assert len(running) == 2, running  # both updates were under way

    set_knobs(fault_env.cloud.url, {})
    second = fault_env.cli("up", "--env", env)
    assert second.returncode == 0, second
    db = fault_env.database()
    with connect(db, MigrationSettings(connect_timeout_s=5)) as conn, conn.cursor() as cur:
        cur.execute("SELECT at FROM ran_at")
        ((ran_at,),) = cur.fetchall()
    migrated = typing_utc(ran_at)
    task_definition = _created(fault_env, "app", "aws:ecs/taskDefinition:TaskDefinition")
    assert task_definition > migrated, (task_definition, migrated)
    assert task_definition > _created(fault_env, "database", INSTANCE)
    assert _types(fault_env, "app") >= READS_THE_DATABASE


def _descendants(pid: int) -> list[int]:
    """Every process below `pid`, read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kill_aws_plugins(pulumi: int) -> list[int]:
    """SIGKILL the local cloud's aws provider plugin of one `pulumi` process."""
    killed = []
    for pid in _descendants(pulumi):
        with contextlib.suppress(OSError):
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"stackflow.localcloud.plugin" in command and b"aws" in command:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    return killed


def test_an_app_stopped_by_its_failed_database_reports_what_it_created(
    fault_env: FaultEnv, tmp_path: Path
) -> None:
    """Local cloud: the app stops after creating what needs only networking; its summary row,
    JSON, artifact and `status` give the count of the resources its state holds."""
    env = fault_env.environment
    _hold_the_instance(fault_env)

    log = tmp_path / "up.log"
    with log.open("wb") as err:
        run = subprocess.Popen(
            [sys.executable, str(RUN_PY), "up", "--env", env, "--json"],
            env=fault_env.env(),
            cwd=fault_env.workdir,
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        _wait_held_beside(fault_env, run, log)
        (lock,) = lock_files(fault_env.state_dir, env, "database")
        assert _kill_aws_plugins(json.loads(lock.read_text())["pid"]), log.read_text()
        out, _ = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(timeout=30)
    assert run.returncode == 1, log.read_text()

    made = len(_resources(fault_env, "app"))
    assert made > len(NEEDS_ONLY_NETWORKING), _resources(fault_env, "app")
    rows = {s["stack"]: s for s in json.loads(out)["stacks"]}
    assert rows["database"]["status"] == "failed", rows["database"]
    app = rows["app"]
    assert app["status"] == "stopped", app
    assert app["changes"] == {"create": made, "update": 0, "replace": 0, "delete": 0, "same": 0}

    shown = fault_env.cli("status", "--env", env, "--json")
    assert shown.returncode == 0, shown
    (environment,) = json.loads(shown.stdout)["environments"]
    recorded = {s["stack"]: s for s in environment["stacks"]}["app"]
    assert (recorded["status"], recorded["condition"]) == ("stopped", "failed"), recorded
    assert recorded["changes"]["create"] == made, recorded
    text = fault_env.cli("status", "--env", env)
    assert any(
        line.split()[0] == "app" and line.endswith(f"({made} created)")
        for line in text.stdout.splitlines()
        if line.strip()
    ), text

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        (artifact,) = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[f"up-{env}"]))
        )
    assert f"| app | up | stopped | {made} | 0 | 0 | 0 | 0 |" in str(artifact.data)


def typing_utc(value: Any) -> datetime:
    """A DATETIME the database wrote with UTC_TIMESTAMP (naive) as an aware UTC time."""
    assert isinstance(value, datetime), value
    return value.replace(tzinfo=UTC)
