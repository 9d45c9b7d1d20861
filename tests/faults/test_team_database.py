"""The team's PostgreSQL killed under a run, on a real PostgreSQL (the project's own, started by
`server start --database postgres`), the real engine and the **local cloud** (moto on loopback,
not AWS): the run ends naming the server that failed and what to do, never a traceback;
`server start --database postgres` then starts PostgreSQL again, never "ready" over a dead
database, and the next commands work.

A Pulumi CLI writing its state to the dead PostgreSQL may wait for it without a word; the run's
stall bound stops it (a short one here: stall_timeout_s, 45 minutes by default)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stackflow.localcloud.knobs import clear_knobs, set_knobs
from stackflow.localprefect import server_record, stop_local_prefect
from stackflow.postgres import postgres_status, stop_postgres
from stackflow.processes import free_port
from tests.faults.helpers import wait_until
from tests.fixtures.reaper import watch
from tests.realenv import RUN_PY, cli, process_env, real_variables

pytestmark = pytest.mark.faults


@pytest.fixture
def team_folder(local_cloud: Any, prefect_server: Any) -> Iterator[tuple[Path, dict[str, str]]]:
    """A state folder the `postgres` OS user can pass through and this machine's variables for
    it; its servers are stopped afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="stackflow-pgloss-"))
    watch(folder)  # stopped when pytest ends, however it ends
    folder.chmod(0o711)
    state = folder / "state"
    variables = real_variables(state, local_cloud, prefect_server)
    variables["STACKFLOW_LOCAL_PREFECT_PORT"] = str(free_port())
    variables["STACKFLOW_STATE_PASSPHRASE"] = "team-database-passphrase"
    try:
        yield state, variables
    finally:
        clear_knobs(local_cloud.url)
        # its Prefect server and PostgreSQL, not `server stop`: that stops the local cloud too,
        # and this one is the session's, which the worker's other tests use
        stop_local_prefect(state)
        stop_postgres(state / "postgres")
        shutil.rmtree(folder, ignore_errors=True)


def test_a_killed_team_postgresql_is_named_and_server_start_starts_it_again(
    team_folder: tuple[Path, dict[str, str]], local_cloud: Any
) -> None:
    """Local cloud: an `up` through the team-mode server whose PostgreSQL is SIGKILLed while the
    networking stack deploys ends with exit 1, an `error:` line naming the Prefect server and its
    database, a `what to do:` line naming `server start --database postgres`, and no traceback.
    `server status` says the database does not answer; `server start --database postgres` starts
    PostgreSQL again and says so; `status` and a second `up` then complete."""
    state, variables = team_folder
    started = cli(process_env(variables), "server", "start", "--database", "postgres")
    assert started.returncode == 0, started.stdout + started.stderr
    record = server_record(state)
    assert record is not None
    auth = (state / "prefect" / "auth").read_text().strip()
    team = {
        **variables,
        "STACKFLOW_BACKEND_URL": str(record["backend_url"]),
        "PREFECT_API_URL": f"{record['url']}/api",
    }
    env = process_env(team, PREFECT_API_AUTH_STRING=auth)
    environment = f"dev-{os.urandom(3).hex()}"
    set_knobs(local_cloud.url, {"latency_s": {f"env:{environment}": 1}})  # a window to kill in
    up = [sys.executable, str(RUN_PY), "up", "--env", environment, "--stacks", "networking"]
    # said at the first failure; a Pulumi CLI that waits on its dead backend is stopped soon
    once = {
        **env,
        "STACKFLOW_STACK_RETRIES": "0",
        "STACKFLOW_STALL_TIMEOUT_S": "20",
        "STACKFLOW_CANCEL_GRACE_S": "5",
    }
    victim = subprocess.Popen(
        up, env=once, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    ec2 = local_cloud.client("ec2")
    tagged = [{"Name": "tag:environment", "Values": [environment]}]
    try:
        wait_until(
            lambda: victim.poll() is not None or bool(ec2.describe_vpcs(Filters=tagged)["Vpcs"]),
            timeout=180,
            what="the networking `up` to create its VPC",
            poll=0.2,
        )
        server = postgres_status(state / "postgres")
        assert server is not None and victim.poll() is None
        os.killpg(server.pid, signal.SIGKILL)  # every PostgreSQL process: its machine lost
        out, err = victim.communicate(timeout=240)
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait(timeout=30)
    clear_knobs(local_cloud.url)
    assert victim.returncode == 1, out + err
    error = next(line for line in err.splitlines() if line.startswith("error: "))
    assert f"the Prefect server at {record['url']}/api failed during the run" in error, err
    assert "its database is gone or restarting" in error, err
    assert "server start --database postgres" in err.split("what to do:", 1)[1], err
    assert "Traceback" not in out + err and "Error logging to API" not in err, err

    said = cli(process_env(variables), "server", "status")
    assert "running, but its database does not answer" in said.stdout, said.stdout
    again = cli(process_env(variables), "server", "start", "--database", "postgres")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "starting PostgreSQL" in again.stdout and "Prefect UI:" in again.stdout, again.stdout
    assert postgres_status(state / "postgres") is not None

    status = cli(env, "status", "--env", environment)
    assert status.returncode == 0, status.stdout + status.stderr
    healed = cli(env, "up", "--env", environment, "--stacks", "networking")
    assert healed.returncode == 0, healed.stdout + healed.stderr
