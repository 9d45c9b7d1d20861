"""A real MariaDB owned by this project, under one folder: for tests and the offline quickstart.

`ensure_local_mariadb` initialises a data folder once, starts `mariadbd` detached on 127.0.0.1
(reusing one already started from the same folder), then creates the database and a user with the
given password. The server's root account authenticates by Unix socket only, so no admin password
exists anywhere; the user's password is sent over the socket and never written to disk or logged.

The local cloud's data plane runs many such servers, one per folder: `prepare_template` initialises
a data folder once, and `start_local_mariadb` starts a server from a copy of it on a loopback
address of its own (127.x.y.z) with extra server options (a small memory footprint).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

import pymysql
import pymysql.cursors
from pydantic import SecretStr

from stackflow.errors import LocalDatabaseError
from stackflow.settings import MysqlTarget

if TYPE_CHECKING:
    from pymysql.connections import Connection

AdminConnection: TypeAlias = "Connection[pymysql.cursors.Cursor]"

INSTALL_HINT = "install it with `apt-get install mariadb-server` (or `bash scripts/setup.sh`)"
_SEARCH_DIRS = ("/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin")
# AF_UNIX paths are capped at 108 bytes; stay well under.
_MAX_SOCKET_PATH = 100
_USER_HOSTS = ("127.0.0.1", "localhost", "%")
_START_TIMEOUT_S = 60.0


class MariaDBBootstrapError(LocalDatabaseError):
    """`mariadb-install-db` failed (twice); `log` is its log file."""

    def __init__(self, message: str, log: Path) -> None:
        super().__init__(message)
        self.log = log


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


def find_binary(name: str) -> str:
    """Path of a MariaDB program (PATH first, then /usr/sbin and friends).

    Raises:
        LocalDatabaseError: not installed, with the install command.
    """
    found = shutil.which(name)
    if found:
        return found
    for folder in _SEARCH_DIRS:
        candidate = Path(folder) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    raise LocalDatabaseError(f"MariaDB's `{name}` was not found; {INSTALL_HINT}")


def socket_path(base_dir: Path) -> Path:
    """The server's Unix socket: in base_dir, or under /tmp with a hashed name if that is too long."""
    path = base_dir.resolve() / "mysqld.sock"
    if len(str(path)) < _MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(str(base_dir.resolve()).encode()).hexdigest()[:16]
    return Path("/tmp") / f"stackflow-mariadb-{digest}.sock"


def _admin_user() -> str:
    # mariadb-install-db lets the OS user that ran it in through the socket, with all privileges.
    # By uid, not $USER: unix_socket authentication checks the peer's uid.
    return pwd.getpwuid(os.geteuid()).pw_name


def pid_alive(pid: int) -> bool:
    """Whether process `pid` runs. An exited process is dead even while a zombie: our own child is
    reaped here; another process's (a server started by a test's process) reads 'Z' in /proc."""
    if pid <= 0:
        return False
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc (not Linux): kill 0 is all we know
    return state != "Z"


def _read_pid(base_dir: Path) -> int | None:
    try:
        return int((base_dir / "mariadbd.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def running_server(base_dir: Path) -> LocalServer | None:
    """The server started from base_dir if its process is alive, else None."""
    try:
        server = LocalServer(**json.loads((base_dir / "server.json").read_text()))
    except (OSError, ValueError, TypeError):
        return None
    pid = _read_pid(base_dir) or server.pid
    if not pid_alive(pid):
        return None
    cmdline = Path(f"/proc/{pid}/cmdline")
    # A recycled pid belongs to some other program; /proc tells (on Linux).
    if cmdline.exists() and server.datadir.encode() not in cmdline.read_bytes():
        return None
    return LocalServer(pid, server.port, server.socket, server.datadir, server.host)


@contextmanager
def admin_connection(base_dir: Path, *, timeout_s: int = 10) -> Iterator[AdminConnection]:
    """A connection as the server's admin (root by Unix socket), closed after the block.

    Raises:
        LocalDatabaseError: no server from base_dir is running.
    """
    server = running_server(base_dir)
    if server is None:
        raise LocalDatabaseError(f"no local MariaDB is running from {base_dir}")
    conn = _connect_socket(server.socket, timeout_s)
    try:
        yield conn
    finally:
        if conn.open:
            conn.close()


def _connect_socket(path: str, timeout_s: int) -> AdminConnection:
    return pymysql.connect(
        unix_socket=path,
        user=_admin_user(),
        charset="utf8mb4",
        autocommit=True,
        connect_timeout=timeout_s,
        read_timeout=60,
        write_timeout=60,
    )


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether nothing listens on host:port (TCP)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def log_tail(path: Path, chars: int = 2000) -> str:
    """The end of a log file, for an error message."""
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


def private_tmpdir(base_dir: Path) -> Path:
    """An empty temporary folder of the server's own in base_dir (0700), for `--tmpdir`.

    The system /tmp is shared with every other program: a MariaDB that puts its temporary tables
    there may find another's files or lose its own (`#sql-temptable-... not found`).
    """
    folder = base_dir / "tmp"
    shutil.rmtree(folder, ignore_errors=True)  # no server runs from base_dir: nothing in use
    folder.mkdir(parents=True, mode=0o700)
    folder.chmod(0o700)  # mkdir's mode is masked by the umask
    return folder


_INSTALL_ATTEMPTS = 2  # a bootstrap that failed once for a passing reason gets one more try


def _install(
    base_dir: Path, data: Path, log: Callable[[str], None], server_args: Sequence[str] = ()
) -> None:
    install_db = find_binary("mariadb-install-db")
    log(f"initialising a MariaDB data folder in {data}")
    # Initialise beside the final folder, then rename: a crash never leaves a half-made datadir.
    staging = data.with_name(f"{data.name}.initialising")
    install_log = base_dir / "install.log"
    install_log.unlink(missing_ok=True)
    for attempt in range(1, _INSTALL_ATTEMPTS + 1):
        shutil.rmtree(staging, ignore_errors=True)
        args = [
            install_db,
            "--no-defaults",
            f"--datadir={staging}",
            f"--tmpdir={private_tmpdir(base_dir)}",
            "--auth-root-authentication-method=socket",
            "--skip-test-db",
            *server_args,  # passed on to the bootstrap mariadbd (InnoDB sizes must match the runs)
        ]
        if os.geteuid() == 0:
            args.append("--user=root")
        else:
            args.append(f"--auth-root-socket-user={_admin_user()}")
        with install_log.open("ab") as out:
            out.write(f"== attempt {attempt} of {_INSTALL_ATTEMPTS}: {' '.join(args)}\n".encode())
            out.flush()
            result = subprocess.run(
                args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        if result.returncode == 0:
            staging.rename(data)
            return
        log(
            f"mariadb-install-db failed (exit {result.returncode}, attempt {attempt}); see {install_log}"
        )
    shutil.rmtree(staging, ignore_errors=True)
    raise MariaDBBootstrapError(
        f"mariadb-install-db failed {_INSTALL_ATTEMPTS} times (last exit {result.returncode}); "
        f"its log is {install_log}:\n{log_tail(install_log)}",
        install_log,
    )


def _copy_template(template: Path, data: Path, log: Callable[[str], None]) -> None:
    log(f"copying the MariaDB data folder {template} to {data}")
    # Copy beside the final folder, then rename: a crash never leaves a half-copied datadir.
    staging = data.with_name(f"{data.name}.copying")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(template, staging, symlinks=True)
    staging.rename(data)


def prepare_template(
    template: Path, *, server_args: Sequence[str] = (), log: Callable[[str], None] = _quiet
) -> bool:
    """Initialise a MariaDB data folder at `template` once, for servers to start from copies of it.

    The folder appears whole or not at all (initialised beside it, then renamed); its parent holds
    the install log and a lock, so concurrent callers take turns.

    Args:
        template: the data folder to create (never run itself).
        server_args: mariadbd options for the bootstrap (use the servers' InnoDB sizes).
        log: receives one-line progress messages.

    Returns:
        True if it was initialised now, False if it already existed.

    Raises:
        LocalDatabaseError: MariaDB is not installed, or mariadb-install-db failed (with its log).
    """
    if (template / "mysql").is_dir():
        return False
    template.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with folder_lock(template.parent):
        if (template / "mysql").is_dir():
            return False
        _install(template.parent, template, log, server_args)
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
    data = base_dir / "data"
    if not (data / "mysql").is_dir():
        if template is not None:
            _copy_template(template, data, log)
        else:
            _install(base_dir, data, log)
    sock = socket_path(base_dir)
    sock.unlink(missing_ok=True)
    (base_dir / "mariadbd.pid").unlink(missing_ok=True)
    args = [
        mariadbd,
        "--no-defaults",  # ignore /etc/mysql: this server is ours alone
        f"--datadir={data}",
        f"--port={port}",
        f"--bind-address={host}",
        f"--socket={sock}",
        f"--pid-file={base_dir / 'mariadbd.pid'}",
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
    server_log = base_dir / "mariadbd.log"
    log(f"starting local MariaDB on {host}:{port} (data in {data}, log {server_log})")
    with server_log.open("ab") as out:
        process = subprocess.Popen(
            args,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # outlives this process: later runs reuse it
        )
    server = LocalServer(process.pid, port, str(sock), str(data), host)
    (base_dir / "server.json").write_text(json.dumps(asdict(server)))
    deadline = time.monotonic() + _START_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise LocalDatabaseError(
                f"mariadbd exited at start (exit {process.returncode}); {server_log}:\n"
                f"{log_tail(server_log)}"
            )
        try:
            _connect_socket(str(sock), 2).close()
            return server
        except pymysql.err.MySQLError:
            if time.monotonic() > deadline:
                _terminate(process.pid)
                raise LocalDatabaseError(
                    f"mariadbd did not accept connections within {_START_TIMEOUT_S:g}s; "
                    f"{server_log}:\n{log_tail(server_log)}"
                ) from None
            time.sleep(0.02)  # a small server is up in a few hundred ms: poll often


def _quote(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


def grant_database(conn: AdminConnection, database: str, user: str) -> None:
    """Create `database` if missing and give `user` (at every host we create) all rights on it."""
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {_quote(database)} CHARACTER SET utf8mb4")
        for host in _USER_HOSTS:
            cur.execute(f"GRANT ALL PRIVILEGES ON {_quote(database)}.* TO %s@%s", (user, host))


def set_user(
    conn: AdminConnection, user: str, password: str, hosts: Sequence[str] = _USER_HOSTS
) -> None:
    """Create user@host for every host with this password; an existing one gets the password.

    The password travels only in the statements' parameters: it is never logged or written.
    """
    with conn.cursor() as cur:
        for host in hosts:
            cur.execute("CREATE USER IF NOT EXISTS %s@%s IDENTIFIED BY %s", (user, host, password))
            # The user may predate this call with another password; the given one wins.
            cur.execute("ALTER USER %s@%s IDENTIFIED BY %s", (user, host, password))


@contextmanager
def folder_lock(base_dir: Path, name: str = ".lock") -> Iterator[None]:
    """An exclusive lock on a file in base_dir (created, 0700), held for the block."""
    base_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    with (base_dir / name).open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # two runs starting the same server take turns
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


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
        server = _ensure_running(
            base_dir,
            port,
            log,
            host=host,
            port_hint="choose a free one (STACKFLOW_SIM_LOCAL_MYSQL_PORT)",
        )
        with closing(_connect_socket(server.socket, 10)) as conn:
            set_user(conn, user, password)
            grant_database(conn, database, user)
    return MysqlTarget(host, port, user, SecretStr(password), database)


def _ensure_running(
    base_dir: Path,
    port: int,
    log: Callable[[str], None],
    *,
    host: str,
    port_hint: str,
    template: Path | None = None,
    server_args: Sequence[str] = (),
) -> LocalServer:
    # The caller holds the folder lock.
    server = running_server(base_dir)
    if server is not None and (server.port, server.host) != (port, host):
        log(
            f"local MariaDB from {base_dir} runs on {server.host}:{server.port}; "
            f"restarting on {host}:{port}"
        )
        _terminate(server.pid)
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
        return _ensure_running(
            base_dir,
            port,
            log,
            host=host,
            port_hint="choose another port or stop that program",
            template=template,
            server_args=server_args,
        )


def _terminate(pid: int, timeout_s: float = 30.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while pid_alive(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)  # InnoDB recovers on the next start
            time.sleep(0.2)
            pid_alive(pid)
            return
        time.sleep(0.05)


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
        _terminate(server.pid)
        Path(server.socket).unlink(missing_ok=True)
        return True


_SYSTEM_DATABASES = ("information_schema", "mysql", "performance_schema", "sys")


def dump_local_mariadb(base_dir: Path, target: Path) -> list[str]:
    """Dump every non-system database of the server from base_dir into `target` (mariadb-dump).

    The file appears whole or not at all (written beside it, then renamed), readable by its owner
    only. The `mysql` schema (accounts and password hashes) is left out.

    Returns:
        The databases dumped (an empty list writes a file with a comment only).

    Raises:
        LocalDatabaseError: no server from base_dir runs, mariadb-dump is missing or failed.
    """
    server = running_server(base_dir)
    if server is None:
        raise LocalDatabaseError(f"no local MariaDB is running from {base_dir}; nothing to dump")
    with closing(_connect_socket(server.socket, 10)) as conn, conn.cursor() as cur:
        cur.execute("SHOW DATABASES")
        databases = sorted(str(r[0]) for r in cur.fetchall() if r[0] not in _SYSTEM_DATABASES)
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    staging = target.with_name(f"{target.name}.writing")
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        if not databases:
            out.write(b"-- no databases besides the system ones\n")
        else:
            args = [
                find_binary("mariadb-dump"),
                "--no-defaults",
                f"--socket={server.socket}",
                f"--user={_admin_user()}",
                "--single-transaction",  # a consistent view without locking the tables
                "--routines",
                "--events",
                "--triggers",
                "--hex-blob",
                "--databases",
                *databases,
            ]
            result = subprocess.run(
                args, stdout=out, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
            )
            if result.returncode != 0:
                staging.unlink(missing_ok=True)
                raise LocalDatabaseError(
                    f"mariadb-dump of {base_dir} into {target} failed (exit {result.returncode}): "
                    f"{result.stderr.decode(errors='replace')[-2000:]}"
                )
    staging.rename(target)
    return databases
