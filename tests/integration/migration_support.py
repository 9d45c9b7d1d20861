"""Helpers shared by the migration tests: quick settings, writing a file, one query, migrating."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stackflow.migrator import command
from stackflow.migrator.apply import MigrateReport
from stackflow.migrator.connection import connect
from stackflow.migrator.target import MysqlTarget
from stackflow.settings import MigrationSettings


def settings(**overrides: Any) -> MigrationSettings:
    """Migration settings with short waits, for tests."""
    values: dict[str, Any] = {"wait_timeout_s": 20, "connect_timeout_s": 2, "lock_timeout_s": 30}
    return MigrationSettings(**(values | overrides))


def write(folder: Path, name: str, sql: str) -> Path:
    """Write one migration file (making the folder)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(sql)
    return path


def query(target: MysqlTarget, sql: str) -> list[tuple[Any, ...]]:
    """Run one statement on the schema and return its rows."""
    with connect(target, settings()) as conn, conn.cursor() as cur:
        cur.execute(sql)
        return list(cur.fetchall())


def tables(target: MysqlTarget) -> set[str]:
    """The names of the schema's tables."""
    rows = query(
        target, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()"
    )
    return {str(r[0]) for r in rows}


def migrate(
    target: MysqlTarget,
    mig: MigrationSettings,
    folder: Path | None = None,
    *,
    protected: bool = False,
    **options: Any,
) -> MigrateReport:
    """The one migrate command (load -> wait -> migrate); unprotected unless a test says so."""
    return command.migrate(target, mig, protected=protected, folder=folder, **options)
