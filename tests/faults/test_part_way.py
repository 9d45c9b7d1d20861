"""A stack that ends part-way says what it made, on the real Pulumi engine and the session's
**local cloud** (moto on loopback, a MariaDB per RDS instance; not AWS).

The database's instance create is held (a `hang` knob) while the app, started beside the
database, creates what needs only networking; then the provider plugin holding the create is
killed, and the database's update fails. The app stops where it needs the database. Its summary
row (the table, the JSON, the artifact) and `status` count the resources it created before it
stopped, as many as its state holds: never `stopped 0 0 0 0`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stackflow.localcloud.knobs import get_knobs, set_knobs
from tests.faults.helpers import RUN_PY, FaultEnv, checkpoint, lock_files, wait_until

pytestmark = pytest.mark.faults

INSTANCE = "aws:rds/instance:Instance"
NEEDS_ONLY_NETWORKING = {
    "aws:lb/loadBalancer:LoadBalancer",
    "aws:lb/targetGroup:TargetGroup",
    "aws:lb/listener:Listener",
    "aws:ecs/cluster:Cluster",
}


def _resources(fault_env: FaultEnv, stack: str) -> list[dict[str, Any]]:
    """The stack's resources in its state, as Pulumi's summary counts them (no providers)."""
    try:
        found = checkpoint(fault_env.state_dir, fault_env.environment, stack)
    except (OSError, ValueError, KeyError):
        return []  # no state yet, or a write under way
    return [
        r for r in found.get("resources") or [] if not r["type"].startswith("pulumi:providers:")
    ]


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
    hold = {"kind": "hang", "count": 1, "environment": env, "type": INSTANCE}
    set_knobs(fault_env.cloud.url, {"faults": [hold]})

    def held_beside() -> bool:
        if any(f.count != 0 for f in get_knobs(fault_env.cloud.url).faults):
            return False  # the instance's create has not reached the cloud yet
        made = {r["type"] for r in _resources(fault_env, "app")}
        return made >= NEEDS_ONLY_NETWORKING

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
        wait_until(
            lambda: held_beside() or run.poll() is not None,
            timeout=240,
            what="the app's networking-only resources while the database instance is held",
            poll=0.2,
        )
        assert run.poll() is None, log.read_text()
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
