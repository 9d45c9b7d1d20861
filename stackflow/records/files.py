"""stackflow's records in a folder: one JSON file per record (the one-person default backend).

Writes take the folder's lock (fcntl), check the record is as expected, write a temporary file
beside it, fsync it and rename it over the record, then fsync the folder: a reader sees the old
record or the new one, never half of one, and a crash loses at most the write in flight. fcntl
locks hold between processes on one machine; a folder shared over NFS is not supported.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stackflow.processes import folder_lock
from stackflow.records.base import (
    Expect,
    Record,
    check_expected,
    check_key,
    decode,
    encode,
    next_version,
)
from stackflow.records.errors import RecordConflict

_SUFFIX = ".json"
_LOCK = ".lock"


class FileRecords:
    """Records as files under `folder` (created 0700 on the first write)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @property
    def where(self) -> str:
        return str(self.folder)

    def _path(self, key: str) -> Path:
        return self.folder / f"{check_key(key)}{_SUFFIX}"

    def _read(self, path: Path) -> Record | None:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        return decode(data, str(path))

    def get(self, key: str) -> Record | None:
        """See `Records.get`."""
        return self._read(self._path(key))

    def put(self, key: str, value: Mapping[str, Any], *, expect_version: Expect) -> int:
        """See `Records.put`."""
        path = self._path(key)
        with folder_lock(self.folder, _LOCK):
            current = self._read(path)
            check_expected(key, current, expect_version)
            version = next_version(current)
            self._write(path, encode(value, version))
        return version

    def _write(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        staging = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(staging, path)
        except BaseException:
            staging.unlink(missing_ok=True)
            raise
        _fsync_folder(path.parent)

    def delete(self, key: str, *, expect_version: int | None = None) -> bool:
        """See `Records.delete`. Without a version a damaged record is deleted unread."""
        path = self._path(key)
        with folder_lock(self.folder, _LOCK):
            if expect_version is not None:
                current = self._read(path)
                if current is None or current.version != expect_version:
                    found = None if current is None else current.version
                    raise RecordConflict(key, expect_version, found)
            try:
                path.unlink()
            except FileNotFoundError:
                return False
            _fsync_folder(path.parent)
            return True

    def list(self, prefix: str = "") -> list[str]:
        """See `Records.list`."""
        if not self.folder.is_dir():
            return []
        keys = (
            str(path.relative_to(self.folder))[: -len(_SUFFIX)]
            for path in self.folder.rglob(f"*{_SUFFIX}")
            if not path.name.startswith(".")
        )
        return sorted(k for k in keys if k.startswith(prefix))

    def close(self) -> None:
        """Nothing to let go of."""


def _fsync_folder(folder: Path) -> None:
    # The rename or unlink is durable only once the folder's entry is on disk.
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
