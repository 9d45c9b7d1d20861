"""A PostgreSQL owned by the project, under one folder: team mode on one machine, and tests.

The folder (`StateLayout.postgres`, or a test's own) holds:

    data/        the cluster (initdb), owned by the server's OS user, 0700
    run/         its Unix socket, in a private folder (0700): only that user and root reach it
    tmp/         its TMPDIR, so nothing it writes lands in the shared /tmp
    server.log   what the server printed; initdb.log: what initdb printed
    .lock        ensure and stop take turns on it

PostgreSQL refuses to run as root: when stackflow runs as root the server runs as the `postgres` OS
user (Debian's package creates it), otherwise as the current user. Clients connect over the socket
with `trust` authentication: the socket's private folder is the guard, so no password appears in
any URL or process environment. TCP on 127.0.0.1 is optional and asks for a password
(scram-sha-256); none is set here.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psycopg

from stackflow.postgres.errors import PostgresError, PostgresFolderError
from stackflow.postgres.host import (
    bin_dir,
    check_reachable,
    child_env,
    identity,
    own_folder,
    server_account,
)
from stackflow.processes import folder_lock, log_tail, pid_alive, port_free

ROLE = "stackflow"  # the cluster's superuser, made by initdb; connects by socket without password
DEFAULT_PORT = 5432  # names the socket file (.s.PGSQL.<port>); a TCP port only when tcp=True
_MAX_SOCKET_PATH = 107  # AF_UNIX path limit (108 bytes with the terminating NUL)
_START_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class PostgresServer:
    """A running server, as its postmaster.pid describes it.

    Attributes:
        pid: the postmaster's process id.
        base_dir: the folder it was started from.
        socket_dir: the private folder of its Unix socket.
        port: its port (the socket file's number; a TCP port when `host` is set).
        host: the TCP address it listens on (127.0.0.1), or None for the socket only.
        user: the role clients connect as.
    """

    pid: int
    base_dir: Path
    socket_dir: Path
    port: int
    host: str | None
    user: str = ROLE

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"


def _quiet(_message: str) -> None:
    return None


def _spawn(
    args: list[str], account: pwd.struct_passwd, base_dir: Path, out: IO[bytes], *, detached: bool
) -> subprocess.Popen[bytes]:
    """Start a PostgreSQL program as the server's OS user, in base_dir, output to `out`."""
    uid, gid, groups = identity(account)
    return subprocess.Popen(
        args,
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=base_dir,
        env=child_env(base_dir),
        start_new_session=detached,  # the server outlives this process: later runs reuse it
        user=uid,
        group=gid,
        extra_groups=groups,
    )


def _initdb(base_dir: Path, account: pwd.struct_passwd, log: Callable[[str], None]) -> None:
    data = base_dir / "data"
    log(f"initialising a PostgreSQL cluster in {data}")
    # Initialise beside the final folder, then rename: a crash never leaves a half-made cluster.
    staging = base_dir / "data.initialising"
    shutil.rmtree(staging, ignore_errors=True)
    args = [
        str(bin_dir() / "initdb"),
        f"--pgdata={staging}",
        f"--username={ROLE}",
        "--auth-local=trust",
        "--auth-host=scram-sha-256",
        "--encoding=UTF8",
        "--locale=C",
        "--no-instructions",
    ]
    install_log = base_dir / "initdb.log"
    with install_log.open("wb") as out:
        returncode = _spawn(args, account, base_dir, out, detached=False).wait()
    if returncode != 0:
        raise PostgresError(
            f"initdb failed (exit {returncode}); {install_log}:\n{log_tail(install_log)}"
        )
    staging.rename(data)


def _read_pid_file(data_dir: Path) -> list[str]:
    try:
        return (data_dir / "postmaster.pid").read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return []


def postgres_status(base_dir: Path) -> PostgresServer | None:
    """The server started from base_dir if it runs (read from its postmaster.pid), else None."""
    data = base_dir.resolve() / "data"
    lines = _read_pid_file(data)
    # postmaster.pid: pid, data folder, start time, port, socket folder, listen address, shm, status
    if len(lines) < 6 or not lines[0].strip().isdigit():
        return None
    pid = int(lines[0])
    if not pid_alive(pid):
        return None
    cmdline = Path(f"/proc/{pid}/cmdline")
    # A recycled pid belongs to some other program; /proc tells (on Linux).
    if cmdline.exists() and str(data).encode() not in cmdline.read_bytes():
        return None
    host = lines[5].strip() or None
    return PostgresServer(pid, base_dir.resolve(), Path(lines[4].strip()), int(lines[3]), host)


def open_connection(
    server: PostgresServer, database: str, timeout_s: int = 10
) -> psycopg.Connection[tuple[object, ...]]:
    """A superuser connection to `database` over the socket (autocommit); the caller closes it.

    Raises:
        psycopg.OperationalError: the server does not answer.
    """
    return psycopg.connect(
        host=str(server.socket_dir),
        port=server.port,
        user=server.user,
        dbname=database,
        autocommit=True,
        connect_timeout=timeout_s,
    )


def _start(
    base_dir: Path,
    port: int,
    tcp: bool,
    max_connections: int,
    account: pwd.struct_passwd,
    log: Callable[[str], None],
) -> PostgresServer:
    data, run = base_dir / "data", base_dir / "run"
    for folder in (run, base_dir / "tmp"):
        own_folder(folder, account)
    if len(str(run / f".s.PGSQL.{port}")) > _MAX_SOCKET_PATH:
        raise PostgresFolderError(
            f"the socket path under {run} is longer than Unix sockets allow "
            f"({_MAX_SOCKET_PATH} bytes); choose a shorter state folder"
        )
    if tcp and not port_free(port):
        raise PostgresError(
            f"port {port} on 127.0.0.1 is in use by another program; choose another"
        )
    host = "127.0.0.1" if tcp else ""
    args = [
        str(bin_dir() / "postgres"),
        "-D",
        str(data),
        "-k",
        str(run),
        "-p",
        str(port),
        "-c",
        f"listen_addresses={host}",
        "-c",
        "unix_socket_permissions=0700",
        "-c",
        f"max_connections={max_connections}",
        "-c",
        "logging_collector=off",
    ]
    server_log = base_dir / "server.log"
    log(f"starting PostgreSQL (data in {data}, socket in {run}, log {server_log})")
    with server_log.open("ab") as out:
        since = out.seek(0, os.SEEK_END)  # this start's lines begin here
        process = _spawn(args, account, base_dir, out, detached=True)
    server = PostgresServer(process.pid, base_dir, run, port, host or None)
    deadline = time.monotonic() + _START_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise PostgresError(
                f"postgres exited at start (exit {process.returncode}); {server_log}:\n"
                f"{log_tail(server_log, since=since)}"
            )
        try:
            open_connection(server, "postgres", 2).close()
            return server
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                _terminate(process.pid)
                raise PostgresError(
                    f"postgres did not accept connections within {_START_TIMEOUT_S:g}s; "
                    f"{server_log}:\n{log_tail(server_log, since=since)}"
                ) from None
            time.sleep(0.05)  # a small cluster is up in a few hundred ms: poll often


def ensure_postgres(
    base_dir: Path,
    *,
    port: int = DEFAULT_PORT,
    tcp: bool = False,
    max_connections: int = 200,
    log: Callable[[str], None] = _quiet,
) -> PostgresServer:
    """Make sure a PostgreSQL from base_dir runs: initialise it once, start it detached, wait
    until it accepts connections; reuse one already running from base_dir.

    A running server with another port or TCP choice is restarted with these.

    Args:
        base_dir: the server's folder (created; owned by the server's OS user).
        port: the socket file's number, and the TCP port when `tcp` is set.
        tcp: also listen on 127.0.0.1:port (password authentication only).
        max_connections: the server's connection limit (each Pulumi CLI opens a few).
        log: receives one-line progress messages.

    Raises:
        PostgresNotInstalled: no PostgreSQL, or no `postgres` OS user while we are root.
        PostgresFolderError: the server's OS user cannot reach base_dir, or its path is too long.
        PostgresError: initdb failed, the port is taken, or the server did not start (with the
            tail of its log).
    """
    account = server_account()
    base_dir = base_dir.resolve()
    check_reachable(base_dir.parent, account)  # before anything is made (base_dir becomes its own)
    own_folder(base_dir, account)
    check_reachable(base_dir, account)  # parents just made follow the umask
    with folder_lock(base_dir):
        server = postgres_status(base_dir)
        if server is not None and (server.port, server.host is not None) == (port, tcp):
            log(f"reusing PostgreSQL from {base_dir} (pid {server.pid})")
            return server
        if server is not None:
            log(f"restarting PostgreSQL from {base_dir} with port {port} (tcp: {tcp})")
            _terminate(server.pid)
        if not (base_dir / "data" / "PG_VERSION").is_file():
            _initdb(base_dir, account, log)
        return _start(base_dir, port, tcp, max_connections, account, log)


def _terminate(pid: int, timeout_s: float = _STOP_TIMEOUT_S) -> None:
    """Fast shutdown (SIGINT: sessions end, a checkpoint is written); immediate (SIGQUIT) after
    the timeout. Only the postmaster is signalled; it ends its own children."""
    for sig in (signal.SIGINT, signal.SIGQUIT):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout_s
        while pid_alive(pid):
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        else:
            return
    raise PostgresError(f"PostgreSQL (pid {pid}) did not stop after SIGINT and SIGQUIT")


def stop_postgres(base_dir: Path) -> bool:
    """Stop the server started from base_dir (fast shutdown).

    Returns:
        True if a running server was stopped.

    Raises:
        PostgresError: it did not stop.
    """
    if not base_dir.is_dir():
        return False
    with folder_lock(base_dir):
        server = postgres_status(base_dir)
        if server is None:
            return False
        _terminate(server.pid)
        return True
