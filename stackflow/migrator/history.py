"""The history table: one row per migration applied (a repeatable one gets a new row each time
it runs again), with its checksum, duration, outcome and progress (statements done, statements
in flight), read in one SELECT and written only through this module.

Its columns follow Flyway's own table where they mean the same (installed_rank, version as text,
type, script), so versions like `1.1` and repeatable migrations (version NULL) fit. Tables written
by older runners (an integer version as the key, no progress columns) are read as they are, and
upgraded in place, rows kept, by callers holding the migration lock.
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
from stackflow.migrator.version import MAX_VERSION_CHARS, Version
from stackflow.schema_history import HISTORY_TABLE

_NO_SUCH_TABLE = 1146
MAX_ERROR_CHARS = 2000
MAX_SCRIPT_CHARS = 1000

_HISTORY_DDL = f"""CREATE TABLE IF NOT EXISTS {HISTORY_TABLE} (
    installed_rank INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    version VARCHAR({MAX_VERSION_CHARS}) NULL COMMENT 'NULL: a repeatable migration',
    description VARCHAR({MAX_DESCRIPTION_CHARS}) NOT NULL,
    type VARCHAR(20) NOT NULL DEFAULT 'SQL' COMMENT 'as Flyway: SQL or BASELINE',
    script VARCHAR({MAX_SCRIPT_CHARS}) NOT NULL DEFAULT '',
    checksum CHAR(64) NOT NULL,
    flyway_checksum INT NULL COMMENT 'the CRC32 Flyway computes for the file',
    applied_at DATETIME(6) NOT NULL COMMENT 'UTC',
    duration_ms INT UNSIGNED NOT NULL,
    success TINYINT(1) NOT NULL,
    error TEXT NULL,
    state VARCHAR(16) NOT NULL DEFAULT 'applied',
    statements_done INT UNSIGNED NOT NULL DEFAULT 0,
    statements_total INT UNSIGNED NOT NULL DEFAULT 0,
    in_flight_from INT UNSIGNED NULL,
    in_flight_to INT UNSIGNED NULL,
    UNIQUE KEY version (version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""

# Columns added since the first release; a table without them gains them under the lock.
_PROGRESS_COLUMNS = {
    "state": "VARCHAR(16) NOT NULL DEFAULT 'applied'",
    "statements_done": "INT UNSIGNED NOT NULL DEFAULT 0",
    "statements_total": "INT UNSIGNED NOT NULL DEFAULT 0",
    "in_flight_from": "INT UNSIGNED NULL",
    "in_flight_to": "INT UNSIGNED NULL",
}
# The key and the Flyway-shaped columns: an integer version as the key became text, NULL allowed.
_KEY_UPGRADE = (
    "DROP PRIMARY KEY, "
    "ADD COLUMN installed_rank INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY FIRST, "
    f"MODIFY COLUMN version VARCHAR({MAX_VERSION_CHARS}) NULL "
    "COMMENT 'NULL: a repeatable migration', "
    "ADD UNIQUE KEY version (version), "
    "ADD COLUMN type VARCHAR(20) NOT NULL DEFAULT 'SQL' COMMENT 'as Flyway: SQL or BASELINE' "
    "AFTER description, "
    f"ADD COLUMN script VARCHAR({MAX_SCRIPT_CHARS}) NOT NULL DEFAULT '' AFTER type, "
    "ADD COLUMN flyway_checksum INT NULL COMMENT 'the CRC32 Flyway computes for the file' "
    "AFTER checksum"
)

RecordState = Literal["applied", "failed", "running", "baseline"]


@dataclass(frozen=True)
class HistoryRecord:
    """One row of the history table.

    version: None for a repeatable migration (it is known by its description). state: applied,
    failed, running (started, not finished) or baseline (an existing schema recorded as applied
    up to this version). statements_done: statements committed so far. in_flight_from/to:
    statements that were running when the run stopped (None: none). rank: the row's
    installed_rank (0 in a table not upgraded yet).
    """

    version: Version | None
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
    rank: int = 0
    type: str = "SQL"
    script: str = ""
    flyway_checksum: int | None = None

    def __post_init__(self) -> None:
        if self.state is None:  # a row written before progress was recorded
            object.__setattr__(self, "state", "applied" if self.success else "failed")

    @property
    def interrupted(self) -> bool:
        """A statement MySQL commits implicitly was in flight when the run stopped."""
        return self.state == "running" and self.in_flight_from is not None

    @property
    def key(self) -> str:
        """The key of the file it records (see `Migration.key`)."""
        return f"V{self.version.canonical}" if self.version else f"R__{self.description}"

    @property
    def label(self) -> str:
        """`V<version>` (its numbers: `V4` for `V004`) or `R__<description>`, for messages."""
        return self.key


def _upgrade_history(conn: MysqlConnection, columns: Collection[str]) -> None:
    """Bring a table written by an older runner to this one's columns, rows kept (under the
    lock). One ALTER: MariaDB applies it whole or not at all."""
    changes = [f"ADD COLUMN {c} {d}" for c, d in _PROGRESS_COLUMNS.items() if c not in columns]
    if "installed_rank" not in columns:
        changes.append(_KEY_UPGRADE)  # rows are numbered in the old key's order: by version
    if changes:
        with conn.cursor() as cur:
            cur.execute(f"ALTER TABLE {HISTORY_TABLE} {', '.join(changes)}")
            if "state" not in columns:
                cur.execute(f"UPDATE {HISTORY_TABLE} SET state = 'failed' WHERE success = 0")


def read_history(
    conn: MysqlConnection, *, create: bool = True, upgrade: bool = False
) -> list[HistoryRecord]:
    """Every history row, in the order they were written; one SELECT (the table is created only
    when it is missing).

    Reads tables written by older runners too (integer versions, no progress columns).

    Args:
        conn: an open connection to the schema.
        create: create the table when missing (False for read-only callers such as `status`).
        upgrade: bring an older table to the current columns (callers holding the lock).
    """
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        try:
            cur.execute(f"SELECT * FROM {HISTORY_TABLE}")
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
        if "installed_rank" not in columns:
            return read_history(conn, create=False)  # the ranks the upgrade gave the rows
    records = [_record(r) for r in rows]
    return sorted(records, key=lambda r: (r.rank, r.version.parts if r.version else ()))


def _record(r: dict[str, Any]) -> HistoryRecord:
    checksum = r.get("flyway_checksum")
    return HistoryRecord(
        Version.of_record(r["version"]),
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
        int(r.get("installed_rank") or 0),
        str(r.get("type") or "SQL"),
        str(r.get("script") or ""),
        None if checksum is None else int(checksum),
    )


def update_record(conn: MysqlConnection, rank: int, sets: str, *args: object) -> None:
    """UPDATE one row (by installed_rank): `sets` is the SET clause, `args` its parameters."""
    with conn.cursor() as cur:
        cur.execute(f"UPDATE {HISTORY_TABLE} SET {sets} WHERE installed_rank = %s", (*args, rank))


def start_record(conn: MysqlConnection, m: Migration, total: int) -> int:
    """Record that `m` started (state running, nothing done yet); returns the row's rank."""
    with conn.cursor() as cur:
        cur.execute(
            f"INSERT INTO {HISTORY_TABLE} (version, description, type, script, checksum, "
            "flyway_checksum, applied_at, duration_ms, success, error, state, statements_done, "
            "statements_total) "
            "VALUES (%s, %s, 'SQL', %s, %s, %s, UTC_TIMESTAMP(6), 0, 0, NULL, 'running', 0, %s)",
            (
                m.version.text if m.version else None,
                m.description,
                m.filename[:MAX_SCRIPT_CHARS],
                m.checksum,
                m.flyway_checksum,
                total,
            ),
        )
        return int(cur.lastrowid)


def insert_record(conn: MysqlConnection, r: HistoryRecord) -> None:
    """Write a finished record as it is (a baseline, or a row adopted from Flyway's history)."""
    with conn.cursor() as cur:
        cur.execute(
            f"INSERT INTO {HISTORY_TABLE} (version, description, type, script, checksum, "
            "flyway_checksum, applied_at, duration_ms, success, error, state, statements_done, "
            "statements_total) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 0, 0)",
            (
                r.version.text if r.version else None,
                r.description[:MAX_DESCRIPTION_CHARS],
                r.type,
                r.script[:MAX_SCRIPT_CHARS],
                r.checksum,
                r.flyway_checksum,
                r.applied_at,
                r.duration_ms,
                r.success,
                r.error,
                r.state,
            ),
        )


def progress_sql(database: str, sets: str = "statements_done = %s") -> str:
    """An UPDATE of a row's progress that a file's own session runs (parameters: those of
    `sets`, then the rank), qualified because the file may have switched the session to another
    database (USE)."""
    quoted = database.replace("`", "``")
    return f"UPDATE `{quoted}`.{HISTORY_TABLE} SET {sets} WHERE installed_rank = %s"


def delete_failed(conn: MysqlConnection) -> None:
    """Remove the failed records, so their fixed files run again from the start."""
    with conn.cursor() as cur:
        cur.execute(f"DELETE FROM {HISTORY_TABLE} WHERE state = 'failed'")
