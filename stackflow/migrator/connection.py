"""Talking to the database: a connection (timeouts, TLS), waiting until it accepts one, the
schema's migration lock, and `classify`, the one place a pymysql error becomes a typed error."""

from __future__ import annotations

import hashlib
import ipaddress
import math
import random
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

import pymysql
import pymysql.cursors

from stackflow.errors import SettingsError, StackflowError
from stackflow.migrator.errors import (
    DatabaseAuthError,
    DatabaseTLSError,
    DatabaseUnreachable,
    DatabaseWaitStopped,
    MigrationError,
    MigrationLockTimeout,
    MigrationSQLError,
    TransientDatabaseError,
)
from stackflow.migrator.target import MysqlTarget
from stackflow.redact import Redactor

if TYPE_CHECKING:
    from pymysql.connections import Connection

    from stackflow.settings import MigrationSettings

MysqlConnection: TypeAlias = "Connection[pymysql.cursors.Cursor]"

# Server/client error codes that may pass: the server is starting, restarting, busy or far away.
_TRANSIENT_CODES = {
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
_AUTH_CODES = {1044, 1045, 1698}
_TLS_FAILED = 2026


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
    where = target.login if target else "database"
    if isinstance(exc, pymysql.err.MySQLError):
        code, raw = server_error(exc)
        message = redact(raw)
        cause = getattr(exc, "original_exception", None)
        if code == _TLS_FAILED or isinstance(cause, ssl.SSLError):
            return DatabaseTLSError(
                f"{where}: TLS failed: {message}; check STACKFLOW_MIGRATIONS_TLS_CA (the server's CA "
                "bundle, e.g. the RDS global bundle) and that the host name matches its certificate"
            )
        if code in _TRANSIENT_CODES:
            return TransientDatabaseError(f"{where}: {_TRANSIENT_CODES[code]}: ({code}) {message}")
        if code in _AUTH_CODES:
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


def server_error(exc: pymysql.err.MySQLError) -> tuple[int, str]:
    """The server's (code, message) of a pymysql error (code 0 when it has none)."""
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0
    return code, str(exc.args[1]) if len(exc.args) > 1 else str(exc)


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


@dataclass(frozen=True)
class WaitAttempt:
    """One connection attempt while waiting: its number, error (None: connected), next delay."""

    number: int
    error: Exception | None
    next_delay_s: float | None


def wait_for_database(
    target: MysqlTarget,
    settings: MigrationSettings,
    *,
    on_attempt: Callable[[WaitAttempt], None] | None = None,
    stop: threading.Event | None = None,
) -> int:
    """Connect until the database accepts, backing off exponentially with jitter.

    Only transient errors are retried, for up to settings.wait_timeout_s; an auth error fails at
    once.

    Args:
        target: the database.
        settings: wait timeout, connect timeout, TLS.
        on_attempt: called after every attempt (for progress logs).
        stop: set when the run is interrupted: the wait ends at once (between attempts, and
            in the middle of a back-off).

    Returns:
        How many attempts it took.

    Raises:
        DatabaseAuthError: the credentials were refused (first attempt, no retry).
        DatabaseUnreachable: no connection within settings.wait_timeout_s.
        DatabaseWaitStopped: `stop` was set while waiting.
    """
    deadline = time.monotonic() + settings.wait_timeout_s
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
                on_attempt(WaitAttempt(number, exc, None if last else sleep))
            if last:
                raise DatabaseUnreachable(
                    f"{target.login} did not accept connections within "
                    f"{settings.wait_timeout_s:g}s ({number} attempts); last error: {exc}"
                ) from None
            if (stop or threading.Event()).wait(sleep):  # a back-off an interruption ends
                raise DatabaseWaitStopped(
                    f"stopped waiting for {target.address} after {number} attempt(s): the run "
                    "was interrupted; nothing was applied"
                ) from None
            delay = min(delay * 2, 15.0)
            continue
        except Exception as exc:
            if on_attempt is not None:
                on_attempt(WaitAttempt(number, exc, None))
            raise
        if on_attempt is not None:
            on_attempt(WaitAttempt(number, None, None))
        return number
