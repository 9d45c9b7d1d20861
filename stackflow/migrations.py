"""Schema migrations: numbered SQL files applied once each, in order, under a lock.

Files are named `V<version>__<description>.sql` and live in one folder; they may be mysqldump
output (DELIMITER, conditional comments). Each file is recorded in `stackflow_schema_history`
with its checksum, duration, outcome and progress, so a re-run is a no-op (one SELECT), an edited
applied file is refused, and a failed file blocks later runs until someone checks the schema and
clears the record with `repair`.

Progress is recorded per statement. A data statement (INSERT, UPDATE, DELETE, SET ...) commits
in one transaction with its progress record, so after a crash the file resumes at the next
statement. MySQL commits DDL implicitly, so a DDL statement is marked "in flight" before it runs;
a crash between it and its record is the one ambiguous case, and the runner refuses, naming the
file and statement, until someone checks and runs `repair`. Each file runs in a fresh session.
Every pymysql error becomes a typed stackflow error in exactly one place, `classify`.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import random
import re
import ssl
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, NoReturn, TypeAlias

import pymysql
import pymysql.cursors

from stackflow.errors import (
    DatabaseAuthError,
    DatabaseTLSError,
    DatabaseUnreachable,
    MigrationChecksumError,
    MigrationError,
    MigrationFailedBefore,
    MigrationFileError,
    MigrationLockTimeout,
    MigrationOrderError,
    MigrationSQLError,
    SettingsError,
    StackflowError,
    TransientDatabaseError,
)
from stackflow.migration_lint import (
    MARKER,
    ColumnLookup,
    LintFinding,
    LiveColumn,
    destructive_ok_reason,
    foreign_definers,
    lint_statements,
    strip_definer,
)
from stackflow.redact import Redactor
from stackflow.settings import MigrationSettings, MysqlTarget
from stackflow.sqlsplit import Statement, split_statements

if TYPE_CHECKING:
    from pymysql.connections import Connection

HISTORY_TABLE = "stackflow_schema_history"
FILE_PATTERN = "V<version>__<description>.sql (e.g. V001__create_hello_pulumi.sql)"
REPAIR_COMMAND = "python flows/run.py migrate --repair"
ALLOW_MISSING = "--allow-missing (for every run: allow_missing = true under [migrations] in environments/<name>.toml)"
STRIP_DEFINER = "--strip-definer (for every run: strip_definer = true under [migrations] in environments/<name>.toml)"

__all__ = ["Statement", "split_statements"]  # re-exported: the splitter lives in sqlsplit

# Versions are stored as BIGINT; 18 digits leaves room for timestamps like 20250101120000.
_NAME_RE = re.compile(
    r"^V(?P<version>[0-9]{1,18})__(?P<description>[A-Za-z0-9][A-Za-z0-9_-]*)\.sql$", re.ASCII
)
# Anything that looks like it was meant to be a migration must match the pattern exactly.
# (Unicode digits too, so an Arabic-Indic version is reported instead of ignored.)
_CANDIDATE_RE = re.compile(r"(^[Vv]\d)|(\.sql$)", re.IGNORECASE)
# Comments, whitespace and semicolons; MySQL's executable comments (/*! ... */) are real SQL.
_NOT_SQL_RE = re.compile(
    r"--[^\n]*|#[^\n]*|/\*(?!!).*?\*/|\s+|;|^[ \t]*delimiter[^\n]*", re.S | re.I | re.M
)
_MAX_ERROR_CHARS = 2000
_MAX_DESCRIPTION_CHARS = 200

# Server/client error codes that may pass: the server is starting, restarting, busy or far away.
TRANSIENT_CODES = {
    1040: "too many connections",
    1053: "server shutdown in progress",
    1205: "lock wait timeout",
    1213: "deadlock",
    1927: "connection was killed",
    2003: "cannot connect",
    2005: "unknown host",
    2006: "server has gone away",
    2013: "lost connection during query",
    2055: "lost connection",
}
AUTH_CODES = {1044, 1045, 1698}
_TLS_FAILED = 2026
_NO_SUCH_TABLE = 1146


class MigrationInterrupted(MigrationError):
    """A run stopped between a statement MySQL commits implicitly (DDL) and its progress record."""


class MigrationMissingFiles(MigrationError):
    """Applied migrations whose files are gone from the folder."""


class MigrationDestructiveChange(MigrationError):
    """A pending file can lose data and neither carries the marker nor was approved."""


class MigrationPlanChanged(MigrationError):
    """The pending files differ from the ones that were approved (pinned checksums)."""


class MigrationStatementTooLarge(MigrationError):
    """A statement is larger than the server's max_allowed_packet."""


class MigrationDefinerError(MigrationError):
    """A file names a DEFINER other than the migration user."""


class MigrationBaselineError(MigrationError):
    """A baseline was asked for a schema that already has migration history."""


# --- files ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Migration:
    """One migration file: version, description, where it is, its text and sha256 checksum."""

    version: int
    description: str
    path: Path
    sql: str
    checksum: str

    @property
    def filename(self) -> str:
        return self.path.name

    @cached_property
    def statements(self) -> tuple[Statement, ...]:
        """The file's statements, split on first use so a no-op run parses nothing.

        Raises:
            MigrationFileError: the file has no statements, or an unterminated string or comment.
        """
        statements = split_statements(self.sql, source=self.filename)
        if not statements:
            raise MigrationFileError(_empty_file_message(self.path))
        return statements

    @cached_property
    def destructive_ok(self) -> str | None:
        """The reason given by the file's `-- stackflow: destructive-ok <reason>` marker."""
        return destructive_ok_reason(self.sql)


def _empty_file_message(path: Path) -> str:
    return f"{path}: has no SQL statements (only comments or whitespace); expected {FILE_PATTERN}"


StatementKind = Literal["data", "session", "ddl", "open", "close"]
_DATA = {"INSERT", "UPDATE", "DELETE", "REPLACE", "SELECT", "WITH", "VALUES", "DO", "LOAD"}


def statement_kind(st: Statement) -> StatementKind:
    """How a statement commits: data (in a transaction), session (SET), ddl (implicit commit),
    or the open/close of a LOCK TABLES or explicit transaction region."""
    word = st.keyword
    if word == "SET":
        rest = st.sql.upper()
        global_like = re.match(r"(?:\s|/\*!\d*)*SET\s+(GLOBAL|PASSWORD|DEFAULT|ROLE)\b", rest)
        return "ddl" if global_like else "session"
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


def checksum_of(text: str) -> str:
    """sha256 of a file's text with line endings normalised, so a CRLF checkout matches."""
    normalised = text.removeprefix("\ufeff").replace("\r\n", "\n")
    return hashlib.sha256(normalised.encode("utf-8")).hexdigest()


def load_migrations(folder: Path) -> list[Migration]:
    """Read every `V<version>__<description>.sql` file in `folder`, sorted by version.

    Files that look like neither a migration nor SQL (README.md, .gitkeep) are ignored.

    Args:
        folder: the migrations folder.

    Raises:
        MigrationFileError: the folder is missing or empty, or a file has a malformed name (a
            version in other than ASCII digits too), a duplicate version, is a folder or a
            symbolic link, is unreadable or has no statements; the message names the file.
    """
    if not folder.is_dir():
        raise MigrationFileError(
            f"migrations folder {folder} does not exist; it should hold {FILE_PATTERN} files"
        )
    found: dict[int, Migration] = {}
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or not _CANDIDATE_RE.search(path.name):
            continue
        if path.is_symlink():
            raise MigrationFileError(
                f"{path}: is a symbolic link (to {path.readlink()}), not a file; migrations must "
                "be regular files in the folder: copy the file in instead"
            )
        if path.is_dir():
            raise MigrationFileError(
                f"{path}: is a folder, not a migration file; move it out of the migrations folder"
            )
        match = _NAME_RE.match(path.name)
        if match is None or not path.is_file():
            hint = " (versions are ASCII digits 0-9)" if re.match(r"^V\d", path.name) else ""
            raise MigrationFileError(
                f"{path}: malformed migration file name{hint}; accepted: {FILE_PATTERN}"
            )
        version = int(match["version"])
        if version in found:
            raise MigrationFileError(
                f"{path}: duplicate version {version} (also {found[version].filename}); "
                f"each file needs its own version: {FILE_PATTERN}"
            )
        try:
            text = path.read_text(encoding="utf-8").removeprefix("\ufeff")
        except (OSError, UnicodeDecodeError) as exc:
            raise MigrationFileError(f"{path}: cannot be read as UTF-8 text ({exc})") from exc
        description = match["description"].replace("_", " ")[:_MAX_DESCRIPTION_CHARS]
        found[version] = Migration(version, description, path, text, checksum_of(text))
        if not _NOT_SQL_RE.sub("", text):
            raise MigrationFileError(_empty_file_message(path))
    if not found:
        raise MigrationFileError(
            f"migrations folder {folder} has no migration files; expected {FILE_PATTERN}"
        )
    return [found[v] for v in sorted(found)]


# --- errors -----------------------------------------------------------------------------------


def _where(target: MysqlTarget | None) -> str:
    return f"{target.user}@{target.host}:{target.port}/{target.database}" if target else "database"


def classify(exc: BaseException, target: MysqlTarget | None = None) -> Exception:
    """Turn a pymysql (or socket) error into a typed stackflow error; the one place that does.

    Transient (worth retrying): can't connect, unknown host, gone away, lost connection, lock wait
    timeout, deadlock, too many connections. Access denied is `DatabaseAuthError`. Any other server
    error is `MigrationSQLError`. Messages name user@host but never the password.

    Args:
        exc: the error pymysql (or the socket layer) raised.
        target: the database it came from, to name it and to mask its password.
    """
    if isinstance(exc, StackflowError):
        return exc
    redact = Redactor([target.password.get_secret_value()] if target else [])
    where = _where(target)
    if isinstance(exc, pymysql.err.MySQLError):
        code, raw = _server_error(exc)
        message = redact(raw)
        cause = getattr(exc, "original_exception", None)
        if code == _TLS_FAILED or isinstance(cause, ssl.SSLError):
            return DatabaseTLSError(
                f"{where}: TLS failed: {message}; check STACKFLOW_MIGRATIONS_TLS_CA (the server's CA "
                "bundle, e.g. the RDS global bundle) and that the host name matches its certificate"
            )
        if code in TRANSIENT_CODES:
            return TransientDatabaseError(f"{where}: {TRANSIENT_CODES[code]}: ({code}) {message}")
        if code in AUTH_CODES:
            return DatabaseAuthError(
                f"access denied for {where}: check the user name and password, and that this user "
                f"may connect from here and use the database (server said: ({code}) {message})"
            )
        if isinstance(exc, pymysql.err.InterfaceError):
            return TransientDatabaseError(
                f"{where}: connection closed unexpectedly ({message or code})"
            )
        return MigrationSQLError(f"{where}: ({code}) {message}")
    if isinstance(exc, OSError):
        return TransientDatabaseError(f"{where}: network error: {redact(str(exc))}")
    return exc if isinstance(exc, Exception) else RuntimeError(redact(str(exc)))


def _server_error(exc: pymysql.err.MySQLError) -> tuple[int, str]:
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0
    return code, str(exc.args[1]) if len(exc.args) > 1 else str(exc)


# --- connection -------------------------------------------------------------------------------

MysqlConnection: TypeAlias = "Connection[pymysql.cursors.Cursor]"


def _tls_context(settings: MigrationSettings) -> ssl.SSLContext | None:
    if not settings.tls:
        return None
    try:
        return ssl.create_default_context(cafile=str(settings.tls_ca) if settings.tls_ca else None)
    except (OSError, ssl.SSLError) as exc:
        raise SettingsError(
            f"STACKFLOW_MIGRATIONS_TLS_CA: cannot load CA bundle {settings.tls_ca} ({exc})"
        ) from exc


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@contextmanager
def connect(target: MysqlTarget, settings: MigrationSettings) -> Iterator[MysqlConnection]:
    """A pymysql connection (autocommit, utf8mb4, timeouts and TLS from settings), closed after.

    pymysql errors raised inside the block leave it already classified (see `classify`).

    Args:
        target: where the database is.
        settings: timeouts and TLS.

    Raises:
        TransientDatabaseError, DatabaseAuthError, MigrationSQLError: see `classify`.
        SettingsError: the TLS CA bundle cannot be loaded.
    """
    try:
        conn: MysqlConnection = pymysql.connect(
            host=target.host,
            port=target.port,
            user=target.user,
            password=target.password.get_secret_value(),
            database=target.database,
            charset="utf8mb4",
            autocommit=True,
            connect_timeout=settings.connect_timeout_s,
            read_timeout=settings.read_timeout_s,
            write_timeout=settings.write_timeout_s,
            ssl=_tls_context(settings),
            # pymysql otherwise tries opportunistic TLS, whose CA loading costs ~30 ms per
            # connection; on loopback the traffic never leaves the machine, so it buys nothing.
            ssl_disabled=not settings.tls and _is_loopback(target.host),
        )
    except (pymysql.err.MySQLError, OSError) as exc:
        raise classify(exc, target) from None
    try:
        yield conn
    except pymysql.err.MySQLError as exc:
        raise classify(exc, target) from None
    finally:
        if conn.open:
            conn.close()


def lock_name(database: str) -> str:
    """The GET_LOCK name for a schema; MySQL caps lock names at 64 characters."""
    name = f"stackflow_migrate_{database}"
    if len(name) > 64:
        name = "stackflow_migrate_" + hashlib.sha256(database.encode()).hexdigest()[:40]
    return name


@contextmanager
def migration_lock(
    conn: MysqlConnection, database: str, settings: MigrationSettings
) -> Iterator[None]:
    """Hold the schema's migration lock (GET_LOCK) for the block; concurrent runners queue here.

    Raises:
        MigrationLockTimeout: another runner held it for longer than settings.lock_timeout_s.
    """
    name = lock_name(database)
    deadline = time.monotonic() + settings.lock_timeout_s
    with conn.cursor() as cur:
        while True:
            # GET_LOCK waits on the server; each wait must end before the socket's read timeout.
            remaining = max(0.0, deadline - time.monotonic())
            wait = min(math.ceil(remaining), max(1, settings.read_timeout_s - 1))
            cur.execute("SELECT GET_LOCK(%s, %s)", (name, wait))
            row = cur.fetchone()
            got = row[0] if row else None
            if got == 1:
                break
            if got is None:
                raise MigrationError(f"GET_LOCK('{name}') failed on the server")
            if time.monotonic() >= deadline:
                cur.execute("SELECT IS_USED_LOCK(%s)", (name,))
                holder = (cur.fetchone() or (None,))[0]
                raise MigrationLockTimeout(
                    f"another migration runner (connection {holder}) has held lock '{name}' for over "
                    f"{settings.lock_timeout_s}s; wait for it, or if it is stuck end it with "
                    f"KILL {holder}; (STACKFLOW_MIGRATIONS_LOCK_TIMEOUT_S sets how long to wait)"
                )
        try:
            yield
        finally:
            # If the connection is gone, so is the lock: the server releases it on disconnect.
            if conn.open:
                with suppress(pymysql.err.MySQLError):
                    cur.execute("SELECT RELEASE_LOCK(%s)", (name,))


# --- history and plan -------------------------------------------------------------------------

_HISTORY_DDL = f"""CREATE TABLE IF NOT EXISTS {HISTORY_TABLE} (
    version BIGINT UNSIGNED NOT NULL PRIMARY KEY,
    description VARCHAR({_MAX_DESCRIPTION_CHARS}) NOT NULL,
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
            if _server_error(exc)[0] != _NO_SUCH_TABLE:
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


@dataclass(frozen=True)
class Plan:
    """What a run would do: applied records, files still to apply (by version), where a file
    started by an earlier run resumes (version -> statement number), applied records whose file
    is gone, and the baseline version (files up to it never run)."""

    applied: list[HistoryRecord]
    pending: list[Migration]
    resume: dict[int, int] = field(default_factory=dict)
    missing: list[HistoryRecord] = field(default_factory=list)
    baseline: int | None = None


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
    """Pure set arithmetic: which files are applied, pending, resumed or missing.

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
    pending = [
        m
        for m in migrations
        if m.version not in done and (baseline is None or m.version > baseline)
    ]
    latest = max(done, default=None)
    late = [m for m in pending if latest is not None and m.version < latest]
    if late and not allow_out_of_order:
        raise MigrationOrderError(
            f"{late[0].path} has version {late[0].version}, below the latest applied version "
            f"{latest}; renumber it above {latest}, or allow it with --allow-out-of-order "
            "(for every run: allow_out_of_order = true under [migrations] in "
            "environments/<name>.toml)"
        )
    return Plan(applied, pending, resume, missing, baseline)


def plan(
    conn: MysqlConnection,
    migrations: Sequence[Migration],
    allow_out_of_order: bool,
    allow_missing: bool = False,
) -> Plan:
    """Read (and create or upgrade) the history with one SELECT and compute the plan; see
    `compute_plan` for what it raises. Callers hold the migration lock."""
    history = read_history(conn, upgrade=True)
    return compute_plan(history, migrations, allow_out_of_order, allow_missing)


# --- checks before anything runs --------------------------------------------------------------


def live_columns(conn: MysqlConnection, database: str) -> Callable[[str, str], LiveColumn | None]:
    """A lookup of the schema's columns as information_schema has them now (one query, lazily)."""
    cache: dict[tuple[str, str], LiveColumn] | None = None

    def lookup(table: str, column: str) -> LiveColumn | None:
        nonlocal cache
        if cache is None:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, "
                    "CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE, IS_NULLABLE "
                    "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s",
                    (database,),
                )
                cache = {
                    (str(t).lower(), str(c).lower()): LiveColumn(
                        str(dt).lower(),
                        str(ct).lower(),
                        None if ln is None else int(ln),
                        None if p is None else int(p),
                        None if sc is None else int(sc),
                        nl == "YES",
                    )
                    for t, c, dt, ct, ln, p, sc, nl in cur.fetchall()
                }
        return cache.get((table.lower(), column.lower()))

    return lookup


def prepared_statements(m: Migration, user: str, strip_definers: bool) -> tuple[Statement, ...]:
    """The statements to send: DEFINER clauses stripped when asked.

    Raises:
        MigrationDefinerError: a DEFINER names a user other than `user` and stripping is off.
    """
    foreign = foreign_definers(m.statements, user)
    if not foreign:
        return m.statements
    if not strip_definers:
        number, clause = foreign[0]
        raise MigrationDefinerError(
            f"{m.filename}: statement {number} has {clause}, a user other than the migration user "
            f"'{user}' (creating it needs SUPER or SET USER). Drop the clauses with "
            f"{STRIP_DEFINER} so the migration user owns the objects, or edit the file"
        )
    return tuple(Statement(s.number, s.line, strip_definer(s.sql)) for s in m.statements)


def max_allowed_packet(conn: MysqlConnection) -> int:
    """The server's max_allowed_packet (bytes)."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@max_allowed_packet")
        row = cur.fetchone()
    return int(row[0]) if row else 16 * 1024 * 1024


def check_sizes(m: Migration, statements: Sequence[Statement], limit: int) -> None:
    """Raises MigrationStatementTooLarge naming the first statement larger than `limit` bytes."""
    for st in statements:
        size = len(st.sql.encode("utf-8")) + 1  # the command byte
        if size > limit:
            raise MigrationStatementTooLarge(
                f"{m.filename}: statement {st.number} (line {st.line}) is {size} bytes, over the "
                f"server's max_allowed_packet of {limit}; split it (e.g. a multi-row INSERT into "
                "several) or raise max_allowed_packet on the server"
            )


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

    @property
    def destructive(self) -> bool:
        return bool(self.findings)


@dataclass(frozen=True)
class MigrationPlanReport:
    """What a run would do, read-only: pending files with statements and lint findings."""

    database: str
    pending: list[PendingMigration]
    already_applied: int
    missing: list[int]
    baseline: int | None
    environment_protected: bool

    @property
    def pinned(self) -> dict[int, str]:
        """version -> checksum of the pending files, to pass to a run as `pinned`."""
        return {p.version: p.checksum for p in self.pending}

    @property
    def blocking(self) -> list[tuple[PendingMigration, LintFinding]]:
        """Findings that refuse a run in this environment unless approved."""
        if not self.environment_protected:
            return []
        return [(p, f) for p in self.pending for f in p.findings if not f.allowed]


def destructive_refusal(blocking: Sequence[tuple[PendingMigration, LintFinding]]) -> str:
    """The message of a refused destructive change: every finding, and the two ways on."""
    lines = [f"{p.name}: {f.describe()}: {one_line(f.text)}" for p, f in blocking]
    return (
        "pending migrations can lose data in a protected environment:\n  "
        + "\n  ".join(lines)
        + f"\nAdd the line `{MARKER}` to a file that means it, or approve the run with these "
        "findings shown"
    )


def one_line(sql: str, limit: int = 120) -> str:
    """A statement on one line, cut at `limit` characters."""
    text = " ".join(sql.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _pending(
    m: Migration, statements: Sequence[Statement], columns: ColumnLookup | None, start: int
) -> PendingMigration:
    """A pending file as a plan shows it: its statements, and the findings from `start` on
    (judged against the live schema's `columns`, when there is one)."""
    findings = lint_statements(
        [s for s in statements if s.number >= start], m.destructive_ok is not None, columns
    )
    return PendingMigration(
        m.version,
        m.filename,
        m.description,
        m.checksum,
        [s.sql for s in statements],
        findings,
        start,
    )


def _checked(
    conn: MysqlConnection,
    target: MysqlTarget,
    settings: MigrationSettings,
    todo: Plan,
    environment_protected: bool,
) -> MigrationPlanReport:
    """Split, DEFINER-check, size-check and lint every pending file; nothing is written."""
    columns = live_columns(conn, target.database)
    limit = max_allowed_packet(conn)
    strip = settings.strip_definer
    pending = []
    for m in todo.pending:
        statements = prepared_statements(m, target.user, strip)
        check_sizes(m, statements, limit)
        pending.append(_pending(m, statements, columns, todo.resume.get(m.version, 1)))
    return MigrationPlanReport(
        describe_target(target),
        pending,
        len(todo.applied),
        [r.version for r in todo.missing],
        todo.baseline,
        environment_protected,
    )


def pending_plan(
    target: MysqlTarget,
    settings: MigrationSettings,
    environment_protected: bool,
    folder: Path | None = None,
) -> MigrationPlanReport:
    """What `migrate` would do now, for a preview, a dry run or an approval. Read-only.

    Creates nothing (not even the history table) and takes no lock.

    Args:
        target: the database.
        settings: folder, out-of-order and missing-file policy, DEFINER stripping.
        environment_protected: findings then block a run unless allowed or approved.
        folder: the migrations folder (default: settings.dir).

    Raises:
        MigrationFileError, MigrationFailedBefore, MigrationInterrupted, MigrationMissingFiles,
        MigrationChecksumError, MigrationOrderError, MigrationDefinerError,
        MigrationStatementTooLarge, DatabaseAuthError, TransientDatabaseError.
    """
    migrations = load_migrations(folder or settings.dir)
    allow_missing = settings.allow_missing
    with connect(target, settings) as conn:
        history = read_history(conn, create=False)
        todo = compute_plan(history, migrations, settings.allow_out_of_order, allow_missing)
        return _checked(conn, target, settings, todo, environment_protected)


def offline_plan(
    settings: MigrationSettings,
    environment_protected: bool,
    user: str,
    folder: Path | None = None,
) -> MigrationPlanReport:
    """What `migrate` would do on a database that does not exist yet: every file, in order.

    Reads only the folder; a narrowing MODIFY cannot be judged without a live schema (the other
    findings can).

    Raises:
        MigrationFileError, MigrationDefinerError.
    """
    migrations = load_migrations(folder or settings.dir)
    pending = []
    for m in migrations:
        statements = prepared_statements(m, user, settings.strip_definer)
        pending.append(_pending(m, statements, None, 1))
    return MigrationPlanReport(
        "(database not deployed yet)", pending, 0, [], None, environment_protected
    )


# --- migrate ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class AppliedMigration:
    """A file this run applied (statements counts all of it; first_statement > 1: resumed)."""

    version: int
    description: str
    filename: str
    statements: int
    duration_s: float
    first_statement: int = 1


@dataclass
class MigrateReport:
    """What a run did: files applied now, how many were applied before, and how long it took."""

    applied: list[AppliedMigration] = field(default_factory=list)
    already_applied: int = 0
    duration_s: float = 0.0
    missing: list[int] = field(default_factory=list)


def _update(conn: MysqlConnection, version: int, sets: str, *args: object) -> None:
    with conn.cursor() as cur:
        cur.execute(f"UPDATE {HISTORY_TABLE} SET {sets} WHERE version = %s", (*args, version))


def _start_record(conn: MysqlConnection, m: Migration, total: int) -> None:
    with conn.cursor() as cur:
        cur.execute(
            f"INSERT INTO {HISTORY_TABLE} (version, description, checksum, applied_at, "
            "duration_ms, success, error, state, statements_done, statements_total) "
            "VALUES (%s, %s, %s, UTC_TIMESTAMP(6), 0, 0, NULL, 'running', 0, %s)",
            (m.version, m.description, m.checksum, total),
        )


def _session_replay(statements: Sequence[Statement], before: int) -> list[Statement]:
    # A resumed file runs in a new session: its earlier SET statements (sql_mode, FK checks,
    # character set, user variables) are run again first, as they only touch the session.
    return [s for s in statements[: before - 1] if statement_kind(s) == "session"]


def _fail(
    control: MysqlConnection,
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
        code, message = _server_error(exc)
        what = f"statement {number} of {len(statements)} (line {st.line if st else 0})"
        _update(
            control,
            m.version,
            "state = 'failed', success = 0, error = %s, duration_ms = %s, "
            "in_flight_from = NULL, in_flight_to = NULL",
            f"{what}: ({code}) {message}"[:_MAX_ERROR_CHARS],
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
            "running", unit.first - 1, unit.first, unit.last,
        )  # fmt: skip
        raise MigrationInterrupted(
            f"{m.filename}: connection lost ({err}); "
            + interrupted_message(record, f"V{m.version} ({m.path})")
        ) from None
    if isinstance(err, TransientDatabaseError):
        raise TransientDatabaseError(
            f"{m.filename}: {err}; the statements before {number} are recorded, so a retry "
            f"resumes at statement {number}"
        ) from None
    raise err from None


@dataclass
class _Progress:
    """Where a file's run is: the statement being sent and the unit marked in flight."""

    current: Statement | None = None
    in_flight: Unit | None = None


def _run_units(
    control: MysqlConnection,
    cur: pymysql.cursors.Cursor,
    database: str,
    m: Migration,
    statements: Sequence[Statement],
    start: int,
    progress: _Progress,
) -> None:
    by_number = {s.number: s for s in statements}
    # Qualified: the file may have switched the session to another database (USE).
    record = f"UPDATE `{database}`.{HISTORY_TABLE} SET statements_done = %s WHERE version = %s"
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
            cur.execute(record, (unit.last, m.version))
            cur.execute("COMMIT")
            continue
        _update(control, m.version, "in_flight_from = %s, in_flight_to = %s", unit.first, unit.last)
        progress.in_flight = unit
        for number in range(unit.first, unit.last + 1):
            progress.current = by_number[number]
            cur.execute(progress.current.sql)
        cur.execute("COMMIT")  # in case the file turned autocommit off
        _update(
            control,
            m.version,
            "statements_done = %s, in_flight_from = NULL, in_flight_to = NULL",
            unit.last,
        )
        progress.in_flight = None  # only once recorded: until then the marker stands
    cur.execute("COMMIT")


def _apply(
    control: MysqlConnection,
    m: Migration,
    statements: Sequence[Statement],
    start: int,
    resuming: bool,
    target: MysqlTarget,
    settings: MigrationSettings,
) -> AppliedMigration:
    """Run `m` from statement `start` in a fresh session, recording progress per unit."""
    began = time.monotonic()
    if not resuming:
        _start_record(control, m, len(statements))
    progress = _Progress()
    failure: BaseException | None = None
    try:
        with connect(target, settings) as conn, conn.cursor() as cur:
            try:
                database = target.database.replace("`", "``")
                _run_units(control, cur, database, m, statements, start, progress)
            except (pymysql.err.MySQLError, OSError) as exc:
                failure = exc  # handled below, with its server code, after the session closes
    except TransientDatabaseError as exc:
        failure = exc
    if failure is not None:
        _fail(control, m, statements, start, progress, failure, target, began)
    duration = time.monotonic() - began
    _update(
        control,
        m.version,
        "state = 'applied', success = 1, applied_at = UTC_TIMESTAMP(6), duration_ms = %s, "
        "statements_done = %s, statements_total = %s",
        round(duration * 1000),
        len(statements),
        len(statements),
    )
    return AppliedMigration(m.version, m.description, m.filename, len(statements), duration, start)


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


def _check_pinned(todo: Plan, pinned: Mapping[int, str]) -> None:
    """Refuse unless every pending file was approved as it is now.

    An approved file that is no longer pending is fine only if it was applied with the approved
    checksum (an earlier attempt of the same run applied it).
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


def migrate(
    target: MysqlTarget,
    settings: MigrationSettings,
    folder: Path | None = None,
    *,
    on_applied: Callable[[AppliedMigration], None] | None = None,
    environment_protected: bool = False,
    approved_destructive: Collection[int] = (),
    pinned: Mapping[int, str] | None = None,
) -> MigrateReport:
    """Apply every pending migration in version order, under the schema's GET_LOCK.

    Before anything runs, every pending file is split, checked for foreign DEFINERs, statements
    over max_allowed_packet and (in a protected environment) unapproved destructive changes.
    A concurrent runner waits for the lock, then re-plans and finds nothing to do.

    Args:
        target: the database.
        settings: timeouts, TLS, lock timeout, out-of-order, missing-file and DEFINER policy.
        folder: the migrations folder (default: settings.dir).
        on_applied: called after each file is applied and recorded.
        environment_protected: refuse destructive findings unless allowed or approved.
        approved_destructive: versions whose destructive findings were approved.
        pinned: version -> checksum of the approved pending files; any other pending set is
            refused, and their findings count as approved.

    Raises:
        MigrationFileError, MigrationFailedBefore, MigrationChecksumError, MigrationOrderError,
        MigrationInterrupted, MigrationMissingFiles, MigrationDestructiveChange,
        MigrationPlanChanged, MigrationDefinerError, MigrationStatementTooLarge,
        MigrationSQLError, MigrationLockTimeout, DatabaseAuthError, TransientDatabaseError.
    """
    started = time.monotonic()
    migrations = load_migrations(folder or settings.dir)
    allow_missing = settings.allow_missing
    report = MigrateReport()
    with connect(target, settings) as conn, migration_lock(conn, target.database, settings):
        todo = plan(conn, migrations, settings.allow_out_of_order, allow_missing)
        report.already_applied = len(todo.applied)
        report.missing = [r.version for r in todo.missing]
        approved = set(approved_destructive)
        if pinned is not None:
            _check_pinned(todo, pinned)
            approved |= set(pinned)
        if not todo.pending:
            report.duration_s = time.monotonic() - started
            return report
        checked = _checked(conn, target, settings, todo, environment_protected)
        blocking = [(p, f) for p, f in checked.blocking if p.version not in approved]
        if blocking:
            raise MigrationDestructiveChange(destructive_refusal(blocking))
        strip = settings.strip_definer
        for m in todo.pending:
            statements = prepared_statements(m, target.user, strip)
            start = todo.resume.get(m.version, 1)
            resuming = m.version in todo.resume
            applied = _apply(conn, m, statements, start, resuming, target, settings)
            report.applied.append(applied)
            if on_applied is not None:
                on_applied(applied)
    report.duration_s = time.monotonic() - started
    return report


# --- status, repair and baseline --------------------------------------------------------------

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
        with conn.cursor() as cur:
            if failed:
                cur.execute(f"DELETE FROM {HISTORY_TABLE} WHERE state = 'failed'")
            for r in interrupted:
                done = r.in_flight_to if mark_ran else r.statements_done
                _update(
                    conn,
                    r.version,
                    "statements_done = %s, in_flight_from = NULL, in_flight_to = NULL",
                    done,
                )
        return sorted(failed + [r.version for r in interrupted])


def baseline(
    target: MysqlTarget, settings: MigrationSettings, version: int, folder: Path | None = None
) -> HistoryRecord:
    """Record an existing schema as migrated up to `version`: files up to it never run.

    Args:
        target: the database.
        settings: timeouts, TLS, lock timeout.
        version: the last version the schema already has.
        folder: the migrations folder (default: settings.dir), for the description.

    Raises:
        MigrationBaselineError: the schema already has migration history, or version < 1.
        MigrationLockTimeout, DatabaseAuthError, TransientDatabaseError, MigrationSQLError.
    """
    if version < 1:
        raise MigrationBaselineError(f"baseline version must be 1 or more, not {version}")
    files = {m.version: m for m in load_migrations(folder or settings.dir)}
    with connect(target, settings) as conn, migration_lock(conn, target.database, settings):
        history = read_history(conn, upgrade=True)
        if history:
            raise MigrationBaselineError(
                f"{describe_target(target)} already has migration history ({len(history)} "
                f"record(s), latest V{history[-1].version}); a baseline is only for a schema "
                "that has never been migrated"
            )
        m = files.get(version)
        description = f"baseline: {m.description}" if m else "baseline"
        checksum = m.checksum if m else ""
        with conn.cursor() as cur:
            cur.execute(
                f"INSERT INTO {HISTORY_TABLE} (version, description, checksum, applied_at, "
                "duration_ms, success, error, state) "
                "VALUES (%s, %s, %s, UTC_TIMESTAMP(6), 0, 1, NULL, 'baseline')",
                (version, description[:_MAX_DESCRIPTION_CHARS], checksum),
            )
        return read_history(conn)[0]


# --- waiting for the database -----------------------------------------------------------------


@dataclass(frozen=True)
class WaitAttempt:
    """One connection attempt while waiting: its number, error (None: connected), next delay."""

    number: int
    error: Exception | None
    elapsed_s: float
    next_delay_s: float | None


def wait_for_database(
    target: MysqlTarget,
    settings: MigrationSettings,
    *,
    on_attempt: Callable[[WaitAttempt], None] | None = None,
) -> int:
    """Connect until the database accepts, backing off exponentially with jitter.

    Only transient errors are retried, for up to settings.wait_timeout_s; an auth error fails at
    once.

    Args:
        target: the database.
        settings: wait timeout, connect timeout, TLS.
        on_attempt: called after every attempt (for progress logs).

    Returns:
        How many attempts it took.

    Raises:
        DatabaseAuthError: the credentials were refused (first attempt, no retry).
        DatabaseUnreachable: no connection within settings.wait_timeout_s.
    """
    started = time.monotonic()
    deadline = started + settings.wait_timeout_s
    delay, number = 0.25, 0
    while True:
        number += 1
        try:
            with connect(target, settings):
                pass
        except TransientDatabaseError as exc:
            remaining = deadline - time.monotonic()
            # Full jitter on the upper half, so runners that start together do not retry together.
            sleep = min(random.uniform(delay / 2, delay), max(remaining, 0.0))
            last = remaining <= 0
            if on_attempt is not None:
                on_attempt(
                    WaitAttempt(number, exc, time.monotonic() - started, None if last else sleep)
                )
            if last:
                raise DatabaseUnreachable(
                    f"{_where(target)} did not accept connections within "
                    f"{settings.wait_timeout_s:g}s ({number} attempts); last error: {exc}"
                ) from None
            time.sleep(sleep)
            delay = min(delay * 2, 15.0)
            continue
        except Exception as exc:
            if on_attempt is not None:
                on_attempt(WaitAttempt(number, exc, time.monotonic() - started, None))
            raise
        if on_attempt is not None:
            on_attempt(WaitAttempt(number, None, time.monotonic() - started, None))
        return number


def describe_target(target: MysqlTarget) -> str:
    """host:port/database, for logs and reports (no user, no password)."""
    return f"{target.host}:{target.port}/{target.database}"
