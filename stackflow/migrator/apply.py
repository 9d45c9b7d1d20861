"""Applying pending files, in version order, under the schema's migration lock, with progress
recorded per statement.

A data statement (INSERT, UPDATE, DELETE, SET ...) commits in one transaction with its progress
record, so after a crash the file resumes at the next statement. MySQL commits DDL implicitly, so
a DDL statement is marked "in flight" before it runs; a crash between it and its record is the one
ambiguous case, and the runner refuses, naming the file and statement, until someone checks and
runs `repair`. Each file runs in a fresh session; a resumed one replays its session statements
(SET, USE) first.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal, NoReturn

import pymysql
import pymysql.cursors

from stackflow.migrator.checks import prepared_statements
from stackflow.migrator.connection import (
    MysqlConnection,
    classify,
    connect,
    migration_lock,
    server_error,
)
from stackflow.migrator.errors import (
    MigrationDestructiveChange,
    MigrationInterrupted,
    MigrationSQLError,
    TransientDatabaseError,
)
from stackflow.migrator.files import Migration
from stackflow.migrator.history import (
    MAX_ERROR_CHARS,
    HistoryRecord,
    progress_sql,
    start_record,
    update_record,
)
from stackflow.migrator.pins import check_pinned
from stackflow.migrator.plan import (
    REPAIR_COMMAND,
    checked,
    destructive_refusal,
    interrupted_message,
    read_plan,
)
from stackflow.migrator.splitter import Statement
from stackflow.migrator.target import MysqlTarget
from stackflow.migrator.version import Version

if TYPE_CHECKING:
    from stackflow.settings import MigrationSettings

StatementKind = Literal["data", "session", "ddl", "open", "close"]
_DATA = {"INSERT", "UPDATE", "DELETE", "REPLACE", "SELECT", "WITH", "VALUES", "DO", "LOAD"}


def statement_kind(st: Statement) -> StatementKind:
    """How a statement commits: data (in a transaction), session (SET, USE: replayed when a file
    resumes), ddl (implicit commit), or the open/close of a LOCK TABLES or transaction region."""
    word = st.keyword
    if word == "SET":
        rest = st.sql.upper()
        global_like = re.match(r"(?:\s|/\*!\d*)*SET\s+(GLOBAL|PASSWORD|DEFAULT|ROLE)\b", rest)
        return "ddl" if global_like else "session"
    if word == "USE":
        return "session"
    if word in _DATA:
        return "data"
    if word in ("LOCK", "START"):
        return "open"
    if word == "BEGIN":
        return "ddl" if re.search(r"^\W*BEGIN\s+NOT\b", st.sql.upper()) else "open"
    if word in ("UNLOCK", "COMMIT", "ROLLBACK"):
        return "close"
    return "ddl"


@dataclass(frozen=True)
class Unit:
    """Statements recorded together: one data statement (atomic with its record), one DDL
    statement, or a LOCK TABLES / transaction region (marked in flight while it runs)."""

    first: int
    last: int
    atomic: bool


def units_of(statements: Sequence[Statement]) -> list[Unit]:
    """Group a file's statements into the units their progress is recorded by."""
    out: list[Unit] = []
    region: int | None = None
    for st in statements:
        kind = statement_kind(st)
        if region is not None:
            if kind == "close" or st.number == len(statements):
                out.append(Unit(region, st.number, False))
                region = None
            continue
        if kind == "open" and st.number < len(statements):
            region = st.number
        else:
            out.append(Unit(st.number, st.number, kind in ("data", "session", "close")))
    return out


@dataclass(frozen=True)
class AppliedMigration:
    """A file this run applied (statements counts all of it; first_statement > 1: resumed;
    version None for a repeatable file)."""

    version: Version | None
    description: str
    filename: str
    statements: int
    duration_s: float
    first_statement: int = 1


@dataclass
class MigrateReport:
    """What a run did: files applied now, how many were applied (or baselined) before, files
    applied before whose file is gone (`V1.1`, `R__views`), how long it took, and how many
    records it adopted from Flyway's history."""

    applied: list[AppliedMigration] = field(default_factory=list)
    already_applied: int = 0
    duration_s: float = 0.0
    missing: list[str] = field(default_factory=list)
    version: Version | None = None  # the schema's version after the run (None: nothing applied)
    adopted_from_flyway: int = 0


def _session_replay(statements: Sequence[Statement], before: int) -> list[Statement]:
    # A resumed file runs in a new session: its earlier session statements (sql_mode, FK checks,
    # character set, user variables, the current database) are run again first.
    return [s for s in statements[: before - 1] if statement_kind(s) == "session"]


@dataclass
class _Progress:
    """Where a file's run is: the statement being sent and the unit marked in flight."""

    current: Statement | None = None
    in_flight: Unit | None = None


def _fail(
    control: MysqlConnection,
    rank: int,
    m: Migration,
    statements: Sequence[Statement],
    start: int,
    progress: _Progress,
    exc: BaseException,
    target: MysqlTarget,
    began: float,
) -> NoReturn:
    """Record a failed statement, or say how a lost connection is resumed; always raises."""
    err = classify(exc, target)
    st = progress.current
    number = st.number if st else start
    if isinstance(err, MigrationSQLError) and isinstance(exc, pymysql.err.MySQLError):
        code, message = server_error(exc)
        what = f"statement {number} of {len(statements)} (line {st.line if st else 0})"
        update_record(
            control,
            rank,
            "state = 'failed', success = 0, error = %s, duration_ms = %s, "
            "in_flight_from = NULL, in_flight_to = NULL",
            f"{what}: ({code}) {message}"[:MAX_ERROR_CHARS],
            round((time.monotonic() - began) * 1000),
        )
        raise MigrationSQLError(
            f"{m.filename}: {what} failed: ({code}) {message}. The file is recorded as "
            "failed; earlier statements were committed (MySQL commits DDL): check the "
            f"schema, fix the file, then run `{REPAIR_COMMAND}` and migrate again"
        ) from None
    unit = progress.in_flight
    if unit is not None and isinstance(err, TransientDatabaseError):
        # The DDL may or may not have been committed: never retried blindly.
        record = HistoryRecord(
            m.version, m.description, m.checksum, datetime.now(), 0, False, None,
            "running", unit.first - 1, unit.first, unit.last, rank,
        )  # fmt: skip
        raise MigrationInterrupted(
            f"{m.filename}: connection lost ({err}); "
            + interrupted_message(record, f"{record.label} ({m.path})")
        ) from None
    if isinstance(err, TransientDatabaseError):
        raise TransientDatabaseError(
            f"{m.filename}: {err}; the statements before {number} are recorded, so a retry "
            f"resumes at statement {number}"
        ) from None
    raise err from None


def _run_units(
    control: MysqlConnection,
    cur: pymysql.cursors.Cursor,
    database: str,
    rank: int,
    statements: Sequence[Statement],
    start: int,
    progress: _Progress,
) -> None:
    by_number = {s.number: s for s in statements}
    record = progress_sql(database)
    for st in _session_replay(statements, start):
        progress.current = st
        cur.execute(st.sql)
    for unit in units_of(statements):
        if unit.last < start:
            continue
        if unit.atomic:
            progress.current = st = by_number[unit.first]
            session = statement_kind(st) == "session"  # replayed on resume; no transaction
            if not session:
                # The statement and its progress record commit together, or neither does.
                cur.execute("START TRANSACTION")
            cur.execute(st.sql)
            cur.execute(record, (unit.last, rank))
            cur.execute("COMMIT")
            continue
        update_record(
            control, rank, "in_flight_from = %s, in_flight_to = %s", unit.first, unit.last
        )
        progress.in_flight = unit
        for number in range(unit.first, unit.last + 1):
            progress.current = by_number[number]
            cur.execute(progress.current.sql)
        cur.execute("COMMIT")  # in case the file turned autocommit off
        update_record(
            control,
            rank,
            "statements_done = %s, in_flight_from = NULL, in_flight_to = NULL",
            unit.last,
        )
        progress.in_flight = None  # only once recorded: until then the marker stands
    cur.execute("COMMIT")


def _apply_file(
    control: MysqlConnection,
    m: Migration,
    statements: Sequence[Statement],
    resumed: HistoryRecord | None,
    target: MysqlTarget,
    settings: MigrationSettings,
) -> AppliedMigration:
    """Run `m` in a fresh session, from the statement after `resumed`'s last (its row, when an
    earlier run started it) or from its first, recording progress per unit."""
    began = time.monotonic()
    if resumed is None:
        start, rank = 1, start_record(control, m, len(statements))
    else:
        start, rank = resumed.statements_done + 1, resumed.rank
    progress = _Progress()
    failure: BaseException | None = None
    try:
        with connect(target, settings) as conn, conn.cursor() as cur:
            try:
                _run_units(control, cur, target.database, rank, statements, start, progress)
            except (pymysql.err.MySQLError, OSError) as exc:
                failure = exc  # handled below, with its server code, after the session closes
    except TransientDatabaseError as exc:
        failure = exc
    if failure is not None:
        _fail(control, rank, m, statements, start, progress, failure, target, began)
    duration = time.monotonic() - began
    update_record(
        control,
        rank,
        "state = 'applied', success = 1, applied_at = UTC_TIMESTAMP(6), duration_ms = %s, "
        "statements_done = %s, statements_total = %s",
        round(duration * 1000),
        len(statements),
        len(statements),
    )
    return AppliedMigration(m.version, m.description, m.filename, len(statements), duration, start)


def apply_pending(
    target: MysqlTarget,
    settings: MigrationSettings,
    migrations: Sequence[Migration],
    *,
    protected: bool,
    on_applied: Callable[[AppliedMigration], None] | None = None,
    approved_destructive: Collection[str] = (),
    pinned: Mapping[str, str] | None = None,
) -> MigrateReport:
    """Apply every pending file of `migrations` (versioned ones by version, then repeatable ones
    by description), under the schema's GET_LOCK.

    Before anything runs, every pending file is refused if it would destroy the runner's history
    or holds a client command, then checked for foreign DEFINERs, statements over
    max_allowed_packet and (when protected) unapproved destructive or unchecked statements. A
    concurrent runner waits for the lock, then re-plans and finds nothing to do.

    Args:
        target: the database.
        settings: timeouts, TLS, lock timeout, out-of-order, missing-file and DEFINER policy.
        migrations: the loaded files (`load_migrations`), sorted by version.
        protected: refuse findings unless allowed by the file's marker or approved.
        on_applied: called after each file is applied and recorded.
        approved_destructive: keys (`V1.1`, `R__views`) of files whose findings were approved.
        pinned: key -> checksum of the approved pending files; any other pending set is
            refused, and their findings count as approved.

    Raises:
        MigrationFailedBefore, MigrationChecksumError, MigrationOrderError, MigrationInterrupted,
        MigrationMissingFiles, MigrationRefused, MigrationDestructiveChange,
        MigrationPlanChanged, MigrationDefinerError, MigrationStatementTooLarge,
        MigrationFileError, MigrationSQLError, MigrationLockTimeout, DatabaseAuthError,
        TransientDatabaseError.
    """
    started = time.monotonic()
    report = MigrateReport()
    with connect(target, settings) as conn, migration_lock(conn, target.database, settings):
        todo = read_plan(conn, migrations, settings)
        report.already_applied = todo.already_applied
        report.adopted_from_flyway = todo.adopted
        report.missing = [r.label for r in todo.missing]
        report.version = todo.version
        approved = set(approved_destructive)
        if pinned is not None:
            check_pinned(todo, pinned)
            approved |= set(pinned)
        if not todo.pending:
            report.duration_s = time.monotonic() - started
            return report
        preview = checked(conn, target, settings, todo, protected)
        blocking = [(p, f) for p, f in preview.blocking if p.key not in approved]
        if blocking:
            raise MigrationDestructiveChange(destructive_refusal(blocking))
        for m in todo.pending:
            statements = prepared_statements(m, target.user, settings.strip_definer)
            applied = _apply_file(conn, m, statements, todo.resume.get(m.key), target, settings)
            report.applied.append(applied)
            if m.version is not None and (report.version is None or m.version > report.version):
                report.version = m.version
            if on_applied is not None:
                on_applied(applied)
    report.duration_s = time.monotonic() - started
    return report
