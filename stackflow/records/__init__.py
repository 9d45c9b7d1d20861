"""stackflow's records: small JSON documents a second worker must see (environment records,
approvals, ...), stored beside the Pulumi state in the team's backend, with atomic
compare-and-set writes. See `stackflow.records.base` for the protocol; values are plaintext, so
callers seal any secret before they store it.

    open_records("/state/records")                                    a folder (also file://)
    open_records("postgresql://stackflow@/stackflow?host=/sock/dir")  a PostgreSQL table
    open_records("s3://bucket/team/records?endpoint=...&region=...")  S3 objects

Each kind of store lives with its kind of backend (`stackflow.backends.<kind>`).
"""

from __future__ import annotations

from pathlib import Path

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
    """The store of stackflow's records at `url`, picked by its kind of backend.

    Args:
        url: a folder (a path, or file:///path), postgres(ql)://... or s3://bucket/prefix?...

    Raises:
        BackendURLError: another scheme, or a malformed URL (shown masked).
    """
    # imported here: each kind's module imports this package's base
    from stackflow.backends import backend_for
    from stackflow.backends.file import FileRecords

    if "://" not in url:
        return FileRecords(Path(url).expanduser())
    return backend_for(url).records(url)
