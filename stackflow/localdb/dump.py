"""A dump of a local MariaDB's databases (the local cloud's final snapshots)."""

from __future__ import annotations

import os
import subprocess
from contextlib import closing
from pathlib import Path

from stackflow.errors import LocalDatabaseError
from stackflow.localdb.layout import admin_user, find_binary
from stackflow.localdb.server import connect_socket, running_server

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
    with closing(connect_socket(server.socket, 10)) as conn, conn.cursor() as cur:
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
                f"--user={admin_user()}",
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
