"""Backup and restore of the project's own PostgreSQL, which in team mode holds everything a team
shares: Prefect's database, the Pulumi state and stackflow's records. Run as a user runs it:
`server start --database postgres` in a state folder, a deploy on the session's **local cloud**
(moto on loopback, not AWS) through that server, `server backup FILE`, damage, `server restore
FILE`, and the environment read back whole.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stackflow.localprefect import server_record
from stackflow.postgres import connect, drop_database, postgres_status, stop_postgres
from stackflow.processes import free_port
from tests.fixtures.reaper import watch
from tests.realenv import cli, process_env, real_variables

# The longer tier (`-m slow`, which .ci/run also runs): team operations are issue 21's point 7,
# beyond the default run's 15-minute budget on 2 cores.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture
def team_state(local_cloud: Any, prefect_server: Any) -> Iterator[dict[str, Any]]:
    """A state folder the `postgres` OS user can pass through (not pytest's 0700 one), and the
    variables of a one-machine team setup in it, with a local cloud of its own; its servers are
    stopped afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="stackflow-backup-"))
    watch(folder)  # stopped when pytest ends, however it ends
    folder.chmod(0o711)
    state = folder / "state"
    variables = real_variables(state, local_cloud, prefect_server)
    # a local cloud of its own: `server stop` stops the local cloud too, and the session's serves
    # the worker's other tests
    variables["STACKFLOW_LOCALCLOUD_DIR"] = str(folder / "cloud")
    variables["STACKFLOW_LOCALCLOUD_PORT"] = str(free_port())
    variables["STACKFLOW_LOCAL_PREFECT_PORT"] = str(free_port())
    variables["STACKFLOW_STATE_PASSPHRASE"] = "backup-test-passphrase"
    try:
        yield {"state": state, "variables": variables, "folder": folder}
    finally:
        cli(process_env(variables), "server", "stop")
        stop_postgres(state / "postgres")
        shutil.rmtree(folder, ignore_errors=True)


def test_backup_then_losing_state_and_records_then_restore_brings_the_environment_back_whole(
    team_state: dict[str, Any], prefect_server: Any
) -> None:
    """Local cloud: an environment deployed through a team-mode server on the project's
    PostgreSQL is backed up; the Pulumi and records databases are dropped; the restore (refused
    while the Prefect server runs) brings back the stack's outputs, a no-op `up` with 0 engine
    calls, the records and Prefect's record of the first run."""
    state, variables = team_state["state"], team_state["variables"]
    started = cli(process_env(variables), "server", "start", "--database", "postgres")
    assert started.returncode == 0, started.stdout + started.stderr
    record = server_record(state)
    assert record is not None
    team = {
        **variables,
        "STACKFLOW_BACKEND_URL": str(record["backend_url"]),
        "PREFECT_API_URL": f"{record['url']}/api",
    }
    auth = (state / "prefect" / "auth").read_text().strip()
    env = process_env(team, PREFECT_API_AUTH_STRING=auth)
    environment = f"dev-{os.urandom(3).hex()}"
    up = cli(env, "up", "--env", environment, "--stacks", "networking", "--json")
    assert up.returncode == 0, up.stdout + up.stderr
    flow_run = json.loads(up.stdout)["ui_url"].rstrip("/").rsplit("/", 1)[-1]
    outputs = cli(env, "outputs", "--env", environment, "--json")
    assert outputs.returncode == 0 and "vpc_id" in outputs.stdout, outputs.stdout

    file = team_state["folder"] / "team.backup"
    saved = cli(env, "server", "backup", str(file))
    print(saved.stdout)  # what a user reads (shown when a test fails, or with -s)
    assert saved.returncode == 0, saved.stdout + saved.stderr
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    with tarfile.open(file) as tar:
        member = tar.extractfile("manifest.json")
        assert member is not None
        manifest = json.loads(member.read())
    assert {d["name"] for d in manifest["databases"]} == {"prefect", "pulumi", "stackflow"}
    assert manifest["created"] and manifest["server_version"].startswith("15")

    server = postgres_status(state / "postgres")
    assert server is not None
    for name in ("pulumi", "stackflow"):
        assert drop_database(server, name)  # the state and the records are lost

    refused = cli(env, "server", "restore", str(file))
    assert refused.returncode == 2 and "server stop" in refused.stderr, refused.stderr
    stopped = cli(env, "server", "stop")
    assert stopped.returncode == 0 and postgres_status(state / "postgres") is None

    restored = cli(env, "server", "restore", str(file))
    print(restored.stdout)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "restored prefect, pulumi, stackflow" in restored.stdout

    server = postgres_status(state / "postgres")
    assert server is not None
    with connect(server, "prefect") as conn:
        found = conn.execute("SELECT count(*) FROM flow_run WHERE id = %s", (flow_run,)).fetchone()
    assert found == (1,), "Prefect's record of the first run came back"
    with connect(server, "stackflow") as conn:
        keys = [r[0] for r in conn.execute("SELECT key FROM stackflow_records").fetchall()]
    assert f"projects/stackflow/environments/{environment}" in keys, keys

    # the environment reads back whole (runs now on the session's Prefect server)
    after = process_env({**team, "PREFECT_API_URL": prefect_server.api_url})
    assert cli(after, "outputs", "--env", environment, "--json").stdout == outputs.stdout
    again = cli(after, "up", "--env", environment, "--stacks", "networking")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "engine operations: 0" in again.stdout
