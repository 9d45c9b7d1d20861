"""What a run would do: the pending plan (pure set arithmetic over the history rows and the files),
the read-only report a preview, a dry run or an approval shows (each pending file's statements and
lint findings, after every check that can refuse it), and the pinned checksums that bind an
approval to what is then applied."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from stackflow.migrator.checks import (
    check_sizes,
    live_columns,
    max_allowed_packet,
    prepared_statements,
)
from stackflow.migrator.connection import MysqlConnection, connect
from stackflow.migrator.errors import (
    MigrationChecksumError,
    MigrationFailedBefore,
    MigrationInterrupted,
    MigrationMissingFiles,
    MigrationOrderError,
    MigrationPlanChanged,
)
from stackflow.migrator.files import Migration, load_migrations
from stackflow.migrator.guard import check_refusals, refusals
from stackflow.migrator.history import HistoryRecord, read_history
from stackflow.migrator.lint import MARKER, ColumnLookup, LintFinding, lint_statements
from stackflow.migrator.splitter import Statement, one_line
from stackflow.migrator.target import MysqlTarget

if TYPE_CHECKING:
    from stackflow.settings import MigrationSettings

REPAIR_COMMAND = "python flows/run.py migrate --repair"
ALLOW_MISSING = "--allow-missing (for every run: allow_missing = true under [migrations] in environments/<name>.toml)"


@dataclass(frozen=True)
class Plan:
    """What a run would do: applied records (baselines too), files still to apply (by version),
    where a file started by an earlier run resumes (version -> statement number), applied records
    whose file is gone, and the files a baseline covers without a record of their own."""

    applied: list[HistoryRecord]
    pending: list[Migration]
    resume: dict[int, int] = field(default_factory=dict)
    missing: list[HistoryRecord] = field(default_factory=list)
    covered: list[Migration] = field(default_factory=list)

    @property
    def already_applied(self) -> int:
        """How many versions need no run: applied or baselined records, and covered files."""
        return len(self.applied) + len(self.covered)


def _file_label(version: int, files: dict[int, Migration], description: str = "") -> str:
    m = files.get(version)
    return f"V{version} ({m.path})" if m else f"V{version} ({description}; its file is gone)"


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

    Args:
        history: the history table's rows.
        migrations: the files, sorted by version.
        allow_out_of_order: apply a pending file whose version is below the latest applied one.
        allow_missing: go on although applied files are gone from the folder.

    Raises:
        MigrationFailedBefore: a failed record is present.
        MigrationInterrupted: a run stopped while a DDL statement was in flight.
        MigrationMissingFiles: applied files are gone and allow_missing is off.
        MigrationChecksumError: an applied (or half-applied) file has changed.
        MigrationOrderError: a pending version is below the latest applied one.
    """
    files = {m.version: m for m in migrations}
    failed = [r for r in history if r.state == "failed"]
    if failed:
        r = failed[0]
        raise MigrationFailedBefore(
            f"migration {_file_label(r.version, files, r.description)} failed in an earlier run "
            f"({r.applied_at:%Y-%m-%d %H:%M:%S} UTC): {r.error or 'no error recorded'}. Statements "
            "before the failing one were committed (MySQL commits DDL): check the schema for what "
            "they changed, fix the file (make it safe to run again), then run "
            f"`{REPAIR_COMMAND}` to clear the failed record and migrate again"
        )
    for r in history:
        if r.interrupted:
            raise MigrationInterrupted(
                interrupted_message(r, _file_label(r.version, files, r.description))
            )
    baseline = max((r.version for r in history if r.state == "baseline"), default=None)
    missing = [r for r in history if r.state in ("applied", "running") and r.version not in files]
    if missing and not allow_missing:
        names = ", ".join(f"V{r.version} ({r.description})" for r in missing)
        raise MigrationMissingFiles(
            f"applied migration(s) {names} are gone from the migrations folder; restore the "
            f"file(s), or go on without them with {ALLOW_MISSING}"
        )
    started = [r for r in history if r.state in ("applied", "running") and r.version in files]
    changed = [r for r in started if files[r.version].checksum != r.checksum]
    if changed:
        r = changed[0]
        m = files[r.version]
        raise MigrationChecksumError(
            f"{m.path} changed after it was applied ({r.applied_at:%Y-%m-%d %H:%M:%S} UTC; checksum "
            f"{r.checksum[:12]}, now {m.checksum[:12]}); applied files must not be edited: restore "
            "it and put the change in a new file with a higher version"
        )
    applied = [r for r in history if r.state in ("applied", "baseline")]
    done = {r.version for r in applied}
    resume = {r.version: r.statements_done + 1 for r in history if r.state == "running"}
    todo = [m for m in migrations if m.version not in done]
    covered = [m for m in todo if baseline is not None and m.version <= baseline]
    pending = [m for m in todo if baseline is None or m.version > baseline]
    latest = max(done, default=None)
    late = [m for m in pending if latest is not None and m.version < latest]
    if late and not allow_out_of_order:
        raise MigrationOrderError(
            f"{late[0].path} has version {late[0].version}, below the latest applied version "
            f"{latest}; renumber it above {latest}, or allow it with --allow-out-of-order "
            "(for every run: allow_out_of_order = true under [migrations] in "
            "environments/<name>.toml)"
        )
    return Plan(applied, pending, resume, missing, covered)


def read_plan(
    conn: MysqlConnection, migrations: Sequence[Migration], settings: MigrationSettings
) -> Plan:
    """Read (and create or upgrade) the history with one SELECT and compute the plan; see
    `compute_plan` for what it raises. Callers hold the migration lock."""
    history = read_history(conn, upgrade=True)
    return compute_plan(history, migrations, settings.allow_out_of_order, settings.allow_missing)


@dataclass(frozen=True)
class PendingMigration:
    """A file a run would apply: what it is, the statements it would send, and its findings."""

    version: int
    name: str
    description: str
    checksum: str
    statements: list[str]
    findings: list[LintFinding]
    resume_from: int = 1


@dataclass(frozen=True)
class MigrationPlanReport:
    """What a run would do, read-only: where, the pending files with statements and lint
    findings, how many need no run, and whether findings block (a protected environment)."""

    database: str
    pending: list[PendingMigration]
    already_applied: int
    protected: bool

    @property
    def pinned(self) -> dict[int, str]:
        """version -> checksum of the pending files, to pass to a run as `pinned`."""
        return {p.version: p.checksum for p in self.pending}

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
    found = [
        r
        for m in todo.pending
        for r in refusals(m.filename, m.statements, target.database, todo.resume.get(m.version, 1))
    ]
    check_refusals(found)
    columns = live_columns(conn, target.database)
    limit = max_allowed_packet(conn)
    pending = []
    for m in todo.pending:
        statements = prepared_statements(m, target.user, settings.strip_definer)
        check_sizes(m, statements, limit)
        pending.append(_pending(m, statements, columns, todo.resume.get(m.version, 1)))
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
        history = read_history(conn, create=False)
        todo = compute_plan(
            history, migrations, settings.allow_out_of_order, settings.allow_missing
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
    check_refusals([r for m in migrations for r in refusals(m.filename, m.statements, database)])
    pending = []
    for m in migrations:
        statements = prepared_statements(m, user, settings.strip_definer)
        pending.append(_pending(m, statements, None, 1))
    return MigrationPlanReport("(database not deployed yet)", pending, 0, protected)


def pin_changes(
    pinned: Mapping[int, str],
    pending: Mapping[int, str],
    applied: Mapping[int, str],
    names: Mapping[int, str],
) -> list[str]:
    """How the pending files (version -> checksum) differ from those an approval pinned: files
    added or changed since, and approved files no longer pending that were not applied with the
    approved checksum. [] when they are the approved ones.

    Args:
        applied: version -> checksum of the applied files.
        names: version -> file name, for the files pending now.
    """
    added = sorted(pending.keys() - pinned.keys())
    changed = sorted(v for v in pending.keys() & pinned.keys() if pending[v] != pinned[v])
    gone = sorted(v for v in pinned.keys() - pending.keys() if applied.get(v) != pinned[v])
    parts = []
    if added:
        parts.append("added since approval: " + ", ".join(names[v] for v in added))
    if changed:
        parts.append("changed since approval: " + ", ".join(names[v] for v in changed))
    if gone:
        parts.append("approved but no longer pending: " + ", ".join(f"V{v}" for v in gone))
    return parts


def check_pinned(todo: Plan, pinned: Mapping[int, str]) -> None:
    """Refuse unless every pending file was approved as it is now.

    An approved file that is no longer pending is fine only if it was applied with the approved
    checksum (an earlier attempt of the same run applied it).

    Raises:
        MigrationPlanChanged: naming the files added, changed or gone since the approval.
    """
    parts = pin_changes(
        pinned,
        {m.version: m.checksum for m in todo.pending},
        {r.version: r.checksum for r in todo.applied},
        {m.version: m.filename for m in todo.pending},
    )
    if parts:
        raise MigrationPlanChanged(
            "the pending migrations are not the ones approved (" + "; ".join(parts) + "); "
            "preview and approve again"
        )
