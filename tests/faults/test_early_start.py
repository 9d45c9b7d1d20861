"""The app's `up` starts beside the database's, on the real Pulumi engine and the session's
**local cloud** (moto on loopback, a MariaDB per RDS instance; not AWS): what needs only
networking is created while the database is, and what reads the database (the task definition,
the role policy on its secret, the service) waits for the database and its migrations.

The database is held with a `hang` knob on its instance's create (the plugin never answers):
the app's load balancer, listener and target group reach the app's state while the instance has
not, whatever the machine's speed. The run and its `pulumi` processes are then SIGKILLed (a hung
create never lets Pulumi's graceful cancel end), and the next `up` clears what they left and
completes; the migration records the database's clock when it ran, which the task definition's
creation follows.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from stackflow.localcloud.knobs import get_knobs, set_knobs
from stackflow.migrator.connection import connect
from stackflow.settings import MigrationSettings
from tests.faults.helpers import FaultEnv, checkpoint, lock_files, wait_until

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


def _types(fault_env: FaultEnv, stack: str) -> set[str]:
    try:
        found = checkpoint(fault_env.state_dir, fault_env.environment, stack)
    except (OSError, ValueError, KeyError):
        return set()  # no state yet, or a write under way
    return {r["type"] for r in found.get("resources") or []}


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
    hold = {"kind": "hang", "count": 1, "environment": env, "type": INSTANCE}
    set_knobs(fault_env.cloud.url, {"faults": [hold]})

    def held_beside() -> bool:
        if any(f.count != 0 for f in get_knobs(fault_env.cloud.url).faults):
            return False  # the instance's create has not reached the cloud yet
        return _types(fault_env, "app") >= NEEDS_ONLY_NETWORKING

    log = tmp_path / "first.log"
    first = fault_env.start("up", "--env", env, log=log)
    running: list[int] = []  # the `pulumi` processes of the updates under way
    try:
        wait_until(
            lambda: held_beside() or first.poll() is not None,
            timeout=180,
            what="the app's networking-only resources while the database instance is held",
            poll=0.2,
        )
        assert first.poll() is None, log.read_text()
        app_then, database_then = _types(fault_env, "app"), _types(fault_env, "database")
        running.extend(
            json.loads(lock.read_text())["pid"]
            for stack in ("database", "app")
            for lock in lock_files(fault_env.state_dir, env, stack)
        )
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        for pulumi in running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pulumi, signal.SIGKILL)  # its own process group: with its plugins
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


def typing_utc(value: Any) -> datetime:
    """A DATETIME the database wrote with UTC_TIMESTAMP (naive) as an aware UTC time."""
    assert isinstance(value, datetime), value
    return value.replace(tzinfo=UTC)
