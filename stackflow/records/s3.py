"""stackflow's records as S3 objects: `<prefix><key>.json`, written with conditional puts.

Create-if-absent is a PUT with `If-None-Match: *`; replace-if-unchanged is a PUT with
`If-Match: <the ETag read with the version>`; S3 refuses either with 412 when another writer got
there first (409 when two conditional writes cross), and the loser gets RecordConflict. Every
stored object holds its version, so its ETag changes on every write. A delete at a version is a
DELETE with `If-Match`. An unconditional put is a conditional one tried again until it lands.

On the local cloud (moto 5.2.5) these conditions are honoured as on AWS: moto checks the
condition and then stores in two steps, and the local cloud serves one AWS request at a time, so
the check and the write are atomic there as they are on S3. A bare moto server serving requests
in parallel would not be.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from stackflow.backends import mask_url, s3_location
from stackflow.records.base import (
    ABSENT,
    Expect,
    Record,
    check_key,
    decode,
    encode,
    first_version,
)
from stackflow.records.errors import RecordConflict, RecordsUnavailable

_SUFFIX = ".json"
_LOST = ("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey", "412", "409", "404")
_UNCONDITIONAL_TRIES = 20


class S3Records:
    """Records under an s3:// URL (the Pulumi CLI's options: endpoint, region, path style)."""

    def __init__(self, url: str, *, client: Any | None = None) -> None:
        location = s3_location(url)
        self._bucket, self._prefix = location.bucket, location.prefix
        self._client = client if client is not None else location.client()
        self._where = mask_url(url)
        self._seen: dict[str, tuple[int, str]] = {}  # key -> (version, ETag) last read or written
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        return self._where

    def _object(self, key: str) -> str:
        return f"{self._prefix}{check_key(key)}{_SUFFIX}"

    def _call(self, method: str, **kwargs: Any) -> Any:
        """One S3 call; a lost condition comes back as None, anything but an answer raises."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return getattr(self._client, method)(Bucket=self._bucket, **kwargs)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in _LOST:
                return None
            raise RecordsUnavailable(f"stackflow's records at {self._where}: {exc}") from None
        except BotoCoreError as exc:
            raise RecordsUnavailable(f"stackflow's records at {self._where}: {exc}") from None

    def _remember(self, key: str, version: int | None, etag: str | None) -> None:
        with self._lock:
            if version is None or etag is None:
                self._seen.pop(key, None)
            else:
                self._seen[key] = (version, etag)

    def _read(self, key: str) -> tuple[Record, str] | None:
        answer = self._call("get_object", Key=self._object(key))
        if answer is None:
            self._remember(key, None, None)
            return None
        record = decode(answer["Body"].read(), f"s3://{self._bucket}/{self._object(key)}")
        self._remember(key, record.version, answer["ETag"])
        return record, answer["ETag"]

    def _etag_of(self, key: str, version: int) -> str | None:
        """The ETag of `key` at `version`: remembered, else read (None: not at that version)."""
        with self._lock:
            seen = self._seen.get(key)
        if seen is not None and seen[0] == version:
            return seen[1]
        found = self._read(key)
        if found is None or found[0].version != version:
            return None
        return found[1]

    def _found(self, key: str) -> int | None:
        found = self._read(key)
        return None if found is None else found[0].version

    def get(self, key: str) -> Record | None:
        """See `Records.get`."""
        found = self._read(key)
        return None if found is None else found[0]

    def _put(self, key: str, value: Mapping[str, Any], expect: int | None) -> int | None:
        """One conditional PUT (absent when expect is None); the new version, None if it lost."""
        if expect is None:
            version, condition = first_version(), {"IfNoneMatch": "*"}
        else:
            etag = self._etag_of(key, expect)
            if etag is None:
                return None
            version, condition = expect + 1, {"IfMatch": etag}
        body = encode(value, version)
        answer = self._call(
            "put_object",
            Key=self._object(key),
            Body=body,
            ContentType="application/json",
            **condition,
        )
        if answer is None:
            self._remember(key, None, None)
            return None
        self._remember(key, version, answer["ETag"])
        return version

    def put(self, key: str, value: Mapping[str, Any], *, expect_version: Expect) -> int:
        """See `Records.put`."""
        check_key(key)
        if expect_version is None:
            for _ in range(_UNCONDITIONAL_TRIES):
                current = self._read(key)
                version = self._put(key, value, None if current is None else current[0].version)
                if version is not None:
                    return version
            raise RecordsUnavailable(
                f"record {key!r} at {self._where} changed on every one of "
                f"{_UNCONDITIONAL_TRIES} tries to write it"
            )
        expect = None if expect_version is ABSENT else expect_version
        version = self._put(key, value, expect)
        if version is None:
            raise RecordConflict(key, expect, self._found(key))
        return version

    def delete(self, key: str, *, expect_version: int | None = None) -> bool:
        """See `Records.delete`."""
        name = self._object(key)
        if expect_version is None:
            existed = self._call("head_object", Key=name) is not None
            self._call("delete_object", Key=name)
            self._remember(key, None, None)
            return existed
        etag = self._etag_of(key, expect_version)
        answer = None if etag is None else self._call("delete_object", Key=name, IfMatch=etag)
        self._remember(key, None, None)
        if answer is None:
            raise RecordConflict(key, expect_version, self._found(key))
        return True

    def list(self, prefix: str = "") -> list[str]:
        """See `Records.list`."""
        from botocore.exceptions import BotoCoreError, ClientError

        pages = self._client.get_paginator("list_objects_v2").paginate(
            Bucket=self._bucket, Prefix=f"{self._prefix}{prefix}"
        )
        keys: list[str] = []
        try:
            for page in pages:
                for item in page.get("Contents", []):
                    name = str(item["Key"])[len(self._prefix) :]
                    if name.endswith(_SUFFIX):
                        keys.append(name[: -len(_SUFFIX)])
        except (BotoCoreError, ClientError) as exc:
            raise RecordsUnavailable(f"stackflow's records at {self._where}: {exc}") from None
        return sorted(keys)

    def close(self) -> None:
        """Nothing to let go of (boto3 clients hold no connection that needs closing)."""
