"""The audit log in a folder: one file, one line per entry, only ever appended to.

An append takes the file's own lock (flock, between processes on one machine), reads the last
line for its position and hash, writes the new line with one write to a file opened O_APPEND, and
fsyncs it (the folder too when the file was just created). A crash in the middle of a write
leaves a line without its newline: the next append starts on a line of its own and chains to
those bytes, and `audit` names the torn line. A folder shared over NFS is not supported, as for
the records.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from stackflow.audit.chain import GENESIS, Entry, Head, Stored, digest
from stackflow.audit.store import AuditUnavailable, Build
from stackflow.state import private_folder


class FileAuditLog:
    """An audit log as one file (0600 in a 0700 folder)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def where(self) -> str:
        return str(self.path)

    def append(self, build: Build) -> Head:
        """See `AuditLog.append`."""
        try:
            private_folder(self.path.parent)
            created = not self.path.exists()
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError as exc:
            raise AuditUnavailable(f"cannot open the audit log {self.path}: {exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released when the descriptor closes
            data = _read_all(fd)
            torn = bool(data) and not data.endswith(b"\n")
            lines = data.split(b"\n")
            if not torn:
                lines = lines[:-1]  # what follows the last newline: nothing
            seq, prev = _tail(lines)
            entry = build(seq + 1, prev)
            line = (b"\n" if torn else b"") + entry + b"\n"
            _write_all(fd, line)
            os.fsync(fd)
        except OSError as exc:
            raise AuditUnavailable(f"cannot append to the audit log {self.path}: {exc}") from None
        finally:
            os.close(fd)
        if created:
            _fsync_folder(self.path.parent)
        return Head(seq + 1, digest(entry))

    def entries(self) -> list[Stored]:
        """See `AuditLog.entries`."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise AuditUnavailable(f"cannot read the audit log {self.path}: {exc}") from None
        lines = data.split(b"\n")
        if data.endswith(b"\n"):
            lines = lines[:-1]
        return [Stored(f"line {n} of {self.path}", raw) for n, raw in enumerate(lines, 1)]

    def close(self) -> None:
        """Nothing to let go of."""


def _tail(lines: list[bytes]) -> tuple[int, str]:
    """The last entry's position and hash: its own `seq` when it reads as an entry, else its
    line number (a damaged last line still takes its place in the chain)."""
    if not lines:
        return 0, GENESIS
    last = lines[-1]
    try:
        seq = Entry.parse(last).seq
    except ValueError:
        seq = len(lines)
    return seq, digest(last)


def _read_all(fd: int) -> bytes:
    chunks = []
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_folder(folder: Path) -> None:
    # the new file's entry in its folder is durable only once the folder is on disk
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
