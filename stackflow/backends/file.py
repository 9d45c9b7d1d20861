"""The file backend: the Pulumi state in a folder (the one-person default), stackflow's records
as files in a `.stackflow` folder beside it, and the CLI's lock files deleted as files.

    file:///abs/folder        (file://~/folder also occurs; options after ? are dropped)

Records: one JSON file per record. A write takes the folder's lock (fcntl), checks the record is
as expected, writes a temporary file beside it, fsyncs it and renames it over the record, then
fsyncs the folder: a reader sees the old record or the new one, never half of one, and a crash
loses at most the write in flight. fcntl locks hold between processes on one machine; a folder
shared over NFS is not supported.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from stackflow.backends.base import (
    Backend,
    BackendURLError,
    Blob,
    StateBackendUnavailable,
    StateBlobs,
)
from stackflow.processes import folder_lock
from stackflow.records.base import (
    Expect,
    Record,
    Records,
    check_expected,
    check_key,
    decode,
    encode,
    next_version,
)
from stackflow.records.errors import RecordConflict
from stackflow.state import private_folder

_SUFFIX = ".json"
_LOCK = ".lock"


def folder_of(url: str) -> Path:
    """The folder of a file:// URL, or of a plain path."""
    from urllib.parse import unquote

    return Path(unquote(url.removeprefix("file://").split("?", 1)[0])).expanduser()


class FileBlobs:
    """A file backend's folder. `latest` stats each candidate and reads the newest (as the CLI
    picks among stack.json, .json.gz and .json.zst)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.where = str(folder)

    def _blob(self, path: Path) -> Blob | None:
        try:
            stat = path.stat()
            return Blob(
                str(path.relative_to(self.folder)),
                path.read_bytes(),
                datetime.fromtimestamp(stat.st_mtime, UTC),
            )
        except FileNotFoundError:
            return None  # gone between the listing and the read: as if never there
        except OSError as exc:
            raise StateBackendUnavailable(f"cannot read {path}: {exc.strerror or exc}") from None

    def latest(self, keys: Sequence[str]) -> Blob | None:
        found: list[tuple[float, Path]] = []
        for key in keys:
            path = self.folder / key
            try:
                found.append((path.stat().st_mtime, path))
            except FileNotFoundError:
                continue
        # On a tie the later candidate wins, as in the CLI (which lists .json before .json.gz).
        return self._blob(max(found, key=lambda f: f[0])[1]) if found else None

    def under(self, prefix: str) -> list[Blob]:
        blobs = (self._blob(self.folder / key) for key in self.names(prefix))
        return [b for b in blobs if b is not None]

    def names(self, prefix: str) -> list[str]:
        parent = (self.folder / prefix).parent if not prefix.endswith("/") else self.folder / prefix
        if not parent.is_dir():
            return []
        keys = (str(p.relative_to(self.folder)) for p in parent.rglob("*") if p.is_file())
        return sorted(k for k in keys if k.startswith(prefix))

    def close(self) -> None:
        return None


class FileRecords:
    """Records as files under `folder` (created 0700 on the first write, each file 0600)."""

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
        private_folder(path.parent)
        staging = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(staging, path)
        except BaseException as exc:
            staging.unlink(missing_ok=True)
            if isinstance(exc, OSError) and exc.filename is None:  # a full disk: name the file
                raise OSError(exc.errno, exc.strerror, str(path)) from exc
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


class FileBackend(Backend):
    name = "file"
    schemes = ("file",)
    form = "file://<folder>"

    def check(self, url: str) -> None:
        if not folder_of(url).parts or folder_of(url) == Path():
            raise BackendURLError(f"backend URL {url!r} names no folder; use {self.form}")

    def blobs(self, url: str) -> StateBlobs:
        return FileBlobs(folder_of(url))

    def records(self, url: str) -> Records:
        return FileRecords(folder_of(url))

    def records_beside(self, url: str) -> str | None:
        return str(folder_of(url) / ".stackflow")

    def restore(self, url: str) -> str:
        return f"put the folder {folder_of(url)} back from your backup of it"

    def folder(self, url: str) -> Path | None:
        return folder_of(url)

    def break_lock(self, url: str, key: str) -> bool:
        path = folder_of(url) / key
        path.unlink(missing_ok=True)
        path.with_name(path.name + ".attrs").unlink(missing_ok=True)  # the CLI's blob attributes
        return True


BACKEND = FileBackend()
