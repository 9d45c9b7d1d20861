"""Migrations that cannot harm their own bookkeeping, against a real MariaDB: "protected" decided
once from the environment's kind (the flow's migrate step and the CLI agree)."""

from __future__ import annotations

import argparse
import io
from pathlib import Path
from typing import Any

import pytest

from flows.migrate_cli import add_arguments
from flows.migrate_cli import run as cli_run
from programs.database import DatabaseOutputs
from stackflow.localprefect import PrefectServer
from stackflow.migrations.errors import MigrationDestructiveChange
from stackflow.migrations.target import MysqlTarget
from stackflow.schema_history import HISTORY_TABLE
from stackflow.settings import Settings, get_settings
from tests.integration.migration_support import query, write

pytestmark = pytest.mark.integration


def tables(target: MysqlTarget) -> set[str]:
    rows = query(
        target, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()"
    )
    return {str(r[0]) for r in rows}


def history(target: MysqlTarget) -> list[tuple[Any, ...]]:
    return query(target, f"SELECT version, state FROM {HISTORY_TABLE} ORDER BY version")


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

    from flows.walk import migrate_step
    from stackflow.graph import GRAPH
    from stackflow.redact import Redactor
    from tasks.stacks import RunContext, StackOutcome

    folder = tmp_path / "m"
    write(folder, "V1__t.sql", "CREATE TABLE t (id INT);")
    write(folder, "V2__wipe.sql", "DROP TABLE t;")
    mig = {"dir": folder, "wait_timeout_s": 20, "connect_timeout_s": 2, "retries": 0}
    app = get_settings(environment="live", kind="prod", migrations=mig)
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
    ctx = RunContext(app, None, GRAPH, Redactor(), None)  # type: ignore[arg-type]
    upstream = {"database": StackOutcome("database", "up", "updated", typed=db)}

    @flow(name="migrate-step-live")
    def step() -> StackOutcome:
        return migrate_step(ctx, "live", upstream)

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
