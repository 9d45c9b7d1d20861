"""A local `mariadbd` started from a base folder: its record, start (reusing a running one), stop."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

import pymysql
import pymysql.cursors

from stackflow.errors import LocalDatabaseError
from stackflow.localdb.bootstrap import copy_template, install
from stackflow.localdb.layout import (
    admin_user,
    data_dir,
    find_binary,
    pid_file,
    private_tmpdir,
    record_path,
    server_log,
    socket_path,
)
from stackflow.processes import folder_lock, port_free, runs, start_detached, stop

if TYPE_CHECKING:
    from pymysql.connections import Connection

AdminConnection: TypeAlias = "Connection[pymysql.cursors.Cursor]"

_START_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class LocalServer:
    """A local MariaDB started from a base folder (recorded in server.json; no secrets)."""

    pid: int
    port: int
    socket: str
    datadir: str
    host: str = "127.0.0.1"  # the address it listens on (records written before it have none)


def _quiet(_message: str) -> None:
    return None


def _read_pid(base_dir: Path) -> int | None:
    try:
        return int(pid_file(base_dir).read_text().strip())
    except (OSError, ValueError):
        return None


def running_server(base_dir: Path) -> LocalServer | None:
    """The server started from base_dir if its process is alive, else None."""
    try:
        server = LocalServer(**json.loads(record_path(base_dir).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    pid = _read_pid(base_dir) or server.pid
    if not runs(pid, server.datadir):
        return None
    return LocalServer(pid, server.port, server.socket, server.datadir, server.host)


def connect_socket(path: str, timeout_s: int) -> AdminConnection:
    """A connection as the server's admin, through its Unix socket."""
    return pymysql.connect(
        unix_socket=path,
        user=admin_user(),
        charset="utf8mb4",
        autocommit=True,
        connect_timeout=timeout_s,
        read_timeout=60,
        write_timeout=60,
    )


def _accepts(sock: Path) -> bool:
    try:
        connect_socket(str(sock), 2).close()
    except pymysql.err.MySQLError:
        return False
    return True


def _start(
    base_dir: Path,
    port: int,
    log: Callable[[str], None],
    *,
    host: str = "127.0.0.1",
    template: Path | None = None,
    server_args: Sequence[str] = (),
) -> LocalServer:
    mariadbd = find_binary("mariadbd")
    data = data_dir(base_dir)
    if not (data / "mysql").is_dir():
        if template is not None:
            copy_template(template, data, log)
        else:
            install(base_dir, data, log)
    sock = socket_path(base_dir)
    sock.unlink(missing_ok=True)
    pid_file(base_dir).unlink(missing_ok=True)
    args = [
        mariadbd,
        "--no-defaults",  # ignore /etc/mysql: this server is ours alone
        f"--datadir={data}",
        f"--port={port}",
        f"--bind-address={host}",
        f"--socket={sock}",
        f"--pid-file={pid_file(base_dir)}",
        f"--tmpdir={private_tmpdir(base_dir)}",
        "--skip-log-bin",
        "--skip-name-resolve",
        "--innodb-buffer-pool-size=32M",
        "--character-set-server=utf8mb4",
        "--collation-server=utf8mb4_unicode_ci",
        *server_args,  # later options win over the defaults above
    ]
    if os.geteuid() == 0:
        args.append("--user=root")
    log(f"starting local MariaDB on {host}:{port} (data in {data}, log {server_log(base_dir)})")

    def record(process: subprocess.Popen[bytes]) -> None:
        server = LocalServer(process.pid, port, str(sock), str(data), host)
        record_path(base_dir).write_text(json.dumps(asdict(server)))

    process = start_detached(
        args,
        log=server_log(base_dir),
        ready=lambda _process: _accepts(sock),
        what="mariadbd",
        not_ready="did not accept connections",
        error=LocalDatabaseError,
        timeout_s=_START_TIMEOUT_S,
        started=record,
        poll_s=0.02,  # a small server is up in a few hundred ms: poll often
    )
    return LocalServer(process.pid, port, str(sock), str(data), host)


def ensure_running(
    base_dir: Path,
    port: int,
    log: Callable[[str], None],
    *,
    host: str,
    port_hint: str,
    template: Path | None = None,
    server_args: Sequence[str] = (),
) -> LocalServer:
    """The server from base_dir on host:port: the running one, or one started now (a server from
    base_dir on another address is stopped first). The caller holds the folder lock.

    Raises:
        LocalDatabaseError: host:port is taken by another program (with `port_hint`), or the
            server fails to start.
    """
    server = running_server(base_dir)
    if server is not None and (server.port, server.host) != (port, host):
        log(
            f"local MariaDB from {base_dir} runs on {server.host}:{server.port}; "
            f"restarting on {host}:{port}"
        )
        stop(server.pid, timeout_s=_STOP_TIMEOUT_S)
        server = None
    if server is None:
        if not port_free(port, host):
            raise LocalDatabaseError(
                f"port {port} on {host} is in use by another program; {port_hint}"
            )
        return _start(base_dir, port, log, host=host, template=template, server_args=server_args)
    log(f"reusing local MariaDB on {host}:{port} (pid {server.pid})")
    return server


def start_local_mariadb(
    base_dir: Path,
    port: int,
    *,
    host: str = "127.0.0.1",
    template: Path | None = None,
    server_args: Sequence[str] = (),
    log: Callable[[str], None] = _quiet,
) -> LocalServer:
    """Make sure a MariaDB from base_dir runs on host:port (started detached, reused if running).

    A server from base_dir on another address or port is restarted. A missing data folder
    (`base_dir/data`) is copied from `template` (see `prepare_template`), or initialised when no
    template is given. Creates no user: connect as admin with `admin_connection(base_dir)`.

    Args:
        base_dir: folder that holds the data, socket, pid file and logs.
        port: TCP port on `host`.
        host: the loopback address to listen on (e.g. 127.0.0.2).
        template: an initialised data folder to copy.
        server_args: extra mariadbd options (they win over the defaults).
        log: receives one-line progress messages.

    Raises:
        LocalDatabaseError: MariaDB is not installed, host:port is taken, or the server fails to
            start (with the tail of its log).
    """
    base_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    with folder_lock(base_dir):
        return ensure_running(
            base_dir,
            port,
            log,
            host=host,
            port_hint="choose another port or stop that program",
            template=template,
            server_args=server_args,
        )


def stop_local_mariadb(base_dir: Path) -> bool:
    """Stop the server started from base_dir (clean shutdown; killed after 30 s).

    Returns:
        True if a running server was stopped.
    """
    if not base_dir.is_dir():
        return False
    with folder_lock(base_dir):
        server = running_server(base_dir)
        if server is None:
            return False
        stop(server.pid, timeout_s=_STOP_TIMEOUT_S)
        Path(server.socket).unlink(missing_ok=True)
        return True


def forget_server(base_dir: Path) -> None:
    """Remove the record and pid file of a stopped server (before its folder moves: they name
    the old paths)."""
    record_path(base_dir).unlink(missing_ok=True)
    pid_file(base_dir).unlink(missing_ok=True)
