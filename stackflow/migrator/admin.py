"""The admin commands: `status` (each migration's state, read-only), `repair` (clear failed and
interrupted records) and `baseline` (record an existing schema as migrated up to a version)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple

from stackflow.migrator.connection import connect, migration_lock
from stackflow.migrator.errors import MigrationBaselineError
from stackflow.migrator.files import Migration, load_migrations
from stackflow.migrator.history import (
    HistoryRecord,
    delete_failed,
    insert_baseline,
    read_history,
    update_record,
)
from stackflow.migrator.target import MysqlTarget

if TYPE_CHECKING:
    from stackflow.settings import MigrationSettings

State = Literal[
    "applied", "pending", "failed", "changed", "missing", "baseline", "partial", "interrupted"
]


class MigrationStatus(NamedTuple):
    """One version's state: applied, pending, failed (needs repair), changed (file edited),
    missing (applied, file gone), baseline (covered by a baseline), partial (started, resumes)
    or interrupted (a DDL statement's outcome is unknown: needs repair)."""

    version: int
    description: str
    state: State


def compute_status(
    history: Sequence[HistoryRecord], migrations: Sequence[Migration]
) -> list[MigrationStatus]:
    """Each version's state from the history rows and the files (records without a file too)."""
    files = {m.version: m for m in migrations}
    rows = {r.version: r for r in history}
    baseline = max((r.version for r in history if r.state == "baseline"), default=None)
    out: list[MigrationStatus] = []
    for version in sorted(files.keys() | rows.keys()):
        m, r = files.get(version), rows.get(version)
        description = m.description if m else r.description if r else ""
        state: State
        if r is None:
            covered = baseline is not None and version <= baseline
            state = "baseline" if covered else "pending"
        elif r.state == "baseline":
            state = "baseline"
        elif r.state == "failed":
            state = "failed"
        elif m is None:
            state = "missing"
        elif m.checksum != r.checksum:
            state = "changed"
        elif r.state == "running":
            state = "interrupted" if r.interrupted else "partial"
        else:
            state = "applied"
        out.append(MigrationStatus(version, description, state))
    return out


def status(
    target: MysqlTarget, settings: MigrationSettings, folder: Path | None = None
) -> list[MigrationStatus]:
    """Each migration's state in the database (see `MigrationStatus`). Read-only.

    Args:
        target: the database.
        settings: timeouts and TLS.
        folder: the migrations folder (default: settings.dir).

    Raises:
        MigrationFileError, DatabaseAuthError, TransientDatabaseError, MigrationSQLError.
    """
    migrations = load_migrations(folder or settings.dir)
    with connect(target, settings) as conn:
        return compute_status(read_history(conn, create=False), migrations)


def repair(
    target: MysqlTarget, settings: MigrationSettings, *, mark_ran: bool = False
) -> list[int]:
    """Clear failed records and interrupted statements (under the migration lock).

    A failed file's record is removed, so the fixed file runs again from its start. An
    interrupted file keeps its progress: its in-flight statements run again at the next run, or
    with `mark_ran` (someone checked that they took effect) are recorded as done.

    Returns:
        The versions repaired.

    Raises:
        MigrationLockTimeout, DatabaseAuthError, TransientDatabaseError, MigrationSQLError.
    """
    with connect(target, settings) as conn, migration_lock(conn, target.database, settings):
        history = read_history(conn, create=False, upgrade=True)
        failed = [r.version for r in history if r.state == "failed"]
        interrupted = [r for r in history if r.interrupted]
        if failed:
            delete_failed(conn)
        for r in interrupted:
            done = r.in_flight_to if mark_ran else r.statements_done
            update_record(
                conn,
                r.version,
                "statements_done = %s, in_flight_from = NULL, in_flight_to = NULL",
                done,
            )
        return sorted(failed + [r.version for r in interrupted])


@dataclass(frozen=True)
class Baseline:
    """A baseline recorded: its history row, and every file in the folder it covers."""

    record: HistoryRecord
    covered: list[Migration]


def baseline(
    target: MysqlTarget, settings: MigrationSettings, version: int, folder: Path | None = None
) -> Baseline:
    """Record an existing schema as migrated up to `version`: files up to it never run.

    Args:
        target: the database.
        settings: timeouts, TLS, lock timeout.
        version: the last version the schema already has.
        folder: the migrations folder (default: settings.dir), for the description and the
            files covered.

    Raises:
        MigrationBaselineError: the schema already has migration history, or version < 1.
        MigrationFileError, MigrationLockTimeout, DatabaseAuthError, TransientDatabaseError,
        MigrationSQLError.
    """
    if version < 1:
        raise MigrationBaselineError(f"baseline version must be 1 or more, not {version}")
    migrations = load_migrations(folder or settings.dir)
    files = {m.version: m for m in migrations}
    with connect(target, settings) as conn, migration_lock(conn, target.database, settings):
        history = read_history(conn, upgrade=True)
        if history:
            raise MigrationBaselineError(
                f"{target.address} already has migration history ({len(history)} "
                f"record(s), latest V{history[-1].version}); a baseline is only for a schema "
                "that has never been migrated"
            )
        m = files.get(version)
        description = f"baseline: {m.description}" if m else "baseline"
        insert_baseline(conn, version, description, m.checksum if m else "")
        record = read_history(conn)[0]
    return Baseline(record, [m for m in migrations if m.version <= version])
