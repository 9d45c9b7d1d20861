"""The machine side of the project's PostgreSQL: where its programs are, which OS user runs it,
and folders that user can reach and own.

PostgreSQL refuses to run as root: when stackflow runs as root the server runs as the `postgres` OS
user (Debian's package creates it), otherwise as the current user.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import stat
from pathlib import Path

from stackflow.postgres.errors import PostgresFolderError, PostgresNotInstalled

INSTALL_HINT = "install it with `apt-get install postgresql` (or `bash scripts/setup.sh`)"


def bin_dir() -> Path:
    """The folder of PostgreSQL's server programs: Debian's newest /usr/lib/postgresql/<v>/bin,
    else the folder of an `initdb` on PATH.

    Raises:
        PostgresNotInstalled: neither exists; with the install command.
    """
    versions = Path("/usr/lib/postgresql").glob("*/bin/initdb")
    found = sorted(
        versions, key=lambda p: [int(x) for x in re.findall(r"\d+", p.parent.parent.name)]
    )
    if found:
        return found[-1].parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).resolve().parent
    raise PostgresNotInstalled(f"PostgreSQL's `initdb` was not found; {INSTALL_HINT}")


def server_account() -> pwd.struct_passwd:
    """The OS user the server runs as: `postgres` when we are root, else ourselves.

    Raises:
        PostgresNotInstalled: we are root and there is no `postgres` user.
    """
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid())
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        raise PostgresNotInstalled(
            f"PostgreSQL refuses to run as root and there is no `postgres` OS user; {INSTALL_HINT}"
        ) from None


def _may_pass(folder: Path, account: pwd.struct_passwd) -> bool:
    mode = folder.stat()
    if account.pw_uid == 0 or mode.st_mode & stat.S_IXOTH:
        return True
    if mode.st_uid == account.pw_uid:
        return bool(mode.st_mode & stat.S_IXUSR)
    groups = os.getgrouplist(account.pw_name, account.pw_gid)
    return mode.st_gid in groups and bool(mode.st_mode & stat.S_IXGRP)


def check_reachable(base_dir: Path, account: pwd.struct_passwd) -> None:
    """Refuse a folder the server's OS user cannot pass through, or one of its parents (/root);
    folders not made yet are not judged."""
    for folder in (*reversed(base_dir.parents), base_dir):
        if not folder.exists():
            return
        if not _may_pass(folder, account):
            raise PostgresFolderError(
                f"the PostgreSQL server runs as the OS user `{account.pw_name}`, which cannot "
                f"reach {base_dir}: {folder} lets only its owner in (mode "
                f"{stat.S_IMODE(folder.stat().st_mode):04o}); give others passage with "
                f"`chmod o+x {folder}`, or choose a state folder outside it"
            )


def own_folder(path: Path, account: pwd.struct_passwd) -> None:
    """Create `path` (0700) owned by the server's OS user."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if os.geteuid() == 0:
        os.chown(path, account.pw_uid, account.pw_gid)
    path.chmod(0o700)


def child_env(base_dir: Path) -> dict[str, str]:
    """The environment of initdb and the server: a clean one, so the caller's variables (secrets
    among them) never reach the server, with TMPDIR in its own folder instead of the shared /tmp."""
    return {"PATH": "/usr/bin:/bin", "LANG": "C", "TMPDIR": str(base_dir / "tmp")}


def identity(account: pwd.struct_passwd) -> tuple[int | None, int | None, list[int] | None]:
    """(uid, gid, supplementary groups) to run a child as: the account when we are root."""
    if os.geteuid() != 0:
        return None, None, None
    return account.pw_uid, account.pw_gid, []
