"""stackflow's records: small JSON documents a second worker must see (environment records,
approvals, ...), stored beside the Pulumi state in the team's backend, with atomic
compare-and-set writes. See `stackflow.records.base` for the protocol; values are plaintext, so
callers seal any secret before they store it.

    open_records("/state/records")                                    FileRecords (also file://)
    open_records("postgresql://stackflow@/stackflow?host=/sock/dir")  PostgresRecords
    open_records("s3://bucket/team/records?endpoint=...&region=...")  S3Records
"""

from __future__ import annotations

from pathlib import Path

from stackflow.backends import backend_kind, file_folder
from stackflow.records.base import ABSENT, Absent, Expect, Record, Records, update
from stackflow.records.errors import (
    DamagedRecord,
    RecordConflict,
    RecordKeyError,
    RecordsError,
    RecordsUnavailable,
)

__all__ = [
    "ABSENT",
    "Absent",
    "DamagedRecord",
    "Expect",
    "Record",
    "RecordConflict",
    "RecordKeyError",
    "Records",
    "RecordsError",
    "RecordsUnavailable",
    "open_records",
    "update",
]


def open_records(url: str) -> Records:
    """The store of stackflow's records at `url`, picked by its scheme.

    Args:
        url: a folder (a path, or file:///path), postgres(ql)://... or s3://bucket/prefix?...

    Raises:
        BackendURLError: another scheme, or a malformed URL (shown masked).
    """
    if "://" not in url:
        from stackflow.records.files import FileRecords

        return FileRecords(Path(url).expanduser())
    kind = backend_kind(url)
    if kind == "file":
        from stackflow.records.files import FileRecords

        return FileRecords(file_folder(url))
    if kind == "postgres":
        from stackflow.records.postgres import PostgresRecords

        return PostgresRecords(url)
    from stackflow.records.s3 import S3Records

    return S3Records(url)
