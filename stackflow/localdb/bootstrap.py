"""Making a MariaDB data folder: `mariadb-install-db` once, or a copy of a folder made before."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from stackflow.localdb.errors import MariaDBBootstrapError
from stackflow.localdb.layout import admin_user, find_binary, install_log, private_tmpdir
from stackflow.processes import folder_lock, log_tail

_INSTALL_ATTEMPTS = 2  # a bootstrap that failed once for a passing reason gets one more try


def _quiet(_message: str) -> None:
    return None


def install(
    base_dir: Path, data: Path, log: Callable[[str], None], server_args: Sequence[str] = ()
) -> None:
    """Initialise the data folder `data` with `mariadb-install-db` (the caller holds the lock).

    The folder appears whole or not at all (initialised beside it, then renamed). The bootstrap
    server gets base_dir's private tmpdir; a failed bootstrap is tried once more.

    Raises:
        LocalDatabaseError: MariaDB is not installed.
        MariaDBBootstrapError: every try failed (names the log, with its tail).
    """
    install_db = find_binary("mariadb-install-db")
    log(f"initialising a MariaDB data folder in {data}")
    staging = data.with_name(f"{data.name}.initialising")
    log_file = install_log(base_dir)
    log_file.unlink(missing_ok=True)
    code = 0
    with _plain_path(base_dir) as plain:  # mariadb-install-db splits paths at spaces
        for attempt in range(1, _INSTALL_ATTEMPTS + 1):
            shutil.rmtree(staging, ignore_errors=True)
            code = _install_once(
                install_db, plain, staging, base_dir, server_args, log_file, attempt
            )
            if code == 0:
                staging.rename(data)
                return
            log(f"mariadb-install-db failed (exit {code}, try {attempt}); see {log_file}")
    shutil.rmtree(staging, ignore_errors=True)
    raise MariaDBBootstrapError(
        f"mariadb-install-db failed {_INSTALL_ATTEMPTS} times (last exit {code}); its log is "
        f"{log_file}:\n{log_tail(log_file)}",
        log_file,
    )


@contextlib.contextmanager
def _plain_path(base_dir: Path) -> Iterator[Path]:
    """`base_dir`, or, when its path holds a space or a letter outside ASCII (which the install
    script's unquoted shell variables split or mangle), a link to it from a private temporary
    folder of a plain name, removed afterwards."""
    path = str(base_dir.resolve())
    if path.isascii() and not any(c.isspace() for c in path):
        yield base_dir.resolve()
        return
    alias_dir = Path(tempfile.mkdtemp(prefix="stackflow-mariadb-"))
    try:
        (alias_dir / "base").symlink_to(base_dir.resolve(), target_is_directory=True)
        yield alias_dir / "base"
    finally:
        shutil.rmtree(alias_dir, ignore_errors=True)  # the link only, never what it points to


def _install_once(
    install_db: str,
    plain: Path,
    staging: Path,
    base_dir: Path,
    server_args: Sequence[str],
    log_file: Path,
    attempt: int,
) -> int:
    """One run of mariadb-install-db into `staging`, its paths spelt through `plain`."""

    def spelt(path: Path) -> Path:
        return plain / path.resolve().relative_to(base_dir.resolve())

    args = [
        install_db,
        "--no-defaults",
        f"--datadir={spelt(staging)}",
        f"--tmpdir={spelt(private_tmpdir(base_dir))}",
        "--auth-root-authentication-method=socket",
        "--skip-test-db",
        *server_args,  # passed on to the bootstrap mariadbd (InnoDB sizes must match the runs)
    ]
    if os.geteuid() == 0:
        args.append("--user=root")
    else:
        args.append(f"--auth-root-socket-user={admin_user()}")
    with log_file.open("ab") as out:
        out.write(f"== try {attempt} of {_INSTALL_ATTEMPTS}: {' '.join(args)}\n".encode())
        out.flush()
        return subprocess.run(
            args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        ).returncode


def copy_template(template: Path, data: Path, log: Callable[[str], None]) -> None:
    """Copy an initialised data folder to `data`; it appears whole or not at all."""
    log(f"copying the MariaDB data folder {template} to {data}")
    staging = data.with_name(f"{data.name}.copying")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(template, staging, symlinks=True)
    staging.rename(data)


def prepare_template(
    template: Path, *, server_args: Sequence[str] = (), log: Callable[[str], None] = _quiet
) -> bool:
    """Initialise a MariaDB data folder at `template` once, for servers to start from copies of it.

    The folder appears whole or not at all (initialised beside it, then renamed); its parent holds
    the install log, the bootstrap's private tmpdir and a lock, so concurrent callers take turns.

    Args:
        template: the data folder to create (never run itself).
        server_args: mariadbd options for the bootstrap (use the servers' InnoDB sizes).
        log: receives one-line progress messages.

    Returns:
        True if it was initialised now, False if it already existed.

    Raises:
        LocalDatabaseError: MariaDB is not installed.
        MariaDBBootstrapError: mariadb-install-db failed twice (names its log).
    """
    if (template / "mysql").is_dir():
        return False
    template.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with folder_lock(template.parent):
        if (template / "mysql").is_dir():
            return False
        install(template.parent, template, log, server_args)
        return True
