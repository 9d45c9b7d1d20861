"""What a local MariaDB is made of: its programs, and the files under its base folder.

<base>/data/            the data folder (copied from a template, or initialised here)
<base>/tmp/             its private temporary folder (0700, emptied at each start)
<base>/server.json      the record of the server started from <base> (no secrets)
<base>/mariadbd.pid     the pid file mariadbd writes
<base>/mariadbd.log     its log
<base>/install.log      the log of `mariadb-install-db`
<base>/mysqld.sock      its Unix socket (or under /tmp, hashed, when the path is too long)
<base>/.lock            held while a process starts or stops it
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
from pathlib import Path

from stackflow.errors import LocalDatabaseError

INSTALL_HINT = "install it with `apt-get install mariadb-server` (or `bash scripts/setup.sh`)"
_SEARCH_DIRS = ("/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin")
_MAX_SOCKET_PATH = 100  # AF_UNIX paths are capped at 108 bytes; stay well under


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


def admin_user() -> str:
    """The server's admin account: the OS user that initialised it, let in by its Unix socket.

    By uid, not $USER: unix_socket authentication checks the peer's uid.
    """
    return pwd.getpwuid(os.geteuid()).pw_name


def data_dir(base_dir: Path) -> Path:
    return base_dir / "data"


def record_path(base_dir: Path) -> Path:
    return base_dir / "server.json"


def pid_file(base_dir: Path) -> Path:
    return base_dir / "mariadbd.pid"


def server_log(base_dir: Path) -> Path:
    return base_dir / "mariadbd.log"


def install_log(base_dir: Path) -> Path:
    return base_dir / "install.log"


def socket_path(base_dir: Path) -> Path:
    """The server's Unix socket: in base_dir, or under /tmp with a hashed name if that is too long."""
    path = base_dir.resolve() / "mysqld.sock"
    if len(str(path)) < _MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(str(base_dir.resolve()).encode()).hexdigest()[:16]
    return Path("/tmp") / f"stackflow-mariadb-{digest}.sock"


def private_tmpdir(base_dir: Path) -> Path:
    """An empty temporary folder of the server's own in base_dir (0700), for `--tmpdir`.

    The system /tmp is shared with every other program: a MariaDB that keeps its temporary tables
    there may meet another's files or lose its own (`#sql-temptable-... not found`). Call it only
    while no server runs from base_dir (under its lock): it empties the folder.
    """
    folder = base_dir / "tmp"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, mode=0o700)
    folder.chmod(0o700)  # mkdir's mode is masked by the umask
    return folder
