"""Adopting a database Flyway already manages: its `flyway_schema_history` is read (never written)
the first time the runner finds no history of its own, and its applied versions become the
runner's starting point, each file's checksum compared with the one Flyway recorded.

Decisions (docs/guides/migrating-from-flyway.md says them to users):
  failed rows       refused: Flyway itself refuses to go on until `flyway repair`
  baseline rows     a baseline at that version (files up to it never run)
  schema rows       skipped (Flyway created the schema; nothing to run)
  delete rows       the version (or repeatable) they mark deleted counts as never applied
  undo rows         refused: the runner has no undo migrations
  repeatable rows   the latest per description; a file whose checksum differs runs again
  a changed file    refused, naming it and both checksums (Flyway's validate refuses it too)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pymysql
import pymysql.cursors

from stackflow.migrator.connection import MysqlConnection, server_error
from stackflow.migrator.errors import MigrationChecksumError, MigrationFailedBefore
from stackflow.migrator.files import Migration
from stackflow.migrator.history import HistoryRecord, insert_record, read_history
from stackflow.migrator.version import Version
from stackflow.schema_history import FLYWAY_TABLE

_NO_SUCH_TABLE = 1146


@dataclass(frozen=True)
class FlywayRow:
    """One row of Flyway's history table, as Flyway wrote it."""

    installed_rank: int
    version: str | None
    description: str
    type: str
    script: str
    checksum: int | None
    installed_on: datetime  # UTC
    execution_time: int
    success: bool


def read_flyway_history(conn: MysqlConnection) -> list[FlywayRow] | None:
    """Flyway's history rows in the order Flyway wrote them; None when the table is missing."""
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        try:
            cur.execute(
                "SELECT installed_rank, version, description, type, script, checksum, "
                "UNIX_TIMESTAMP(installed_on) AS installed_on, execution_time, success "
                f"FROM {FLYWAY_TABLE} ORDER BY installed_rank"
            )
        except pymysql.err.ProgrammingError as exc:
            if server_error(exc)[0] != _NO_SUCH_TABLE:
                raise
            return None
        rows: list[dict[str, Any]] = list(cur.fetchall())
    return [
        FlywayRow(
            int(r["installed_rank"]),
            None if r["version"] is None else str(r["version"]),
            str(r["description"]),
            str(r["type"]),
            str(r["script"]),
            None if r["checksum"] is None else int(r["checksum"]),
            datetime.fromtimestamp(float(r["installed_on"] or 0), UTC).replace(tzinfo=None),
            int(r["execution_time"] or 0),
            bool(r["success"]),
        )
        for r in rows
    ]


def adopt(rows: Sequence[FlywayRow], migrations: Sequence[Migration]) -> list[HistoryRecord]:
    """The runner's history records for what Flyway's rows say was applied (see the module's
    decisions). Pure: nothing is read or written.

    Raises:
        MigrationFailedBefore: Flyway recorded a failed migration, or an undo.
        MigrationChecksumError: an applied file differs from what Flyway applied.
    """
    by_key = {m.key: m for m in migrations}
    kept: dict[str, HistoryRecord] = {}
    for row in rows:
        kind = row.type.upper()
        what = f"{FLYWAY_TABLE} row {row.installed_rank} ({row.script or row.description})"
        if not row.success:
            raise MigrationFailedBefore(
                f"{what} is recorded by Flyway as failed; nothing was adopted. Finish it the "
                "Flyway way first (check the schema, then `flyway repair`), or fix the schema and "
                "delete that row, then migrate again"
            )
        if kind.startswith("UNDO"):
            raise MigrationFailedBefore(
                f"{what} is a Flyway undo; stackflow has no undo migrations and cannot tell what "
                "the schema holds: finish with Flyway, or baseline the schema instead "
                "(`migrate --baseline VERSION`)"
            )
        version = Version.of_record(row.version)
        if kind == "SCHEMA" or (row.version is not None and version is None):
            continue  # Flyway created the schema (version 0), or a marker with no version
        key = f"V{version.canonical}" if version else f"R__{row.description}"
        if kind == "DELETE":
            kept.pop(key, None)
            continue
        if "BASELINE" in kind:
            kept[key] = _record(row, version, "", "baseline")
            continue
        m = by_key.get(key)
        if m is not None and version is not None and row.checksum != m.flyway_checksum:
            raise MigrationChecksumError(
                f"{m.path} differs from what Flyway applied as version {version} (Flyway's "
                f"checksum {row.checksum}, the file's now {m.flyway_checksum}); applied files must "
                "not be edited: restore it, and put the change in a new file with a higher version"
            )
        same = m is not None and row.checksum == m.flyway_checksum
        # A repeatable file that changed since Flyway ran it keeps no checksum, so it runs again.
        kept[key] = _record(row, version, m.checksum if m is not None and same else "", "applied")
    return sorted(kept.values(), key=lambda r: r.rank)


def _record(row: FlywayRow, version: Version | None, checksum: str, state: Any) -> HistoryRecord:
    return HistoryRecord(
        version,
        row.description,
        checksum,
        row.installed_on,
        row.execution_time,
        True,
        None,
        state,
        rank=row.installed_rank,
        type=row.type,
        script=row.script,
        flyway_checksum=row.checksum,
    )


@dataclass(frozen=True)
class History:
    """The runner's history, and how many of its records were adopted from Flyway's now."""

    records: list[HistoryRecord]
    adopted: int = 0


def history_or_flyway(
    conn: MysqlConnection, migrations: Sequence[Migration], *, write: bool
) -> History:
    """The runner's history; when it has none and Flyway's table exists, Flyway's applied
    migrations adopted (written to the runner's history when `write`: callers hold the lock).

    Raises:
        MigrationFailedBefore, MigrationChecksumError: see `adopt`; nothing is written then.
    """
    history = read_history(conn, create=write, upgrade=write)
    if history:
        return History(history)
    rows = read_flyway_history(conn)
    if not rows:
        return History(history)
    adopted = adopt(rows, migrations)
    if not write:
        return History(adopted, len(adopted))
    conn.begin()  # all of Flyway's records or none: a later run adopts only into an empty history
    for record in adopted:
        insert_record(conn, record)
    conn.commit()
    return History(read_history(conn), len(adopted))
