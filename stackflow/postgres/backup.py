"""Backups of the project's PostgreSQL, which in team mode holds everything a team shares:
Prefect's database, the Pulumi state and stackflow's records.

A backup is one file (a tar archive, 0600: the state's secrets are encrypted, but the records and
Prefect's runs are not):

    manifest.json   {"stackflow_backup": 1, "created": "<UTC time>", "server_version": "15.x",
                     "stackflow": "<version>", "databases": [{"name", "file", "bytes", "sha256"}]}
    <name>.dump     pg_dump's custom format of each database on the server (not `postgres`)

pg_dump and pg_restore run as the server's OS user over its private socket, as initdb and the
server do (`stackflow.postgres.host`), with a clean environment. Each database is dumped in one
snapshot of its own; the databases are dumped one after the other.

A restore replaces exactly the databases the file holds, all or none: each is restored into a
staging database first (`<name>__restoring`), and only when every one restored are the old ones
dropped (their sessions ended) and the staging ones renamed into place.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from psycopg import sql

from stackflow.postgres.databases import connect, create_database, drop_database
from stackflow.postgres.errors import PostgresError
from stackflow.postgres.host import bin_dir, child_env, identity, server_account
from stackflow.postgres.server import PostgresServer

FORMAT = 1
MANIFEST = "manifest.json"
_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,50}$")  # leaves room for the staging suffix
_STAGING = "__restoring"


class BackupError(PostgresError):
    """A backup could not be written, or a restore could not complete (nothing was replaced)."""


class BackupFileError(BackupError, ValueError):
    """The file is not a stackflow backup, or is damaged (names the file and what is wrong)."""


@dataclass(frozen=True)
class Manifest:
    """What a backup holds and when it was taken."""

    created: str
    server_version: str
    stackflow: str
    databases: tuple[dict[str, Any], ...]

    @property
    def names(self) -> list[str]:
        return [str(d["name"]) for d in self.databases]

    def as_dict(self) -> dict[str, Any]:
        return {
            "stackflow_backup": FORMAT,
            "created": self.created,
            "server_version": self.server_version,
            "stackflow": self.stackflow,
            "databases": list(self.databases),
        }


def _tool(
    server: PostgresServer,
    program: str,
    args: list[str],
    out: BinaryIO | None,
    inp: BinaryIO | None,
) -> None:
    account = server_account()
    uid, gid, groups = identity(account)
    command = [
        str(bin_dir() / program),
        f"--host={server.socket_dir}",
        f"--port={server.port}",
        f"--username={server.user}",
        *args,
    ]
    done = subprocess.run(
        command,
        stdout=out if out is not None else subprocess.DEVNULL,
        stdin=inp if inp is not None else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=server.base_dir,
        env=child_env(server.base_dir),
        user=uid,
        group=gid,
        extra_groups=groups,
        check=False,
    )
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-5:]
        raise BackupError(f"{program} {args[-1]} failed (exit {done.returncode}): {' '.join(tail)}")


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def databases(server: PostgresServer) -> list[str]:
    """The databases a backup takes: every one on the server but `postgres` and the templates."""
    with connect(server) as conn:
        rows = conn.execute(
            "SELECT datname FROM pg_database WHERE NOT datistemplate AND datname <> 'postgres' "
            "ORDER BY datname"
        ).fetchall()
    return [str(r[0]) for r in rows]


def _server_version(server: PostgresServer) -> str:
    with connect(server) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return str(row[0]) if row else "?"


def backup(
    server: PostgresServer, file: Path, say: Callable[[str], object] = lambda _l: None
) -> Manifest:
    """Write a backup of every database on `server` to `file` (replaced atomically, 0600).

    Raises:
        BackupError: pg_dump failed, or the file's folder cannot be written.
    """
    from stackflow import __version__

    file = file.expanduser().resolve()
    if not file.parent.is_dir():
        raise BackupError(f"{file.parent} is not a folder: the backup file goes into one")
    work = Path(tempfile.mkdtemp(prefix=f".{file.name}.", dir=file.parent))
    try:
        entries: list[dict[str, Any]] = []
        for name in databases(server):
            if not _NAME.match(name):
                raise BackupError(
                    f"database {name!r} on the server has a name a backup does not take (lowercase "
                    "letters, digits and _, at most 51 characters); rename or drop it first"
                )
            dump = work / f"{name}.dump"
            # opened here (by us), written through the inherited descriptor by the server's user
            with dump.open("wb") as out:
                _tool(server, "pg_dump", ["--format=custom", f"--dbname={name}"], out, None)
            digest = _sha256(dump)
            entries.append(
                {"name": name, "file": dump.name, "bytes": dump.stat().st_size, "sha256": digest}
            )
            say(f"dumped {name} ({dump.stat().st_size} bytes)")
        manifest = Manifest(
            datetime.now(UTC).isoformat(timespec="seconds"),
            _server_version(server),
            __version__,
            tuple(entries),
        )
        staging = work / "backup.tar"
        with tarfile.open(staging, "w") as tar:
            body = json.dumps(manifest.as_dict(), indent=2).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size, info.mode = len(body), 0o600
            tar.addfile(info, io.BytesIO(body))
            for entry in entries:
                tar.add(work / str(entry["file"]), arcname=str(entry["file"]))
        staging.chmod(0o600)
        staging.replace(file)
        return manifest
    finally:
        shutil.rmtree(work, ignore_errors=True)


def read_manifest(file: Path) -> Manifest:
    """What the backup `file` holds, checked: a stackflow backup whose dumps are all there.

    Raises:
        BackupFileError: not a tar archive, no manifest, another format, or a dump missing.
    """
    try:
        with tarfile.open(file, "r") as tar:
            member = tar.extractfile(MANIFEST)
            body = json.loads(member.read()) if member is not None else None
            present = set(tar.getnames())
    except FileNotFoundError:
        raise BackupFileError(f"{file}: no such file") from None
    except (tarfile.TarError, KeyError, ValueError, OSError) as exc:
        raise BackupFileError(f"{file} is not a stackflow backup ({exc})") from None
    if not isinstance(body, dict) or body.get("stackflow_backup") != FORMAT:
        raise BackupFileError(f"{file} is not a stackflow backup (format {FORMAT}): no manifest")
    entries = body.get("databases")
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and _NAME.match(str(e.get("name", ""))) and e.get("file") in present
        for e in entries
    ):
        raise BackupFileError(f"{file} is damaged: its manifest names databases it does not hold")
    return Manifest(
        str(body.get("created")),
        str(body.get("server_version")),
        str(body.get("stackflow")),
        tuple(entries),
    )


def restore(
    server: PostgresServer, file: Path, say: Callable[[str], object] = lambda _l: None
) -> Manifest:
    """Replace each database the backup `file` holds with its copy (all or none; see the module).

    Raises:
        BackupFileError: the file is not a stackflow backup, or a dump's checksum differs.
        BackupError: pg_restore failed; the staging databases are dropped, nothing was replaced.
    """
    manifest = read_manifest(file)
    work = Path(tempfile.mkdtemp(prefix="stackflow-restore-"))
    staged: list[str] = []
    try:
        with tarfile.open(file, "r") as tar:
            for entry in manifest.databases:
                dump = work / str(entry["name"])
                source = tar.extractfile(str(entry["file"]))
                assert source is not None  # read_manifest checked it is there
                with dump.open("wb") as out:
                    shutil.copyfileobj(source, out)
                if _sha256(dump) != entry.get("sha256"):
                    raise BackupFileError(
                        f"{file} is damaged: {entry['file']} differs from its checksum"
                    )
        for entry in manifest.databases:
            name = str(entry["name"])
            stage = f"{name}{_STAGING}"
            drop_database(server, stage)  # left by a restore that was killed
            create_database(server, stage)
            staged.append(stage)
            with (work / name).open("rb") as archive:
                _tool(
                    server,
                    "pg_restore",
                    ["--exit-on-error", "--single-transaction", "--no-owner", f"--dbname={stage}"],
                    None,
                    archive,
                )
            say(f"restored {name} into {stage}")
        # every copy restored: now the swap, two quick statements per database
        with connect(server) as conn:
            for entry in manifest.databases:
                name = str(entry["name"])
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )
                conn.execute(
                    sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                        sql.Identifier(f"{name}{_STAGING}"), sql.Identifier(name)
                    )
                )
                staged.remove(f"{name}{_STAGING}")
                say(f"replaced {name}")
        return manifest
    finally:
        for stage in staged:
            drop_database(server, stage)
        shutil.rmtree(work, ignore_errors=True)
