"""Migrations that cannot harm their own bookkeeping, against a real MariaDB: "protected" decided
once from the environment's kind (the flow's migrate step and the CLI agree), a dump's schema lines
and client commands refused before anything runs, what the lint cannot check marked "needs
review", and a baseline that names every file it covers."""

from __future__ import annotations

import argparse
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli.commands.migrate import add_arguments
from cli.commands.migrate import run as cli_run
from programs.database import DatabaseOutputs
from stackflow.localdb import grant_database
from stackflow.localprefect import PrefectServer
from stackflow.migrator.errors import MigrationDestructiveChange, MigrationRefused
from stackflow.migrator.plan import pending_plan
from stackflow.migrator.target import MysqlTarget
from stackflow.plan import DeployPlan
from stackflow.schema_history import HISTORY_TABLE
from stackflow.settings import Settings, get_settings
from tests.fixtures.mariadb import LocalMariaDB
from tests.integration.migration_support import migrate, query, settings, tables, write

pytestmark = pytest.mark.integration


def history(target: MysqlTarget) -> list[tuple[Any, ...]]:
    # These tests' versions are whole numbers: read as numbers (the column holds Flyway's text).
    sql = f"SELECT CAST(version AS UNSIGNED), state FROM {HISTORY_TABLE} ORDER BY installed_rank"
    return query(target, sql)


def cli(app: Settings, target: MysqlTarget, *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    out, err = io.StringIO(), io.StringIO()
    code = cli_run(parser.parse_args(list(argv)), app, lambda: target, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


# --- protected, decided once ------------------------------------------------------------------


def test_an_environment_named_live_of_kind_prod_is_protected_in_the_flow_and_the_cli(
    prefect_server: PrefectServer, fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    """Before, the flow's step read "protected" from the name (live: not prod) and applied what
    the CLI, reading the kind, refused."""
    from prefect import flow
    from prefect.logging.handlers import APILogWorker

    from stackflow.engine.base import Operation
    from stackflow.outcome import NodeOutcome, Status, UpResult
    from stackflow.redact import Redactor
    from tasks.context import RunContext
    from tasks.migrate import migrate_step
    from tests.fixtures.template import template_graph

    folder = tmp_path / "m"
    write(folder, "V1__t.sql", "CREATE TABLE t (id INT);")
    write(folder, "V2__wipe.sql", "DROP TABLE t;")
    mig = {"dir": folder, "wait_timeout_s": 20, "connect_timeout_s": 2, "retries": 0}
    project = tmp_path / "project"
    (project / "environments").mkdir(parents=True)
    (project / "environments" / "live.toml").write_text('kind = "prod"\n')  # named live, kind prod
    app = get_settings("live", project_dir=project, migrations=mig)
    assert app.profile.protected and app.environment == "live"

    # The flow's path: the walk's migrate step, on the database stack's outputs.
    t = fresh_schema
    db = DatabaseOutputs(
        host=t.host,
        port=t.port,
        database=t.database,
        user=t.user,
        password=t.password,
        password_secret_arn="arn:aws:secretsmanager:local:0:secret:db",
        instance_id="db-1",
    )
    ctx = RunContext(app, None, template_graph(), Redactor(), None)  # type: ignore[arg-type]
    deployed = UpResult({}, db)
    upstream = {"database": NodeOutcome("database", Operation.UP, Status.UPDATED, result=deployed)}

    @flow(name="migrate-step-live")
    def step() -> NodeOutcome:
        return migrate_step(ctx, "migrate", upstream)

    state = step(return_state=True)
    APILogWorker.drain_all(timeout=10)
    with pytest.raises(MigrationDestructiveChange, match=r"V2__wipe\.sql: statement 1: drop table"):
        state.result()
    assert tables(fresh_schema) == {HISTORY_TABLE}  # V1 did not run either

    # The CLI's path, with the same settings: the same answer, and the way on.
    code, _, err = cli(app, fresh_schema)
    assert code == 1 and "can lose data in a protected environment" in err
    assert tables(fresh_schema) == {HISTORY_TABLE}
    code, out, err = cli(app, fresh_schema, "--approve-destructive", "2")
    assert (code, err) == (0, "") and "2 applied" in out


# --- a dump's schema lines and client commands ------------------------------------------------

SAKILA = """-- Sakila Sample Database Schema
-- Version 1.5

SET @OLD_UNIQUE_CHECKS=@@UNIQUE_CHECKS, UNIQUE_CHECKS=0;
SET @OLD_FOREIGN_KEY_CHECKS=@@FOREIGN_KEY_CHECKS, FOREIGN_KEY_CHECKS=0;
SET @OLD_SQL_MODE=@@SQL_MODE, SQL_MODE='TRADITIONAL';

DROP SCHEMA IF EXISTS sakila;
CREATE SCHEMA sakila;
USE sakila;

CREATE TABLE actor (
  actor_id SMALLINT UNSIGNED NOT NULL AUTO_INCREMENT,
  first_name VARCHAR(45) NOT NULL,
  PRIMARY KEY (actor_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
"""


@pytest.fixture
def sakila(mariadb: LocalMariaDB) -> Iterator[MysqlTarget]:
    """A database named sakila, as Sakila's own schema file expects."""
    with mariadb.admin() as conn, conn.cursor() as cur:
        cur.execute("DROP DATABASE IF EXISTS sakila")
        grant_database(conn, "sakila", mariadb.target.user)
    yield mariadb.target_for("sakila")
    with mariadb.admin() as conn, conn.cursor() as cur:
        cur.execute("DROP DATABASE IF EXISTS sakila")


def test_sakila_as_published_is_refused_and_the_history_table_survives(
    sakila: MysqlTarget, tmp_path: Path
) -> None:
    folder = tmp_path / "m"
    write(folder, "V1__language.sql", "CREATE TABLE language (id TINYINT UNSIGNED NOT NULL);")
    migrate(sakila, settings(), folder)
    write(folder, "V2__sakila_schema.sql", SAKILA)
    with pytest.raises(MigrationRefused) as info:
        migrate(sakila, settings(), folder)
    message = str(info.value)
    assert (
        "V2__sakila_schema.sql: statement 4 (line 8) `DROP SCHEMA IF EXISTS sakila` drops the "
        f"database being migrated (sakila), and with it the history table {HISTORY_TABLE}"
    ) in message
    assert "strip the schema lines of a dump" in message and "nothing was changed" in message
    assert history(sakila) == [(1, "applied")]
    assert tables(sakila) == {HISTORY_TABLE, "language"}
    # The dry run and the approval's plan refuse it the same way, reading only.
    code, _, err = cli(get_settings(), sakila, "--dry-run", "--dir", str(folder))
    assert code == 1 and "statement 4 (line 8)" in err
    with pytest.raises(MigrationRefused):
        pending_plan(sakila, settings(dir=folder), protected=True)
    # Stripped of its schema lines, the same file applies.
    stripped = SAKILA.replace("DROP SCHEMA IF EXISTS sakila;\nCREATE SCHEMA sakila;\n", "")
    (folder / "V2__sakila_schema.sql").write_text(stripped)
    assert [a.version for a in migrate(sakila, settings(), folder).applied] == [2]
    assert "actor" in tables(sakila)


@pytest.mark.parametrize("command", ["source tables.sql", "\\. tables.sql"])
def test_a_client_command_is_refused_before_any_table_is_created(
    fresh_schema: MysqlTarget, tmp_path: Path, command: str
) -> None:
    folder = tmp_path / "m"
    write(folder, "V1__first.sql", "CREATE TABLE first (id INT);")
    write(
        folder,
        "V2__load.sql",
        f"CREATE TABLE second (id INT);\n{command}\nCREATE TABLE third (id INT);\n",
    )
    with pytest.raises(MigrationRefused) as info:
        migrate(fresh_schema, settings(), folder)
    assert f"V2__load.sql: statement 2 (line 2) `{command}` is a mysql client command" in str(
        info.value
    )
    assert tables(fresh_schema) <= {HISTORY_TABLE}  # not even V1 ran
    assert history(fresh_schema) == []


# --- what the lint cannot check ---------------------------------------------------------------

DYNAMIC = "SET @q = 'DROP TABLE scratch';\nPREPARE s FROM @q;\nEXECUTE s;\nDEALLOCATE PREPARE s;\n"
WIPE = "DELIMITER ;;\nCREATE PROCEDURE wipe() BEGIN DELETE FROM t; END;;\nDELIMITER ;\n"


def test_prepare_execute_and_call_need_review_in_the_plan_and_the_approval(
    fresh_schema: MysqlTarget, tmp_path: Path
) -> None:
    folder = tmp_path / "m"
    write(
        folder,
        "V1__t.sql",
        "CREATE TABLE t (id INT);\nINSERT INTO t VALUES (1);\nCREATE TABLE scratch (id INT);",
    )
    write(folder, "V2__wipe_procedure.sql", WIPE)
    write(folder, "V3__dynamic.sql", DYNAMIC)
    write(folder, "V4__call.sql", "CALL wipe();")
    plan = pending_plan(fresh_schema, settings(dir=folder), protected=True)
    assert [(p.version, [(f.statement, f.kind) for f in p.findings]) for p in plan.pending] == [
        (1, []),
        (2, []),
        (3, [(2, "dynamic_sql"), (3, "dynamic_sql")]),
        (4, [(1, "procedure_call")]),
    ]
    assert all(f.needs_review for _, f in plan.blocking) and len(plan.blocking) == 3
    approval = "\n".join(DeployPlan("prod-1", "local cloud", (), plan).lines())
    assert (
        "! NEEDS REVIEW: statement 2: dynamic SQL (what it runs is built when it runs)" in approval
    )
    assert "! NEEDS REVIEW: statement 1: procedure call (the lint cannot see" in approval
    assert (
        "**NEEDS REVIEW** statement 1: procedure call"
        in DeployPlan("prod-1", "local cloud", (), plan).markdown()
    )
    prod = get_settings(environment="prod", migrations={"dir": folder})
    code, out, _ = cli(prod, fresh_schema, "--dry-run")
    assert code == 0 and "-- needs review: statement 1: procedure call" in out
    code, _, err = cli(prod, fresh_schema)
    assert code == 1 and "run SQL the lint cannot check in a protected environment" in err
    assert "V4__call.sql: needs review: statement 1: procedure call" in err
    assert tables(fresh_schema) == {HISTORY_TABLE}
    # Outside a protected environment they run, as before.
    assert len(migrate(fresh_schema, settings(), folder).applied) == 4
    assert tables(fresh_schema) == {HISTORY_TABLE, "t"}
    assert query(fresh_schema, "SELECT COUNT(*) FROM t") == [(0,)]


# --- baseline ---------------------------------------------------------------------------------


def test_baseline_reports_every_file_it_covers(fresh_schema: MysqlTarget, tmp_path: Path) -> None:
    folder = tmp_path / "m"
    for version, name in enumerate("abc", 1):
        write(folder, f"V{version}__{name}.sql", f"CREATE TABLE {name} (id INT);")
    query(fresh_schema, "CREATE TABLE a (id INT)")
    query(fresh_schema, "CREATE TABLE b (id INT)")
    code, out, err = cli(get_settings(), fresh_schema, "--baseline", "2", "--dir", str(folder))
    assert (code, err) == (0, "")
    assert "2 files up to V2 will never run:" in out
    assert "  V1__a.sql\n" in out and "  V2__b.sql\n" in out and "V3__c.sql" not in out
    code, out, err = cli(get_settings(), fresh_schema, "--dir", str(folder))
    assert (code, err) == (0, "") and "1 applied, 2 already applied" in out
