"""Accounts on a local MariaDB: the admin connection (by Unix socket), users, grants, and the
quickstart's `ensure_local_mariadb` (a server with one user and one database)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path

from pydantic import SecretStr

from stackflow.errors import LocalDatabaseError
from stackflow.localdb.server import AdminConnection, connect_socket, ensure_running, running_server
from stackflow.migrator.target import MysqlTarget
from stackflow.processes import folder_lock

USER_HOSTS = ("127.0.0.1", "localhost", "%")


def _quiet(_message: str) -> None:
    return None


@contextmanager
def admin_connection(base_dir: Path, *, timeout_s: int = 10) -> Iterator[AdminConnection]:
    """A connection as the server's admin (root by Unix socket), closed after the block.

    Raises:
        LocalDatabaseError: no server from base_dir is running.
    """
    server = running_server(base_dir)
    if server is None:
        raise LocalDatabaseError(f"no local MariaDB is running from {base_dir}")
    conn = connect_socket(server.socket, timeout_s)
    try:
        yield conn
    finally:
        if conn.open:
            conn.close()


def quote_identifier(identifier: str) -> str:
    """A database or table name as MariaDB reads it literally (backquoted)."""
    return "`" + identifier.replace("`", "``") + "`"


def grant_database(conn: AdminConnection, database: str, user: str) -> None:
    """Create `database` if missing and give `user` (at every host we create) all rights on it."""
    with conn.cursor() as cur:
        cur.execute(
            f"CREATE DATABASE IF NOT EXISTS {quote_identifier(database)} CHARACTER SET utf8mb4"
        )
        for host in USER_HOSTS:
            cur.execute(
                f"GRANT ALL PRIVILEGES ON {quote_identifier(database)}.* TO %s@%s", (user, host)
            )


def set_user(
    conn: AdminConnection, user: str, password: str, hosts: Sequence[str] = USER_HOSTS
) -> None:
    """Create user@host for every host with this password; an existing one gets the password.

    The password travels only in the statements' parameters: it is never logged or written.
    """
    with conn.cursor() as cur:
        for host in hosts:
            cur.execute("CREATE USER IF NOT EXISTS %s@%s IDENTIFIED BY %s", (user, host, password))
            # The user may predate this call with another password; the given one wins.
            cur.execute("ALTER USER %s@%s IDENTIFIED BY %s", (user, host, password))


def ensure_local_mariadb(
    base_dir: Path,
    port: int,
    *,
    user: str,
    password: str,
    database: str,
    log: Callable[[str], None] = _quiet,
    host: str = "127.0.0.1",
) -> MysqlTarget:
    """Make sure a local MariaDB from base_dir runs on host:port with this user and database.

    Reuses a server started earlier from base_dir on the same address; otherwise initialises the
    data folder (once) and starts one detached. Then creates the database and user@127.0.0.1,
    user@localhost and user@% with the password (an existing user gets the new password) and
    grants the user everything on the database.

    Args:
        base_dir: folder that holds the data, socket, pid file and logs.
        port: TCP port on `host`.
        user: the application user to create.
        password: its password (never written to disk or logged).
        database: the database to create.
        log: receives one-line progress messages.
        host: the loopback address to listen on.

    Raises:
        LocalDatabaseError: MariaDB is not installed, the port is taken, or the server fails to
            start (with the tail of its log).
    """
    if not password:
        raise LocalDatabaseError("the local MariaDB user needs a non-empty password")
    base_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    with folder_lock(base_dir):
        server = ensure_running(
            base_dir,
            port,
            log,
            host=host,
            port_hint="choose a free one (STACKFLOW_SIM_LOCAL_MYSQL_PORT)",
        )
        with closing(connect_socket(server.socket, 10)) as conn:
            set_user(conn, user, password)
            grant_database(conn, database, user)
    return MysqlTarget(host, port, user, SecretStr(password), database)
