"""Faults of the machine and services under a run, named: a full disk, a read-only file system, a
path longer than the system takes, a database or server that stopped answering.

They are outcomes to expect, never bugs: whatever raised them (Python's own file writes, a
library, the Pulumi CLI's text), the command line says what failed and where on one `error:`
line, what to do on the next, and ends with exit 1 (an operation could not complete), never a
traceback. `named(exc)` finds one in an exception's chain; `in_cli_text(text)` in what the
Pulumi CLI printed.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

from stackflow.errors import StackflowError, echo

FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


class InfrastructureFault(StackflowError):
    """The machine or a service under a run failed it (see the module)."""


class DiskFull(InfrastructureFault):
    """No space (or quota) left on the file system a run writes to."""


class ReadOnly(InfrastructureFault):
    """A file system a run writes to is mounted read-only."""


class PathTooLong(InfrastructureFault):
    """A path longer than the file system takes."""


def _folder_of(path: str | None) -> str:
    """The existing folder that holds `path` (what `df` is asked about)."""
    if not path:
        return "."
    folder = Path(path)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return str(folder if folder.is_dir() else folder.parent)


def from_os_error(error: OSError, doing: str = "") -> InfrastructureFault | None:
    """`error` as a named fault, or None when it is not one of the faults named here.

    Args:
        doing: what was being done, for the message ("writing the run's log"); the path of the
            error (when it has one) is named either way.
    """
    path = error.filename if isinstance(error.filename, str) else None
    where = f" ({echo(path, 200)})" if path else ""
    what = f"{doing}{where}" if doing else f"writing {echo(path, 200)}" if path else "a write"
    if error.errno in FULL:
        folder = _folder_of(path)
        return DiskFull(
            f"no space left on the device: {what} failed ({error.strerror}). What was written "
            "before it is whole: each record and checkpoint replaces its file at once",
            what_to_do=f"free space on the file system that holds {echo(folder, 200)} (`df -h "
            f"{folder}` shows it), then run the command again",
        )
    if error.errno == errno.EROFS:
        folder = _folder_of(path)
        return ReadOnly(
            f"a read-only file system: {what} failed. Nothing was changed there",
            what_to_do=f"mount the file system that holds {echo(folder, 200)} read-write (or "
            "point STACKFLOW_STATE_DIR, or the backend, at one that is), then run the command "
            "again",
        )
    if error.errno == errno.ENAMETOOLONG:
        length = len(path) if path else 0
        return PathTooLong(
            f"a path longer than the file system takes: {what} failed"
            + (f" ({length} characters)" if length else ""),
            what_to_do="shorten the folder it is under (STACKFLOW_STATE_DIR, "
            "STACKFLOW_PROJECT_DIR, the backend's folder)",
        )
    return None


def named(exc: BaseException) -> InfrastructureFault | None:
    """The first infrastructure fault in `exc`'s chain (itself, its causes and contexts), named;
    None when there is none."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, InfrastructureFault):
            return current
        if isinstance(current, OSError):
            found = from_os_error(current)
            if found is not None:
                return found
        current = current.__cause__ or current.__context__
    return None


# What the Pulumi CLI (Go) prints when a write fails: "write <path>: no space left on device".
_CLI_WRITE = re.compile(
    r"(?:open|write|rename|mkdir|sync|close)\s+(?P<path>/\S+?):?\s+"
    r"(?P<why>no space left on device|disk quota exceeded|read-only file system)",
    re.IGNORECASE,
)
_WHY = {
    "no space left on device": errno.ENOSPC,
    "disk quota exceeded": errno.EDQUOT,
    "read-only file system": errno.EROFS,
}


def in_cli_text(text: str, doing: str) -> InfrastructureFault | None:
    """The fault a Pulumi CLI's failure text names (a write that failed: the path and why), or
    None. `doing`: what the CLI was doing, for the message."""
    found = _CLI_WRITE.search(text)
    if found is None:
        return None
    code = _WHY[found["why"].lower()]
    return from_os_error(OSError(code, os.strerror(code), found["path"]), doing)


def replace_file(path: Path, text: str) -> None:
    """Write `text` to `path` whole or not at all: a staging file beside it, flushed to disk, then
    renamed over it. A write the machine refuses (a full disk) leaves the old file as it was, no
    staging file, and raises naming `path`.

    Raises:
        OSError: with `path` as its filename.
    """
    staging = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with staging.open("w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(staging, path)
    except OSError as exc:
        staging.unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
