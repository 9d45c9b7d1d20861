"""An append-only file of checksummed JSON lines: what the journal is written in.

Each line is `<crc32 of the JSON, 8 hex digits> <JSON>\\n`, appended with one write and flushed
to disk before the request it records is answered. So a crash mid-write leaves at most a torn
last line (no newline): it is cut off at start, and the next line never glues onto it. A line whose
checksum does not match (a disk or a hand that changed it) is refused, naming the file and the
line, rather than replayed with a hole in the history. Lines written before the checksums (plain
JSON) are still read.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import zlib
from pathlib import Path
from typing import Any

from stackflow.localcloud.errors import JournalError

log = logging.getLogger("stackflow.localcloud")
_FRAMED = re.compile(rb"^([0-9a-f]{8}) (.*)$", re.DOTALL)


def frame(record: dict[str, Any]) -> bytes:
    """One record as a framed line (compact JSON, no newline inside)."""
    text = json.dumps(record, separators=(",", ":")).encode()
    return b"%08x %s\n" % (zlib.crc32(text), text)


def _parse(path: Path, number: int, line: bytes) -> dict[str, Any]:
    framed = _FRAMED.match(line)
    if framed is not None and zlib.crc32(framed.group(2)) != int(framed.group(1), 16):
        problem = "its checksum does not match: it changed after it was written"
    else:
        try:
            record = json.loads(framed.group(2) if framed is not None else line)
        except ValueError:
            problem = "it is not JSON"
        else:
            if isinstance(record, dict):
                return record
            problem = "it is not a JSON object"
    raise JournalError(
        f"{path} line {number} is damaged ({problem}); the local cloud does not replay a journal "
        "with a hole in its history. Restore the file from a copy, or delete that line to go on "
        "without its change (what depended on it may then fail to replay), and start the local "
        "cloud again."
    )


def read(path: Path) -> list[dict[str, Any]]:
    """Every record of the file, in order (none if it does not exist). A torn last line (no
    newline: a crash mid-write) is left out; `repair` removes it.

    Raises:
        JournalError: a complete line is damaged (names the file and the line).
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    lines = data.split(b"\n")[:-1]  # the last piece is "" or a torn line
    return [_parse(path, n, line) for n, line in enumerate(lines, 1) if line.strip()]


def repair(path: Path) -> bool:
    """Cut a torn last line off the file (call it before the first append, with no writer
    around). Returns whether there was one."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return False
    if not data or data.endswith(b"\n"):
        return False
    keep = data.rfind(b"\n") + 1
    with path.open("r+b") as handle:
        handle.truncate(keep)
        os.fsync(handle.fileno())
    log.warning(
        "%s: its last line was cut off mid-write (%d bytes; the server stopped while writing it, "
        "before it answered that request); removed",
        path,
        len(data) - keep,
    )
    return True


def append(path: Path, record: dict[str, Any]) -> None:
    """Append one record and flush it to disk; on failure the file is as it was.

    Raises:
        JournalError: it could not be written (disk full, read-only), naming the file.
    """
    line = frame(record)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        size = os.fstat(fd).st_size
        try:
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(f"only {written} of {len(line)} bytes were written")
            os.fdatasync(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)  # no half line for the next append to glue onto
            raise JournalError(f"could not write to {path}: {exc}") from None
    finally:
        os.close(fd)
