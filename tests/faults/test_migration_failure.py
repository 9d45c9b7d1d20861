"""A migration that fails half way, on the environment's own database on the local cloud: recorded,
refused until repaired, then applied."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stackflow.migrator.connection import connect
from stackflow.settings import MigrationSettings
from tests.faults.helpers import FaultEnv, checkpoint, schema_history

pytestmark = pytest.mark.faults

BROKEN = "CREATE TABLE shape (id INT PRIMARY KEY);\nINSERT INTO no_such_table VALUES (1);\n"
READS_THE_DATABASE = {"aws:ecs/taskDefinition:TaskDefinition", "aws:ecs/service:Service"}


def app_types(fault_env: FaultEnv) -> set[str]:
    """The resource types in the app's state (none when it has no state yet)."""
    try:
        found = checkpoint(fault_env.state_dir, fault_env.environment, "app")
    except FileNotFoundError:
        return set()
    return {r["type"] for r in found.get("resources") or []}


# Fixed so it is safe to run again: its first statement was committed by the failed run.
FIXED = "CREATE TABLE IF NOT EXISTS shape (id INT PRIMARY KEY);\nINSERT INTO shape VALUES (1);\n"


def test_failed_migration_blocks_deploys_until_repaired_on_the_local_cloud(
    fault_env: FaultEnv, tmp_path: Path
) -> None:
    """Local cloud, one environment deployed for real: a file failing at its second statement
    fails the first deploy naming the file and is recorded as failed in the environment's own
    database; the app, started beside the database, created nothing that reads it (no task
    definition, no service: its new version never ran against a half-migrated schema). The next
    deploy refuses, naming the file; `migrate --repair` (the database found from the
    environment's outputs) and a fixed file let the deploy through."""
    env = fault_env.environment
    folder = tmp_path / "migrations"
    folder.mkdir()
    (folder / "V001__create_color.sql").write_text("CREATE TABLE color (id INT PRIMARY KEY);\n")
    bad = folder / "V002__create_shape.sql"
    bad.write_text(BROKEN)
    fault_env.declare(migrations={"dir": str(folder)})  # every run below reads this folder

    first = fault_env.cli("up", "--env", env)
    assert first.returncode == 1, first
    assert first.error_line.startswith(
        "error: migrate: V002__create_shape.sql: statement 2 of 2 (line 2) failed"
    ), first
    assert re.search(r"^app\s+(stopped|not run) ", first.stdout, re.MULTILINE), first
    assert not READS_THE_DATABASE & app_types(fault_env), app_types(fault_env)
    db = fault_env.database()  # the environment's own MariaDB server, from its outputs
    assert db.host.startswith("127.") and db.host != "127.0.0.1", db.host
    rows = {r.version: r for r in schema_history(db)}
    assert rows[1].success and not rows[2].success, rows
    assert rows[2].error is not None and rows[2].error.startswith("statement 2 of 2 (line 2)")

    # the later runs call the CLI's main() in this process: the same code, without the start-up
    second = fault_env.main("up", "--env", env)
    assert second.returncode == 1, second
    # in-process nothing prints after the reason and what to do
    *_, last_line, to_do = second.stderr.strip().splitlines()
    assert last_line == second.error_line, second
    assert to_do.startswith("  what to do: ") and "Traceback" not in second.output, second
    assert str(bad) in last_line and "failed in an earlier run" in last_line, second
    assert "migrate --repair" in last_line, second
    for stack in ("networking", "database"):  # up to date
        assert re.search(rf"^{stack}\s+unchanged ", second.stdout, re.M), second
    assert re.search(r"^app\s+(stopped|not run) ", second.stdout, re.MULTILINE), second
    assert not READS_THE_DATABASE & app_types(fault_env), app_types(fault_env)
    assert {r.version: r for r in schema_history(db)} == rows  # nothing more ran

    bad.write_text(FIXED)
    repair = fault_env.main("migrate", "--env", env, "--repair")
    assert repair.returncode == 0, repair
    assert "cleared failed records" in repair.stdout and "V2" in repair.stdout, repair
    assert db.password.get_secret_value() not in repair.output
    assert [r.version for r in schema_history(db)] == [1]

    third = fault_env.main("up", "--env", env)
    assert third.returncode == 0, third
    assert re.search(r"^migrate\s+migrated .*1 applied, 1 already applied", third.stdout, re.M)
    assert re.search(r"^verify\s+healthy ", third.stdout, re.MULTILINE), third
    assert [(r.version, r.success) for r in schema_history(db)] == [(1, True), (2, True)]
    with connect(db, MigrationSettings()) as conn, conn.cursor() as cur:
        cur.execute("SELECT id FROM shape")
        assert cur.fetchall() == ((1,),)
