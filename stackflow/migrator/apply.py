"""Applying pending files, in version order, under the schema's migration lock, with progress
recorded per statement (units: stackflow.migrator.units).

A data statement (INSERT, UPDATE, DELETE, SET ...) commits in one transaction with its progress
record, so after a crash the file resumes at the next statement; inside a mysqldump LOCK TABLES
region too. MySQL commits DDL implicitly, so a DDL statement is marked "in flight" before it
runs; a crash between it and its record is the one ambiguous case, and the runner refuses,
naming the file and statement, until someone checks and runs `repair`. Each file runs in a fresh
session; a resumed one replays its session statements (SET, USE) first, and the LOCK TABLES of a
region it resumes inside.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, NoReturn

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
from stackflow.migrator.units import (
    Unit,
    lock_with_history,
    session_replay,
    statement_kind,
    units_of,
)
from stackflow.migrator.version import Version

if TYPE_CHECKING:
    from stackflow.settings import MigrationSettings


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


class _LockedRegion:
    """Runs the statements of a LOCK TABLES region that keeps progress per statement: the
    history table is locked with the file's tables and written by the file's own session, with
    autocommit off (START TRANSACTION would release the table locks) and a COMMIT per statement,
    so each row statement commits with its progress record."""

    def __init__(
        self, cur: pymysql.cursors.Cursor, database: str, rank: int, progress: _Progress
    ) -> None:
        self.cur, self.rank, self.progress = cur, rank, progress
        self.in_flight = progress_sql(database, "in_flight_from = %s, in_flight_to = %s")
        self.done = progress_sql(
            database, "statements_done = %s, in_flight_from = NULL, in_flight_to = NULL"
        )
        self.database = database
        self.autocommit = 1

    def lock(self, st: Statement) -> None:
        """Run the region's LOCK TABLES, with the history table added, autocommit off."""
        self.cur.execute("SELECT @@autocommit")
        self.autocommit = int((self.cur.fetchone() or (1,))[0])
        self.cur.execute("SET autocommit = 0")
        self.cur.execute(lock_with_history(st.sql, self.database))

    def run(self, unit: Unit, st: Statement, record: str) -> None:
        cur, kind = self.cur, statement_kind(st)
        self.progress.current = st
        if st.number == unit.lock:
            self.lock(st)
        elif kind == "ddl":  # commits implicitly: marked in flight first, as outside
            cur.execute(self.in_flight, (st.number, st.number, self.rank))
            cur.execute("COMMIT")
            self.progress.in_flight = unit
            cur.execute(st.sql)
        elif kind == "close":  # UNLOCK TABLES
            cur.execute(st.sql)
            cur.execute(f"SET autocommit = {self.autocommit}")
        else:
            cur.execute(st.sql)
            if kind == "session":
                cur.execute("SET autocommit = 0")  # whatever the file's SET did to it
        cur.execute(self.done if kind == "ddl" else record, (st.number, self.rank))
        cur.execute("COMMIT")
        self.progress.in_flight = None


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
    region = _LockedRegion(cur, database, rank, progress)
    units = units_of(statements)
    resumed_lock = next((u.lock for u in units if u.first == start and u.lock < start), 0)
    for st in session_replay(statements, start):
        progress.current = st
        if st.number == resumed_lock:
            region.lock(st)
        else:
            cur.execute(st.sql)
    if resumed_lock:
        cur.execute("SET autocommit = 0")  # a replayed SET may have turned it back on
    for unit in units:
        if unit.last < start:
            continue
        if unit.lock:
            region.run(unit, by_number[unit.first], record)
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
