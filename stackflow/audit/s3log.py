"""The audit log in S3: one object per entry, `<prefix>projects/<project>/audit/<seq>.audit`, the
position zero-padded to 12 digits so that S3's listing order is the log's.

An append lists the objects after the last one it knows (all of them the first time), reads the
last for its hash, and creates the next with a conditional PUT (`If-None-Match: *`): S3 refuses
it with 412 when another writer created that position first, and the loser builds its entry
again on the winner's. Nothing overwrites or deletes an object. The `.audit` suffix keeps the
entries out of the records' listing (which takes `.json` objects only).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from stackflow.audit.chain import GENESIS, Head, Stored, digest
from stackflow.audit.store import APPEND_TRIES, AuditUnavailable, Build, project_log_key

_SUFFIX = ".audit"
_DIGITS = 12
_LOST = ("PreconditionFailed", "ConditionalRequestConflict", "412", "409")
_MISSING = ("NoSuchKey", "404")
_READERS = 8  # objects read at once when the whole log is read back


class S3AuditLog:
    """One project's audit log under an s3:// records URL."""

    def __init__(self, url: str, project: str, *, client: Any | None = None) -> None:
        from stackflow.backends.s3 import Bucket

        self._s3 = Bucket(url, "the audit log at", AuditUnavailable, client)
        self._prefix = f"{self._s3.prefix}{project_log_key(project)}audit/"
        self._where = f"s3://{self._s3.bucket}/{self._prefix} ({self._s3.where})"
        self._last: tuple[int, str, str] | None = None  # (seq, hash, key) of the last entry seen
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        return self._where

    def _key(self, seq: int) -> str:
        return f"{self._prefix}{seq:0{_DIGITS}d}{_SUFFIX}"

    def _entry_key(self, key: str) -> bool:
        """Whether `key` is an entry's (what else sits under the prefix is not read)."""
        name = key[len(self._prefix) :]
        return name.endswith(_SUFFIX) and name[: -len(_SUFFIX)].isdigit()

    def _keys(self, after: str | None) -> list[str]:
        """The entries' keys after `after` (all of them for None), in order."""
        keys: list[str] = []
        token: str | None = None
        while True:
            extra: dict[str, str] = {"ContinuationToken": token} if token else {}
            if after is not None and not token:
                extra["StartAfter"] = after
            page = self._s3.call("list_objects_v2", (), Prefix=self._prefix, **extra) or {}
            keys += [str(i["Key"]) for i in page.get("Contents", []) if self._entry_key(i["Key"])]
            token = page.get("NextContinuationToken")
            if not token:
                return keys

    def _read(self, key: str) -> bytes | None:
        answer = self._s3.call("get_object", _MISSING, Key=key)
        return None if answer is None else bytes(answer["Body"].read())

    def _tail(self) -> tuple[int, str, str | None]:
        """The last entry's (seq, hash, key); (0, GENESIS, None) for an empty log."""
        with self._lock:
            known = self._last
        newer = self._keys(known[2] if known else None)
        if not newer:
            return known if known else (0, GENESIS, None)
        key = newer[-1]
        raw = self._read(key)
        if raw is None:
            raise AuditUnavailable(f"{self._where}: {key} was listed and then gone")
        seq = int(key[len(self._prefix) : -len(_SUFFIX)])
        return seq, digest(raw), key

    def append(self, build: Build) -> Head:
        """See `AuditLog.append`."""
        for _ in range(APPEND_TRIES):
            seq, prev, _key = self._tail()
            entry = build(seq + 1, prev)
            key = self._key(seq + 1)
            answer = self._s3.call(
                "put_object",
                _LOST,
                Key=key,
                Body=entry,
                ContentType="application/json",
                IfNoneMatch="*",
            )
            if answer is not None:
                with self._lock:
                    self._last = (seq + 1, digest(entry), key)
                return Head(seq + 1, digest(entry))
        raise AuditUnavailable(
            f"{self._where}: other writers took the next position {APPEND_TRIES} times in a row"
        )

    def entries(self) -> list[Stored]:
        """See `AuditLog.entries`."""
        keys = self._keys(None)
        with ThreadPoolExecutor(max_workers=_READERS) as pool:
            bodies = list(pool.map(self._read, keys))
        return [
            Stored(f"s3://{self._s3.bucket}/{key}", raw)
            for key, raw in zip(keys, bodies, strict=True)
            if raw is not None  # deleted between the listing and the read: the chain shows it
        ]

    def close(self) -> None:
        """Nothing to let go of."""
