"""The S3 backend: the Pulumi state as objects under a prefix in a bucket, stackflow's records
as objects under `<prefix>/.stackflow/`; lock objects are left to `pulumi cancel`.

    s3://bucket/prefix?endpoint=127.0.0.1:4566&disableSSL=true&s3ForcePathStyle=true&region=eu-west-1

Options are the Pulumi CLI's own: the AWS SDK v1 names above (which the CLI still translates)
and the v2 ones (endpoint with a scheme, disable_https, use_path_style, profile). Credentials come
from the environment, as the CLI's do, never from the URL.

Records are `<prefix><key>.json`, written with conditional puts: create-if-absent is a PUT with
`If-None-Match: *`, replace-if-unchanged a PUT with `If-Match: <the ETag read with the version>`;
S3 refuses either with 412 when another writer got there first (409 when two cross), and the
loser gets RecordConflict. Every stored object holds its version, so its ETag changes on every
write. A delete at a version is a DELETE with `If-Match`. An unconditional put is a conditional
one tried again until it lands. On the local cloud (moto 5.2.5) these conditions are honoured as
on AWS: the local cloud serves one AWS request at a time, so the check and the write are atomic.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from stackflow.backends.base import (
    TRUE,
    Backend,
    BackendURLError,
    Blob,
    StateBackendUnavailable,
    StateBlobs,
    key_prefix,
    mask_url,
)
from stackflow.records.base import (
    ABSENT,
    Expect,
    Record,
    Records,
    check_key,
    decode,
    encode,
    first_version,
)
from stackflow.records.errors import RecordConflict, RecordsUnavailable

_SUFFIX = ".json"
_LOST = ("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey", "412", "409", "404")
_UNCONDITIONAL_TRIES = 20


@dataclass(frozen=True)
class S3Location:
    """Where an s3:// URL points and how to reach it.

    Attributes:
        bucket: the bucket.
        prefix: the key prefix under it ("" or ending in "/"), as the Pulumi CLI prefixes keys.
        endpoint_url: an S3-compatible endpoint (http://127.0.0.1:4566), or None for AWS.
        region: the region, or None for the environment's.
        path_style: address the bucket in the path (S3-compatible servers), not the host name.
        profile: an AWS profile name, or None for the environment's credentials.
    """

    bucket: str
    prefix: str
    endpoint_url: str | None
    region: str | None
    path_style: bool
    profile: str | None

    def client(self) -> Any:
        """A boto3 S3 client for this location (credentials from the environment or profile)."""
        import boto3
        from botocore.config import Config

        session = boto3.session.Session(profile_name=self.profile, region_name=self.region)
        return session.client(
            "s3",
            endpoint_url=self.endpoint_url,
            config=Config(
                s3={"addressing_style": "path" if self.path_style else "auto"},
                retries={"total_max_attempts": 3, "mode": "standard"},
                connect_timeout=10,
                read_timeout=60,
            ),
        )


def s3_location(url: str) -> S3Location:
    """Parse an s3:// backend URL with the Pulumi CLI's options (v1 and v2 names).

    Raises:
        BackendURLError: not s3://, or no bucket.
    """
    parts = urlsplit(url)
    if parts.scheme != "s3" or not parts.netloc:
        raise BackendURLError("an s3:// backend names no bucket; use s3://<bucket>[/prefix][?...]")
    query = dict(parse_qsl(parts.query))
    no_tls = query.get("disableSSL", query.get("disable_https", "false")).lower() in TRUE
    endpoint = query.get("endpoint") or None
    if endpoint is not None and "://" not in endpoint:
        # The CLI adds the scheme the v1 SDK implied: http when disableSSL, else https.
        endpoint = f"{'http' if no_tls else 'https'}://{endpoint}"
    path_style = query.get("s3ForcePathStyle", query.get("use_path_style", "false")).lower()
    return S3Location(
        bucket=parts.netloc,
        prefix=key_prefix(parts.path),
        endpoint_url=endpoint,
        region=query.get("region") or None,
        path_style=path_style in TRUE,
        profile=query.get("profile") or None,
    )


class Bucket:
    """One S3 location's client, with S3's answers turned into stackflow's errors."""

    def __init__(
        self, url: str, label: str, unavailable: type[Exception], client: Any | None = None
    ) -> None:
        location = s3_location(url)
        self.bucket, self.prefix = location.bucket, location.prefix
        self.client = client if client is not None else location.client()
        self.where = mask_url(url)
        self._label = f"{label} {self.where}"
        self._unavailable = unavailable

    def call(self, method: str, lost: tuple[str, ...], **kwargs: Any) -> Any:
        """One S3 call; an answer whose code is in `lost` comes back as None."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return getattr(self.client, method)(Bucket=self.bucket, **kwargs)
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code", "")) in lost:
                return None
            raise self._unavailable(f"{self._label}: {exc}") from None
        except BotoCoreError as exc:
            raise self._unavailable(f"{self._label}: {exc}") from None

    def keys(self, prefix: str) -> list[str]:
        """Every key under the location's prefix + `prefix`, relative to the location."""
        keys: list[str] = []
        token: str | None = None
        while True:
            extra = {"ContinuationToken": token} if token else {}
            page = self.call("list_objects_v2", (), Prefix=self.prefix + prefix, **extra) or {}
            keys += [str(item["Key"])[len(self.prefix) :] for item in page.get("Contents", [])]
            token = page.get("NextContinuationToken")
            if not token:
                return sorted(keys)


class S3Blobs:
    """An S3 backend's objects. `latest` reads the candidates in order and returns the first that
    exists: one GET when the first is there. The CLI keeps one of stack.json / .json.gz /
    .json.zst at a time, and S3's one-second modification times could not order two anyway."""

    def __init__(self, url: str) -> None:
        self._s3 = Bucket(url, "the Pulumi backend", StateBackendUnavailable)
        self.where = self._s3.where

    def _get(self, key: str) -> Blob | None:
        answer = self._s3.call("get_object", ("NoSuchKey", "404"), Key=self._s3.prefix + key)
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
        return self._s3.keys(prefix)

    def close(self) -> None:
        return None


class S3Records:
    """Records under an s3:// URL (the Pulumi CLI's options: endpoint, region, path style)."""

    def __init__(self, url: str, *, client: Any | None = None) -> None:
        self._s3 = Bucket(url, "stackflow's records at", RecordsUnavailable, client)
        self._where = self._s3.where
        self._seen: dict[str, tuple[int, str]] = {}  # key -> (version, ETag) last read or written
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        return self._where

    def _object(self, key: str) -> str:
        return f"{self._s3.prefix}{check_key(key)}{_SUFFIX}"

    def _call(self, method: str, **kwargs: Any) -> Any:
        """One S3 call; a lost condition comes back as None, anything but an answer raises."""
        return self._s3.call(method, _LOST, **kwargs)

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
        record = decode(answer["Body"].read(), f"s3://{self._s3.bucket}/{self._object(key)}")
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
        names = self._s3.keys(prefix)
        return [n[: -len(_SUFFIX)] for n in names if n.endswith(_SUFFIX)]

    def close(self) -> None:
        """Nothing to let go of (boto3 clients hold no connection that needs closing)."""


class S3Backend(Backend):
    name = "S3"
    schemes = ("s3",)
    form = "s3://<bucket>[/prefix][?endpoint=...&region=...]"

    def check(self, url: str) -> None:
        s3_location(url)

    def blobs(self, url: str) -> StateBlobs:
        return S3Blobs(url)

    def records(self, url: str) -> Records:
        return S3Records(url)

    def restore(self, url: str) -> str:
        return (
            f"put the stacks' objects under .pulumi/stacks/ in {mask_url(url)} back from the "
            "bucket's object versions or your backup of it"
        )

    def records_beside(self, url: str) -> str | None:
        parts = urlsplit(url)
        path = parts.path.rstrip("/") + "/.stackflow"
        return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


BACKEND = S3Backend()
