"""The history table: one row per migration file with its checksum, duration, outcome and progress
(statements done, statements in flight), read in one SELECT and written only through this module.

Tables written by older runners (without the progress columns) are read as they are, and
upgraded in place by callers holding the migration lock.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import pymysql
import pymysql.cursors

from stackflow.migrator.connection import MysqlConnection, server_error
from stackflow.migrator.files import MAX_DESCRIPTION_CHARS, Migration
from stackflow.schema_history import HISTORY_TABLE

_NO_SUCH_TABLE = 1146
MAX_ERROR_CHARS = 2000

_HISTORY_DDL = f"""CREATE TABLE IF NOT EXISTS {HISTORY_TABLE} (
    version BIGINT UNSIGNED NOT NULL PRIMARY KEY,
    description VARCHAR({MAX_DESCRIPTION_CHARS}) NOT NULL,
    checksum CHAR(64) NOT NULL,
    applied_at DATETIME(6) NOT NULL COMMENT 'UTC',
    duration_ms INT UNSIGNED NOT NULL,
    success TINYINT(1) NOT NULL,
    error TEXT NULL,
    state VARCHAR(16) NOT NULL DEFAULT 'applied',
    statements_done INT UNSIGNED NOT NULL DEFAULT 0,
    statements_total INT UNSIGNED NOT NULL DEFAULT 0,
    in_flight_from INT UNSIGNED NULL,
    in_flight_to INT UNSIGNED NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""

# Columns added since the first release; a table without them is upgraded in place under the lock.
_NEW_COLUMNS = {
    "state": "VARCHAR(16) NOT NULL DEFAULT 'applied'",
    "statements_done": "INT UNSIGNED NOT NULL DEFAULT 0",
    "statements_total": "INT UNSIGNED NOT NULL DEFAULT 0",
    "in_flight_from": "INT UNSIGNED NULL",
    "in_flight_to": "INT UNSIGNED NULL",
}

RecordState = Literal["applied", "failed", "running", "baseline"]


@dataclass(frozen=True)
class HistoryRecord:
    """One row of the history table.

    state: applied, failed, running (started, not finished) or baseline (an existing schema
    recorded as applied up to this version). statements_done: statements committed so far.
    in_flight_from/to: statements that were running when the run stopped (None: none).
    """

    version: int
    description: str
    checksum: str
    applied_at: datetime
    duration_ms: int
    success: bool
    error: str | None
    state: RecordState | None = None
    statements_done: int = 0
    in_flight_from: int | None = None
    in_flight_to: int | None = None

    def __post_init__(self) -> None:
        if self.state is None:  # a row written before progress was recorded
            object.__setattr__(self, "state", "applied" if self.success else "failed")

    @property
    def interrupted(self) -> bool:
        """A statement MySQL commits implicitly was in flight when the run stopped."""
        return self.state == "running" and self.in_flight_from is not None


def _upgrade_history(conn: MysqlConnection, columns: Collection[str]) -> None:
    """Add the progress columns to a table written by an older runner (under the lock)."""
    missing = [c for c in _NEW_COLUMNS if c not in columns]
    if missing:
        with conn.cursor() as cur:
            adds = ", ".join(f"ADD COLUMN {c} {_NEW_COLUMNS[c]}" for c in missing)
            cur.execute(f"ALTER TABLE {HISTORY_TABLE} {adds}")
            cur.execute(f"UPDATE {HISTORY_TABLE} SET state = 'failed' WHERE success = 0")


def read_history(
    conn: MysqlConnection, *, create: bool = True, upgrade: bool = False
) -> list[HistoryRecord]:
    """Every history row, by version; one SELECT (the table is created only when it is missing).

    Reads tables written by older runners too (without the progress columns).

    Args:
        conn: an open connection to the schema.
        create: create the table when missing (False for read-only callers such as `status`).
        upgrade: add the progress columns to an older table (callers holding the lock).
    """
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        try:
            cur.execute(f"SELECT * FROM {HISTORY_TABLE} ORDER BY version")
        except pymysql.err.ProgrammingError as exc:
            if server_error(exc)[0] != _NO_SUCH_TABLE:
                raise
            if create:
                cur.execute(_HISTORY_DDL)
            return []
        rows: list[dict[str, Any]] = list(cur.fetchall())
        columns = [d[0] for d in cur.description or ()]
    if upgrade:
        _upgrade_history(conn, columns)
    return [
        HistoryRecord(
            int(r["version"]),
            str(r["description"]),
            str(r["checksum"]),
            r["applied_at"],
            int(r["duration_ms"]),
            bool(r["success"]),
            r["error"],
            r.get("state"),
            int(r.get("statements_done") or 0),
            r.get("in_flight_from"),
            r.get("in_flight_to"),
        )
        for r in rows
    ]


def update_record(conn: MysqlConnection, version: int, sets: str, *args: object) -> None:
    """UPDATE one version's row: `sets` is the SET clause, `args` its parameters."""
    with conn.cursor() as cur:
        cur.execute(f"UPDATE {HISTORY_TABLE} SET {sets} WHERE version = %s", (*args, version))


def start_record(conn: MysqlConnection, m: Migration, total: int) -> None:
    """Record that `m` started (state running, nothing done yet)."""
    with conn.cursor() as cur:
        cur.execute(
            f"INSERT INTO {HISTORY_TABLE} (version, description, checksum, applied_at, "
            "duration_ms, success, error, state, statements_done, statements_total) "
            "VALUES (%s, %s, %s, UTC_TIMESTAMP(6), 0, 0, NULL, 'running', 0, %s)",
            (m.version, m.description, m.checksum, total),
        )


def progress_sql(database: str) -> str:
    """The UPDATE of statements_done that a file's own session runs (parameters: done, version),
    qualified because the file may have switched the session to another database (USE)."""
    quoted = database.replace("`", "``")
    return f"UPDATE `{quoted}`.{HISTORY_TABLE} SET statements_done = %s WHERE version = %s"


def delete_failed(conn: MysqlConnection) -> None:
    """Remove the failed records, so their fixed files run again from the start."""
    with conn.cursor() as cur:
        cur.execute(f"DELETE FROM {HISTORY_TABLE} WHERE state = 'failed'")


def insert_baseline(conn: MysqlConnection, version: int, description: str, checksum: str) -> None:
    """Record a baseline at `version`: files up to it never run."""
    with conn.cursor() as cur:
        cur.execute(
            f"INSERT INTO {HISTORY_TABLE} (version, description, checksum, applied_at, "
            "duration_ms, success, error, state) "
            "VALUES (%s, %s, %s, UTC_TIMESTAMP(6), 0, 1, NULL, 'baseline')",
            (version, description[:MAX_DESCRIPTION_CHARS], checksum),
        )
