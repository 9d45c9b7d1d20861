"""What a run would do: the pending plan (pure set arithmetic over the history rows and the files),
the read-only report a preview, a dry run or an approval shows (each pending file's statements and
lint findings, after every check that can refuse it), and the pinned checksums that bind an
approval to what is then applied."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from stackflow.migrator.checks import (
    check_placeholders,
    check_sizes,
    live_columns,
    prepared_statements,
    server_limits,
)
from stackflow.migrator.connection import MysqlConnection, connect
from stackflow.migrator.errors import (
    MigrationChecksumError,
    MigrationFailedBefore,
    MigrationInterrupted,
    MigrationMissingFiles,
    MigrationOrderError,
)
from stackflow.migrator.files import Migration, load_migrations
from stackflow.migrator.flyway import history_or_flyway
from stackflow.migrator.guard import check_refusals, refusals
from stackflow.migrator.history import HistoryRecord
from stackflow.migrator.lint import MARKER, ColumnLookup, LintFinding, lint_statements
from stackflow.migrator.splitter import Statement, one_line
from stackflow.migrator.target import MysqlTarget
from stackflow.migrator.version import Version

if TYPE_CHECKING:
    from stackflow.settings import MigrationSettings

REPAIR_COMMAND = "python flows/run.py migrate --repair"
ALLOW_MISSING = "--allow-missing (for every run: allow_missing = true under [migrations] in environments/<name>.toml)"


@dataclass(frozen=True)
class Plan:
    """What a run would do: records that need no run (applied and baselines; a repeatable's
    latest when its file is unchanged), files still to apply (versioned by version, then
    repeatable by description), the rows of files an earlier run started (by key, to resume),
    applied records whose file is gone, files a baseline covers, and how many records were
    adopted from Flyway's history now."""

    applied: list[HistoryRecord]
    pending: list[Migration]
    resume: dict[str, HistoryRecord] = field(default_factory=dict)
    missing: list[HistoryRecord] = field(default_factory=list)
    covered: list[Migration] = field(default_factory=list)
    adopted: int = 0

    @property
    def already_applied(self) -> int:
        """How many files need no run: applied or baselined records, and covered files."""
        return len(self.applied) + len(self.covered)

    def start(self, m: Migration) -> int:
        """The statement `m` starts at: 1, or the one after an earlier run's last."""
        row = self.resume.get(m.key)
        return row.statements_done + 1 if row is not None else 1

    @property
    def version(self) -> Version | None:
        """The schema's version before the run: the highest applied, baselined or covered."""
        found = [r.version for r in self.applied if r.version is not None]
        found += [m.version for m in self.covered if m.version is not None]
        return max(found, default=None)


def _file_label(r: HistoryRecord, files: dict[str, Migration]) -> str:
    m = files.get(r.key)
    return f"{r.label} ({m.path})" if m else f"{r.label} ({r.description}; its file is gone)"


def interrupted_message(r: HistoryRecord, label: str) -> str:
    """What to do about a file stopped while a statement MySQL commits implicitly was running."""
    lo, hi = r.in_flight_from, r.in_flight_to
    which = f"statement {lo}" if lo == hi else f"statements {lo}-{hi}"
    return (
        f"migration {label} was interrupted at {which} ({r.statements_done} statement(s) before "
        "it are recorded as done). MySQL commits DDL implicitly, so whether it took effect is "
        "unknown: check the schema, then run "
        f"`{REPAIR_COMMAND} --mark-ran` if it took effect, or `{REPAIR_COMMAND}` to run it again"
    )


def compute_plan(
    history: Sequence[HistoryRecord],
    migrations: Sequence[Migration],
    allow_out_of_order: bool,
    allow_missing: bool = False,
) -> Plan:
    """Pure set arithmetic: which files are applied, pending, resumed, covered or missing.

    A versioned file runs once; a repeatable one runs after the versioned ones, again whenever
    its checksum differs from its latest record's.

    Args:
        history: the history table's rows, in the order they were written.
        migrations: the files, as `load_migrations` orders them.
        allow_out_of_order: apply a pending file whose version is below the latest applied one.
        allow_missing: go on although applied files are gone from the folder.

    Raises:
        MigrationFailedBefore: a failed record is present.
        MigrationInterrupted: a run stopped while a DDL statement was in flight.
        MigrationMissingFiles: applied files are gone and allow_missing is off.
        MigrationChecksumError: an applied versioned (or half-applied) file has changed.
        MigrationOrderError: a pending version is below the latest applied one.
    """
    files = {m.key: m for m in migrations}
    failed = [r for r in history if r.state == "failed"]
    if failed:
        r = failed[0]
        raise MigrationFailedBefore(
            f"migration {_file_label(r, files)} failed in an earlier run "
            f"({r.applied_at:%Y-%m-%d %H:%M:%S} UTC): {r.error or 'no error recorded'}. Statements "
            "before the failing one were committed (MySQL commits DDL): check the schema for what "
            "they changed, fix the file (make it safe to run again), then run "
            f"`{REPAIR_COMMAND}` to clear the failed record and migrate again"
        )
    for r in history:
        if r.interrupted:
            raise MigrationInterrupted(interrupted_message(r, _file_label(r, files)))
    latest = {r.key: r for r in history}  # a repeatable's rows: the last one written counts
    baseline = max(
        (r.version for r in history if r.state == "baseline" and r.version), default=None
    )
    started = [r for r in latest.values() if r.state in ("applied", "running")]
    missing = [r for r in started if r.key not in files]
    if missing and not allow_missing:
        names = ", ".join(f"{r.label} ({r.description})" for r in missing)
        raise MigrationMissingFiles(
            f"applied migration(s) {names} are gone from the migrations folder; restore the "
            f"file(s), or go on without them with {ALLOW_MISSING}"
        )
    changed = [
        r
        for r in started
        if r.key in files
        and files[r.key].checksum != r.checksum
        and (r.version is not None or r.state == "running")
    ]
    if changed:
        r = changed[0]
        m = files[r.key]
        raise MigrationChecksumError(
            f"{m.path} changed after it was applied ({r.applied_at:%Y-%m-%d %H:%M:%S} UTC; checksum "
            f"{r.checksum[:12]}, now {m.checksum[:12]}); applied files must not be edited: restore "
            "it and put the change in a new file with a higher version"
        )
    applied = [
        r
        for r in latest.values()
        if r.state == "baseline"
        or (r.state == "applied" and (r.version is not None or _unchanged(r, files)))
    ]
    done = {r.key for r in applied}
    resume = {r.key: r for r in latest.values() if r.state == "running" and r.key in files}
    todo = [m for m in migrations if m.key not in done]
    covered = [m for m in todo if _covered(m, baseline)]
    pending = [m for m in todo if not _covered(m, baseline)]
    highest = max((r.version for r in applied if r.version is not None), default=None)
    late = [m for m in pending if m.version and highest is not None and m.version < highest]
    if late and not allow_out_of_order:
        raise MigrationOrderError(
            f"{late[0].path} has version {late[0].version}, below the latest applied version "
            f"{highest}; renumber it above {highest}, or allow it with --allow-out-of-order "
            "(for every run: allow_out_of_order = true under [migrations] in "
            "environments/<name>.toml)"
        )
    return Plan(applied, pending, resume, missing, covered)


def _unchanged(r: HistoryRecord, files: dict[str, Migration]) -> bool:
    m = files.get(r.key)
    return m is None or m.checksum == r.checksum


def _covered(m: Migration, baseline: Version | None) -> bool:
    return baseline is not None and m.version is not None and m.version <= baseline


def read_plan(
    conn: MysqlConnection, migrations: Sequence[Migration], settings: MigrationSettings
) -> Plan:
    """Read (and create or upgrade, or adopt from Flyway's) the history with one SELECT and
    compute the plan; see `compute_plan` and `adopt` for what it raises. Callers hold the
    migration lock."""
    history = history_or_flyway(conn, migrations, write=True)
    plan = compute_plan(
        history.records, migrations, settings.allow_out_of_order, settings.allow_missing
    )
    return replace(plan, adopted=history.adopted)


@dataclass(frozen=True)
class PendingMigration:
    """A file a run would apply: what it is (version None for a repeatable file), the
    statements it would send, and its findings."""

    version: Version | None
    name: str
    description: str
    checksum: str
    statements: list[str]
    findings: list[LintFinding]
    resume_from: int = 1

    @property
    def key(self) -> str:
        """The file's key (`V1.1`, `R__views`), as approvals pin it (see `Migration.key`)."""
        if self.version is None:
            return f"R__{self.description}"
        parsed = Version.of_record(self.version)  # a Version, or a plain number
        return f"V{parsed.canonical if parsed else self.version}"


@dataclass(frozen=True)
class MigrationPlanReport:
    """What a run would do, read-only: where, the pending files with statements and lint
    findings, how many need no run, and whether findings block (a protected environment)."""

    database: str
    pending: list[PendingMigration]
    already_applied: int
    protected: bool

    @property
    def pinned(self) -> dict[str, str]:
        """key (`V1.1`, `R__views`) -> checksum of the pending files, to pass to a run as
        `pinned`."""
        return {p.key: p.checksum for p in self.pending}

    @property
    def blocking(self) -> list[tuple[PendingMigration, LintFinding]]:
        """Findings that refuse a run in this environment unless approved."""
        if not self.protected:
            return []
        return [(p, f) for p in self.pending for f in p.findings if not f.allowed]


def destructive_refusal(blocking: Sequence[tuple[PendingMigration, LintFinding]]) -> str:
    """The message of a refused destructive change: every finding, and the two ways on."""
    lines = [
        f"{p.name}: {'needs review: ' * f.needs_review}{f.describe()}: {one_line(f.text)}"
        for p, f in blocking
    ]
    review = [f for _, f in blocking if f.needs_review]
    what = "can lose data" if len(review) < len(blocking) else ""
    if review:
        what = " or ".join(filter(None, [what, "run SQL the lint cannot check"]))
    return (
        f"pending migrations {what} in a protected environment:\n  "
        + "\n  ".join(lines)
        + f"\nAdd the line `{MARKER}` to a file that means it, or approve the run with these "
        "findings shown"
    )


def _pending(
    m: Migration, statements: Sequence[Statement], columns: ColumnLookup | None, start: int
) -> PendingMigration:
    """A pending file as a plan shows it: its statements, and the findings from `start` on
    (judged against the live schema's `columns`, when there is one)."""
    findings = lint_statements(
        [s for s in statements if s.number >= start], m.destructive_ok is not None, columns
    )
    sql = [s.sql for s in statements]
    return PendingMigration(m.version, m.filename, m.description, m.checksum, sql, findings, start)


def checked(
    conn: MysqlConnection,
    target: MysqlTarget,
    settings: MigrationSettings,
    todo: Plan,
    protected: bool,
) -> MigrationPlanReport:
    """Refuse what may never run, then split, DEFINER-check, size-check and lint every pending
    file; nothing is written."""
    limit, fold_case = server_limits(conn)
    found = [
        r
        for m in todo.pending
        for r in refusals(m.filename, m.statements, target.database, todo.start(m), fold_case)
    ]
    check_refusals(found)
    for m in todo.pending:
        check_placeholders(m)
    columns = live_columns(conn, target.database)
    pending = []
    for m in todo.pending:
        statements = prepared_statements(m, target.user, settings.strip_definer)
        check_sizes(m, statements, limit)
        pending.append(_pending(m, statements, columns, todo.start(m)))
    return MigrationPlanReport(target.address, pending, todo.already_applied, protected)


def pending_plan(
    target: MysqlTarget,
    settings: MigrationSettings,
    protected: bool,
    folder: Path | None = None,
) -> MigrationPlanReport:
    """What `migrate` would do now, for a preview, a dry run or an approval. Read-only.

    Creates nothing (not even the history table) and takes no lock.

    Args:
        target: the database.
        settings: folder, out-of-order and missing-file policy, DEFINER stripping.
        protected: findings then block a run unless allowed or approved.
        folder: the migrations folder (default: settings.dir).

    Raises:
        MigrationFileError, MigrationFailedBefore, MigrationInterrupted, MigrationMissingFiles,
        MigrationChecksumError, MigrationOrderError, MigrationRefused, MigrationDefinerError,
        MigrationStatementTooLarge, DatabaseAuthError, TransientDatabaseError.
    """
    migrations = load_migrations(folder or settings.dir)
    with connect(target, settings) as conn:
        history = history_or_flyway(conn, migrations, write=False)
        todo = compute_plan(
            history.records, migrations, settings.allow_out_of_order, settings.allow_missing
        )
        return checked(conn, target, settings, todo, protected)


def offline_plan(
    settings: MigrationSettings,
    protected: bool,
    user: str,
    database: str,
    folder: Path | None = None,
) -> MigrationPlanReport:
    """What `migrate` would do on a database that does not exist yet: every file, in order.

    Reads only the folder; a narrowing MODIFY cannot be judged without a live schema (the other
    findings can).

    Args:
        settings: folder and DEFINER stripping.
        protected: findings then block a run unless allowed or approved.
        user: the migration user the database will have (DEFINER check).
        database: the name the database will have (what a file may not drop).
        folder: the migrations folder (default: settings.dir).

    Raises:
        MigrationFileError, MigrationRefused, MigrationDefinerError.
    """
    migrations = load_migrations(folder or settings.dir)
    # Names compare as a Linux server's default (lower_case_table_names=0) compares them; the
    # run checks again against the server's own setting.
    check_refusals([r for m in migrations for r in refusals(m.filename, m.statements, database)])
    for m in migrations:
        check_placeholders(m)
    pending = []
    for m in migrations:
        statements = prepared_statements(m, user, settings.strip_definer)
        pending.append(_pending(m, statements, None, 1))
    return MigrationPlanReport("(database not deployed yet)", pending, 0, protected)
