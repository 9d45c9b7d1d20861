"""The admin commands: `status` (each migration's state, read-only), `repair` (clear failed and
interrupted records) and `baseline` (record an existing schema as migrated up to a version)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple

from stackflow.migrator.connection import connect, migration_lock
from stackflow.migrator.errors import MigrationBaselineError
from stackflow.migrator.files import Migration, load_migrations
from stackflow.migrator.flyway import history_or_flyway
from stackflow.migrator.history import (
    HistoryRecord,
    delete_failed,
    insert_record,
    read_history,
    update_record,
)
from stackflow.migrator.target import MysqlTarget
from stackflow.migrator.version import EXAMPLES, Version, VersionError

if TYPE_CHECKING:
    from stackflow.settings import MigrationSettings

State = Literal[
    "applied",
    "pending",
    "failed",
    "changed",
    "missing",
    "baseline",
    "partial",
    "interrupted",
    "outdated",
]


class MigrationStatus(NamedTuple):
    """One file's state: applied, pending, failed (needs repair), changed (file edited),
    missing (applied, file gone), baseline (covered by a baseline), partial (started, resumes),
    interrupted (a DDL statement's outcome is unknown: needs repair) or outdated (a repeatable
    file changed since it last ran: it runs again). version: None for a repeatable file."""

    version: Version | None
    description: str
    state: State


def compute_status(
    history: Sequence[HistoryRecord], migrations: Sequence[Migration]
) -> list[MigrationStatus]:
    """Each file's state from the history rows and the files (records without a file too):
    versioned ones by version, then repeatable ones by description."""
    files = {m.key: m for m in migrations}
    rows = {r.key: r for r in history}  # a repeatable's latest row counts
    baseline = max(
        (r.version for r in history if r.state == "baseline" and r.version), default=None
    )
    versions = {r.key: r.version for r in history if r.version}
    versions |= {m.key: m.version for m in migrations if m.version}  # shown as the file has it
    repeatable = sorted(
        {m.description for m in migrations if m.repeatable}
        | {r.description for r in history if r.version is None}
    )
    keys = sorted(versions, key=lambda k: versions[k]) + [f"R__{d}" for d in repeatable]
    out: list[MigrationStatus] = []
    for key in keys:
        m, r = files.get(key), rows.get(key)
        description = m.description if m else r.description if r else ""
        state: State
        if r is None:
            version = versions.get(key)
            covered = baseline is not None and version is not None and version <= baseline
            state = "baseline" if covered else "pending"
        elif r.state == "baseline":
            state = "baseline"
        elif r.state == "failed":
            state = "failed"
        elif m is None:
            state = "missing"
        elif m.checksum != r.checksum:
            state = "outdated" if m.repeatable and r.state == "applied" else "changed"
        elif r.state == "running":
            state = "interrupted" if r.interrupted else "partial"
        else:
            state = "applied"
        out.append(MigrationStatus(versions.get(key), description, state))
    return out


def status(
    target: MysqlTarget, settings: MigrationSettings, folder: Path | None = None
) -> list[MigrationStatus]:
    """Each migration's state in the database (see `MigrationStatus`). Read-only: a Flyway
    history not adopted yet is read as the next run would adopt it.

    Args:
        target: the database.
        settings: timeouts and TLS.
        folder: the migrations folder (default: settings.dir).

    Raises:
        MigrationFileError, DatabaseAuthError, TransientDatabaseError, MigrationSQLError,
        MigrationFailedBefore, MigrationChecksumError (Flyway's history cannot be adopted).
    """
    migrations = load_migrations(folder or settings.dir)
    with connect(target, settings) as conn:
        history = history_or_flyway(conn, migrations, write=False)
        return compute_status(history.records, migrations)


def repair(
    target: MysqlTarget, settings: MigrationSettings, *, mark_ran: bool = False
) -> list[str]:
    """Clear failed records and interrupted statements (under the migration lock).

    A failed file's record is removed, so the fixed file runs again from its start. An
    interrupted file keeps its progress: its in-flight statements run again at the next run, or
    with `mark_ran` (someone checked that they took effect) are recorded as done.

    Returns:
        The files repaired (`V1.1`, `R__views`).

    Raises:
        MigrationLockTimeout, DatabaseAuthError, TransientDatabaseError, MigrationSQLError.
    """
    with connect(target, settings) as conn, migration_lock(conn, target.database, settings):
        history = read_history(conn, create=False, upgrade=True)
        failed = [r for r in history if r.state == "failed"]
        interrupted = [r for r in history if r.interrupted]
        if failed:
            delete_failed(conn)
        for r in interrupted:
            done = r.in_flight_to if mark_ran else r.statements_done
            update_record(
                conn,
                r.rank,
                "statements_done = %s, in_flight_from = NULL, in_flight_to = NULL",
                done,
            )
        return [r.label for r in failed + interrupted]


@dataclass(frozen=True)
class Baseline:
    """A baseline recorded: its history row, and every file in the folder it covers."""

    record: HistoryRecord
    covered: list[Migration]


def baseline(
    target: MysqlTarget,
    settings: MigrationSettings,
    version: str | int,
    folder: Path | None = None,
) -> Baseline:
    """Record an existing schema as migrated up to `version`: files up to it never run.

    Args:
        target: the database.
        settings: timeouts, TLS, lock timeout.
        version: the last version the schema already has (`12`, `2.1` ...).
        folder: the migrations folder (default: settings.dir), for the description and the
            files covered.

    Raises:
        MigrationBaselineError: the schema already has migration history, or the version is not
            one (naming the part that is wrong) or is 0.
        MigrationFileError, MigrationLockTimeout, DatabaseAuthError, TransientDatabaseError,
        MigrationSQLError.
    """
    try:
        at = Version.parse(str(version))
    except VersionError as exc:
        raise MigrationBaselineError(f"baseline: {exc}; versions look like {EXAMPLES}") from None
    if at.parts == (0,):
        raise MigrationBaselineError(f"baseline version must be above 0, not {version}")
    migrations = load_migrations(folder or settings.dir)
    files = {m.key: m for m in migrations}
    with connect(target, settings) as conn, migration_lock(conn, target.database, settings):
        history = read_history(conn, upgrade=True)
        if history:
            raise MigrationBaselineError(
                f"{target.address} already has migration history ({len(history)} "
                f"record(s), latest {history[-1].label}); a baseline is only for a schema "
                "that has never been migrated"
            )
        m = files.get(f"V{at.canonical}")
        description = f"baseline: {m.description}" if m else "baseline"
        when = datetime.now(UTC).replace(tzinfo=None)
        row = HistoryRecord(
            at, description, m.checksum if m else "", when, 0, True, None, "baseline",
            type="BASELINE", script=m.filename if m else "",
            flyway_checksum=m.flyway_checksum if m else None,
        )  # fmt: skip
        insert_record(conn, row)
        record = read_history(conn)[0]
    covered = [m for m in migrations if m.version is not None and m.version <= at]
    return Baseline(record, covered)
