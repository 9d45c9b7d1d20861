"""A migration that fails half way: recorded, refused until repaired, then applied."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackflow.migrations import connect
from stackflow.settings import MigrationSettings
from tests.faults.helpers import FaultEnv, schema_history, url_of

pytestmark = pytest.mark.faults

BROKEN = "CREATE TABLE shape (id INT PRIMARY KEY);\nINSERT INTO no_such_table VALUES (1);\n"
# Fixed so it is safe to run again: its first statement was committed by the failed run.
FIXED = "CREATE TABLE IF NOT EXISTS shape (id INT PRIMARY KEY);\nINSERT INTO shape VALUES (1);\n"


def test_failed_migration_blocks_deploys_until_repaired_simulated(
    fault_env: FaultEnv, tmp_path: Path
) -> None:
    """A file failing at its second statement fails the deploy naming the file and is recorded as
    failed; the next deploy refuses, naming it; `migrate --repair` (URL from the environment,
    not the command line) and a fixed file let the deploy through. Simulated stacks, real MariaDB."""
    folder = tmp_path / "migrations"
    folder.mkdir()
    (folder / "V001__create_color.sql").write_text("CREATE TABLE color (id INT PRIMARY KEY);\n")
    bad = folder / "V002__create_shape.sql"
    bad.write_text(BROKEN)
    env = {"STACKFLOW_MIGRATIONS_DIR": str(folder)}

    first = fault_env.cli("up", "--env", "dev", env=env)
    assert first.returncode == 1, first
    assert first.error_line.startswith(
        "error: migrate: V002__create_shape.sql: statement 2 of 2 (line 2) failed"
    ), first
    rows = {r.version: r for r in schema_history(fault_env.db)}
    assert rows[1].success and not rows[2].success, rows
    assert rows[2].error is not None and rows[2].error.startswith("statement 2 of 2 (line 2)")

    # the later runs call the CLI's main() in this process: the same code, without the start-up
    second = fault_env.main("up", "--env", "dev", env=env)
    assert second.returncode == 1, second
    last_line = second.stderr.strip().splitlines()[-1]  # in-process: nothing prints after it
    assert last_line == second.error_line, second
    assert str(bad) in last_line and "failed in an earlier run" in last_line, second
    assert "migrate --repair" in last_line, second
    assert {r.version: r for r in schema_history(fault_env.db)} == rows  # nothing more ran

    bad.write_text(FIXED)
    url = url_of(fault_env.db)
    repair = fault_env.main("migrate", "--repair", env={"STACKFLOW_DATABASE_URL": url})
    assert repair.returncode == 0, repair
    assert "cleared failed records" in repair.stdout and "V2" in repair.stdout, repair
    assert fault_env.db.password.get_secret_value() not in repair.output

    third = fault_env.main("up", "--env", "dev", env=env)
    assert third.returncode == 0, third
    assert [(r.version, r.success) for r in schema_history(fault_env.db)] == [(1, True), (2, True)]
    with connect(fault_env.db, MigrationSettings()) as conn, conn.cursor() as cur:
        cur.execute("SELECT id FROM shape")
        assert cur.fetchall() == ((1,),)
