"""Schema migrations: numbered SQL files applied once each, in order, under a lock.

Files are named `V<version>__<description>.sql` and live in one folder. Each applied file is
recorded in `stackflow_schema_history` with its checksum, duration and outcome, so a re-run is a
no-op (one SELECT), an edited applied file is refused, and a failed file blocks later runs until
someone checks the schema and clears the record with `repair`.

MySQL commits DDL implicitly, so a file is never rolled back: keep one DDL change per file.
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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple, TypeAlias

import pymysql
import pymysql.cursors
import sqlparse.engine
import sqlparse.sql
import sqlparse.tokens as T

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
from stackflow.redact import Redactor
from stackflow.settings import MigrationSettings, MysqlTarget

if TYPE_CHECKING:
    from pymysql.connections import Connection

HISTORY_TABLE = "stackflow_schema_history"
FILE_PATTERN = "V<version>__<description>.sql (e.g. V001__create_hello_pulumi.sql)"
REPAIR_COMMAND = "python flows/run.py migrate --repair"

# Versions are stored as BIGINT; 18 digits leaves room for timestamps like 20250101120000.
_NAME_RE = re.compile(r"^V(?P<version>\d{1,18})__(?P<description>[A-Za-z0-9][A-Za-z0-9_-]*)\.sql$")
# Anything that looks like it was meant to be a migration must match the pattern exactly.
_CANDIDATE_RE = re.compile(r"(^[Vv]\d)|(\.sql$)", re.IGNORECASE)
# Comments, whitespace and semicolons; MySQL's executable comments (/*! ... */) are real SQL.
_NOT_SQL_RE = re.compile(r"--[^\n]*|#[^\n]*|/\*(?!!).*?\*/|\s+|;", re.DOTALL)
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


# --- files ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Statement:
    """One SQL statement of a migration file: its 1-based number and the line it starts on."""

    number: int
    line: int
    sql: str


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
            MigrationFileError: the file has no statements or uses the client-only DELIMITER.
        """
        statements = split_statements(self.sql, source=self.filename)
        if not statements:
            raise MigrationFileError(_empty_file_message(self.path))
        return statements


def _empty_file_message(path: Path) -> str:
    return f"{path}: has no SQL statements (only comments or whitespace); expected {FILE_PATTERN}"


def _is_code(token: sqlparse.sql.Token) -> bool:
    # MySQL runs executable comments (/*!40101 ... */), so they count as code.
    return not (token.is_whitespace or token.ttype in T.Comment) or token.value.startswith("/*!")


def split_statements(sql: str, *, source: str = "<sql>") -> tuple[Statement, ...]:
    """Split SQL text into statements, honouring strings, comments and BEGIN ... END blocks.

    Comment-only and empty statements are dropped; each statement loses its trailing semicolon.

    Args:
        sql: the text of a migration file.
        source: the file name, for error messages.

    Raises:
        MigrationFileError: a `DELIMITER` line (a mysql client command, not SQL).
    """
    out: list[Statement] = []
    offset = 0
    # sqlparse's splitter without grouping: lossless text, fast, and BEGIN ... END aware.
    stack = sqlparse.engine.FilterStack()  # type: ignore[no-untyped-call]
    for parsed in stack.run(sql):  # type: ignore[no-untyped-call]
        tokens = list(parsed.flatten())
        start, first = offset, None
        for token in tokens:
            if _is_code(token) and not token.match(T.Punctuation, ";"):
                first = token
                break
            start += len(token.value)
        offset += sum(len(t.value) for t in tokens)
        if first is None:
            continue  # comments, whitespace or a stray semicolon
        line = sql.count("\n", 0, start) + 1
        if first.value.upper() == "DELIMITER":
            raise MigrationFileError(
                f"{source}: line {line}: DELIMITER is a mysql client command, not SQL; write "
                "CREATE PROCEDURE/TRIGGER ... BEGIN ... END; as usual: the runner keeps "
                "BEGIN ... END blocks whole"
            )
        # Drop the terminating semicolon even when a comment follows it on the same line.
        for i in range(len(tokens) - 1, -1, -1):
            if tokens[i].match(T.Punctuation, ";"):
                del tokens[i]
                break
            if _is_code(tokens[i]):
                break
        body = "".join(t.value for t in tokens).strip()
        out.append(Statement(len(out) + 1, line, body))
    return tuple(out)


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
        MigrationFileError: the folder is missing or empty, or a file has a malformed name, a
            duplicate version, is unreadable or has no statements; the message names the file
            and the accepted pattern.
    """
    if not folder.is_dir():
        raise MigrationFileError(
            f"migrations folder {folder} does not exist; it should hold {FILE_PATTERN} files"
        )
    found: dict[int, Migration] = {}
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or not _CANDIDATE_RE.search(path.name):
            continue
        match = _NAME_RE.match(path.name)
        if match is None or not path.is_file():
            raise MigrationFileError(
                f"{path}: malformed migration file name; accepted: {FILE_PATTERN}"
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
        if not _NOT_SQL_RE.sub("", text):
            raise MigrationFileError(_empty_file_message(path))
        description = match["description"].replace("_", " ")[:_MAX_DESCRIPTION_CHARS]
        found[version] = Migration(version, description, path, text, checksum_of(text))
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
    error TEXT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""


@dataclass(frozen=True)
class HistoryRecord:
    """One row of the history table."""

    version: int
    description: str
    checksum: str
    applied_at: datetime
    duration_ms: int
    success: bool
    error: str | None


def read_history(conn: MysqlConnection, *, create: bool = True) -> list[HistoryRecord]:
    """Every history row, by version; one SELECT (the table is created only when it is missing).

    Args:
        conn: an open connection to the schema.
        create: create the table when missing (False for read-only callers such as `status`).
    """
    with conn.cursor() as cur:
        try:
            cur.execute(
                "SELECT version, description, checksum, applied_at, duration_ms, success, error "
                f"FROM {HISTORY_TABLE} ORDER BY version"
            )
        except pymysql.err.ProgrammingError as exc:
            if _server_error(exc)[0] != _NO_SUCH_TABLE:
                raise
            if create:
                cur.execute(_HISTORY_DDL)
            return []
        return [
            HistoryRecord(int(v), str(d), str(c), a, int(ms), bool(ok), e)
            for v, d, c, a, ms, ok, e in cur.fetchall()
        ]


@dataclass(frozen=True)
class Plan:
    """What a run would do: successful history records, and files still to apply (by version)."""

    applied: list[HistoryRecord]
    pending: list[Migration]


def _file_label(version: int, files: dict[int, Migration], description: str = "") -> str:
    m = files.get(version)
    return f"V{version} ({m.path})" if m else f"V{version} ({description}; its file is gone)"


def compute_plan(
    history: Sequence[HistoryRecord], migrations: Sequence[Migration], allow_out_of_order: bool
) -> Plan:
    """Pure set arithmetic: which files are applied and which are pending.

    Args:
        history: the history table's rows.
        migrations: the files, sorted by version.
        allow_out_of_order: apply a pending file whose version is below the latest applied one.

    Raises:
        MigrationFailedBefore: a failed record is present.
        MigrationChecksumError: an applied file has changed.
        MigrationOrderError: a pending version is below the latest applied one.
    """
    files = {m.version: m for m in migrations}
    failed = [r for r in history if not r.success]
    if failed:
        r = failed[0]
        raise MigrationFailedBefore(
            f"migration {_file_label(r.version, files, r.description)} failed in an earlier run "
            f"({r.applied_at:%Y-%m-%d %H:%M:%S} UTC): {r.error or 'no error recorded'}. Statements "
            "before the failing one were committed (MySQL commits DDL): check the schema for what "
            "they changed, fix the file (make it safe to run again), then run "
            f"`{REPAIR_COMMAND}` to clear the failed record and migrate again"
        )
    applied = [r for r in history if r.success]
    changed = [r for r in applied if r.version in files and files[r.version].checksum != r.checksum]
    if changed:
        r = changed[0]
        m = files[r.version]
        raise MigrationChecksumError(
            f"{m.path} changed after it was applied ({r.applied_at:%Y-%m-%d %H:%M:%S} UTC; checksum "
            f"{r.checksum[:12]}, now {m.checksum[:12]}); applied files must not be edited: restore "
            "it and put the change in a new file with a higher version"
        )
    done = {r.version for r in applied}
    pending = [m for m in migrations if m.version not in done]
    latest = max(done, default=None)
    late = [m for m in pending if latest is not None and m.version < latest]
    if late and not allow_out_of_order:
        raise MigrationOrderError(
            f"{late[0].path} has version {late[0].version}, below the latest applied version "
            f"{latest}; renumber it above {latest}, or allow it with --allow-out-of-order "
            "(STACKFLOW_MIGRATIONS_ALLOW_OUT_OF_ORDER=true)"
        )
    return Plan(applied, pending)


def plan(conn: MysqlConnection, migrations: Sequence[Migration], allow_out_of_order: bool) -> Plan:
    """Read the history (one SELECT) and compute the plan; see `compute_plan` for what it raises."""
    return compute_plan(read_history(conn), migrations, allow_out_of_order)


# --- migrate ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class AppliedMigration:
    """A file this run applied."""

    version: int
    description: str
    filename: str
    statements: int
    duration_s: float


@dataclass
class MigrateReport:
    """What a run did: files applied now, how many were applied before, and how long it took."""

    applied: list[AppliedMigration] = field(default_factory=list)
    already_applied: int = 0
    duration_s: float = 0.0


def _record(conn: MysqlConnection, m: Migration, duration_s: float, error: str | None) -> None:
    with conn.cursor() as cur:
        cur.execute(
            f"INSERT INTO {HISTORY_TABLE} "
            "(version, description, checksum, applied_at, duration_ms, success, error) "
            "VALUES (%s, %s, %s, UTC_TIMESTAMP(6), %s, %s, %s)",
            (m.version, m.description, m.checksum, round(duration_s * 1000), error is None, error),
        )


def _apply(conn: MysqlConnection, m: Migration, target: MysqlTarget) -> AppliedMigration:
    started = time.monotonic()
    with conn.cursor() as cur:
        for st in m.statements:
            try:
                cur.execute(st.sql)
            except pymysql.err.MySQLError as exc:
                err = classify(exc, target)
                if not isinstance(err, MigrationSQLError):
                    raise err from None  # connection trouble: the file's outcome is unknown
                code, message = _server_error(exc)
                what = f"statement {st.number} of {len(m.statements)} (line {st.line})"
                _record(
                    conn,
                    m,
                    time.monotonic() - started,
                    f"{what}: ({code}) {message}"[:_MAX_ERROR_CHARS],
                )
                raise MigrationSQLError(
                    f"{m.filename}: {what} failed: ({code}) {message}. The file is recorded as "
                    "failed; earlier statements were committed (MySQL commits DDL): check the "
                    f"schema, fix the file, then run `{REPAIR_COMMAND}` and migrate again"
                ) from None
    duration = time.monotonic() - started
    _record(conn, m, duration, None)
    return AppliedMigration(m.version, m.description, m.filename, len(m.statements), duration)


def migrate(
    target: MysqlTarget,
    settings: MigrationSettings,
    folder: Path | None = None,
    *,
    on_applied: Callable[[AppliedMigration], None] | None = None,
) -> MigrateReport:
    """Apply every pending migration in version order, under the schema's GET_LOCK.

    A concurrent runner waits for the lock, then re-plans and finds nothing to do. With nothing
    pending the check is one history SELECT beyond connect and lock.

    Args:
        target: the database.
        settings: timeouts, TLS, lock timeout, out-of-order policy.
        folder: the migrations folder (default: settings.dir).
        on_applied: called after each file is applied and recorded.

    Raises:
        MigrationFileError, MigrationFailedBefore, MigrationChecksumError, MigrationOrderError,
        MigrationSQLError, MigrationLockTimeout, DatabaseAuthError, TransientDatabaseError.
    """
    started = time.monotonic()
    migrations = load_migrations(folder or settings.dir)
    report = MigrateReport()
    with connect(target, settings) as conn, migration_lock(conn, target.database, settings):
        todo = plan(conn, migrations, settings.allow_out_of_order)
        report.already_applied = len(todo.applied)
        for m in todo.pending:
            _ = m.statements  # split every pending file before running any of them
        for m in todo.pending:
            applied = _apply(conn, m, target)
            report.applied.append(applied)
            if on_applied is not None:
                on_applied(applied)
    report.duration_s = time.monotonic() - started
    return report


# --- status and repair ------------------------------------------------------------------------

State = Literal["applied", "pending", "failed", "changed"]


class MigrationStatus(NamedTuple):
    """One version's state: applied, pending, failed (needs repair) or changed (file edited)."""

    version: int
    description: str
    state: State


def compute_status(
    history: Sequence[HistoryRecord], migrations: Sequence[Migration]
) -> list[MigrationStatus]:
    """Each version's state from the history rows and the files (records without a file too)."""
    files = {m.version: m for m in migrations}
    rows = {r.version: r for r in history}
    out: list[MigrationStatus] = []
    for version in sorted(files.keys() | rows.keys()):
        m, r = files.get(version), rows.get(version)
        description = m.description if m else r.description if r else ""
        state: State
        if r is None:
            state = "pending"
        elif not r.success:
            state = "failed"
        elif m is not None and m.checksum != r.checksum:
            state = "changed"
        else:
            state = "applied"
        out.append(MigrationStatus(version, description, state))
    return out


def status(
    target: MysqlTarget, settings: MigrationSettings, folder: Path | None = None
) -> list[MigrationStatus]:
    """Each migration's state in the database: applied, pending, failed or changed. Read-only.

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


def repair(target: MysqlTarget, settings: MigrationSettings) -> list[int]:
    """Remove failed records (under the migration lock) so their fixed files run again.

    Returns:
        The versions whose failed records were removed.

    Raises:
        MigrationLockTimeout, DatabaseAuthError, TransientDatabaseError, MigrationSQLError.
    """
    with connect(target, settings) as conn, migration_lock(conn, target.database, settings):
        failed = [r.version for r in read_history(conn, create=False) if not r.success]
        if failed:
            with conn.cursor() as cur:
                cur.execute(f"DELETE FROM {HISTORY_TABLE} WHERE success = 0")
        return failed


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
