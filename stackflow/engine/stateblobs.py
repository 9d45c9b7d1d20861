"""Read-only access to the objects of a Pulumi self-managed ("DIY") backend, without `pulumi`.

The CLI stores a backend's files as keys under one root (`.pulumi/meta.yaml`,
`.pulumi/stacks/<project>/<stack>.json`, ...); where those keys live depends on the URL:

    file:///folder          files under the folder
    s3://bucket/prefix?...  objects under `prefix/` in the bucket
    postgres://.../db?...   rows of table pulumi_state (or `table=`): key TEXT, data JSON
                            {"data": <base64 of the file>}, updated_at; every key is prefixed with
                            the URL's path, i.e. the database name and a "/" (the CLI's blob prefix)

Keys here are always the CLI's own (relative to the root); each reader adds its prefix.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from stackflow.backends import backend_kind, file_folder, mask_url, postgres_location, s3_location
from stackflow.errors import StackflowError


class StateBackendUnavailable(StackflowError):
    """The Pulumi backend did not answer (database down, bucket unreachable, folder unreadable)."""


@dataclass(frozen=True)
class Blob:
    """One object: its key (relative to the backend's root), bytes and last change (if known)."""

    key: str
    data: bytes
    modified: datetime | None


class StateBlobs(Protocol):
    """What the checkpoint reader needs from a backend: three kinds of read, nothing else."""

    where: str

    def latest(self, keys: Sequence[str]) -> Blob | None:
        """The most recently written of `keys` that exists (one read), or None."""
        ...

    def under(self, prefix: str) -> list[Blob]:
        """Every object whose key starts with `prefix`, with its bytes."""
        ...

    def names(self, prefix: str) -> list[str]:
        """The keys that start with `prefix`, sorted."""
        ...

    def close(self) -> None: ...


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


class S3Blobs:
    """An S3 backend. `latest` reads the candidates in order and returns the first that exists:
    one GET when the first is there. The CLI keeps one of stack.json / .json.gz / .json.zst at a
    time (switching compression moves the old one to .bak before it writes the new), and S3's
    one-second modification times could not order two anyway."""

    def __init__(self, url: str) -> None:
        location = s3_location(url)
        self._bucket, self._prefix = location.bucket, location.prefix
        self._client = location.client()
        self.where = mask_url(url)

    def _call(self, method: str, **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return getattr(self._client, method)(Bucket=self._bucket, **kwargs)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise StateBackendUnavailable(f"the Pulumi backend {self.where}: {exc}") from None
        except BotoCoreError as exc:
            raise StateBackendUnavailable(f"the Pulumi backend {self.where}: {exc}") from None

    def _get(self, key: str) -> Blob | None:
        answer = self._call("get_object", Key=self._prefix + key)
        if answer is None:
            return None
        return Blob(key, answer["Body"].read(), answer.get("LastModified"))

    def latest(self, keys: Sequence[str]) -> Blob | None:
        for key in keys:
            blob = self._get(key)
            if blob is not None:
                return blob
        return None

    def under(self, prefix: str) -> list[Blob]:
        blobs = (self._get(key) for key in self.names(prefix))
        return [b for b in blobs if b is not None]

    def names(self, prefix: str) -> list[str]:
        keys: list[str] = []
        token: str | None = None
        while True:
            extra = {"ContinuationToken": token} if token else {}
            page = self._call("list_objects_v2", Prefix=self._prefix + prefix, **extra) or {}
            keys += [str(item["Key"])[len(self._prefix) :] for item in page.get("Contents", [])]
            token = page.get("NextContinuationToken")
            if not token:
                return sorted(keys)

    def close(self) -> None:
        return None


class PostgresBlobs:
    """The CLI's PostgreSQL backend: one query per read."""

    def __init__(self, url: str) -> None:
        location = postgres_location(url)
        self._table, self._prefix = location.table, location.prefix
        self.where = mask_url(url)
        # imported here: a file backend's skip path never pays for the PostgreSQL driver
        from stackflow.postgres.client import SharedConnection

        self._db = SharedConnection(
            location.conninfo,
            f"the Pulumi backend {self.where}",
            unavailable=StateBackendUnavailable,
        )

    def _query(self, query: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        import psycopg

        try:
            return self._db.run(query, params)
        except psycopg.errors.UndefinedTable:
            return []  # the CLI creates its table on first login: nothing stored yet

    def _blobs(self, rows: list[tuple[Any, ...]]) -> list[Blob]:
        # `data` is JSON {"data": base64}; ->> hands it over as text, decoded here.
        return [
            Blob(str(key)[len(self._prefix) :], base64.b64decode(data), modified)
            for key, data, modified in rows
        ]

    def latest(self, keys: Sequence[str]) -> Blob | None:
        rows = self._query(
            f"SELECT key, data->>'data', updated_at FROM {self._table} WHERE key = ANY(%s) "
            "ORDER BY updated_at DESC, key DESC LIMIT 1",  # on a tie the CLI takes the later key
            ([self._prefix + k for k in keys],),
        )
        found = self._blobs(rows)
        return found[0] if found else None

    def under(self, prefix: str) -> list[Blob]:
        rows = self._query(
            f"SELECT key, data->>'data', updated_at FROM {self._table} "
            "WHERE starts_with(key, %s) ORDER BY key",
            (self._prefix + prefix,),
        )
        return self._blobs(rows)

    def names(self, prefix: str) -> list[str]:
        rows = self._query(
            f"SELECT key FROM {self._table} WHERE starts_with(key, %s) ORDER BY key",
            (self._prefix + prefix,),
        )
        return [str(r[0])[len(self._prefix) :] for r in rows]

    def close(self) -> None:
        self._db.close()


def open_blobs(url: str) -> StateBlobs:
    """The reader for the backend at `url` (file://, s3:// or postgres://).

    Raises:
        BackendURLError: another scheme (Pulumi Cloud's https:// among them: it has its own API).
    """
    kind = backend_kind(url)
    if kind == "file":
        return FileBlobs(file_folder(url))
    if kind == "s3":
        return S3Blobs(url)
    return PostgresBlobs(url)
