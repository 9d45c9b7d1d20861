"""stackflow's records: small JSON documents a second worker must see (environment records,
approvals, ...), stored beside the Pulumi state in the team's backend, with atomic
compare-and-set writes. See `stackflow.records.base` for the protocol; values are plaintext, so
callers seal any secret before they store it.

    stackflow.backends.open_records("/state/records")                                    a folder (also file://)
    stackflow.backends.open_records("postgresql://stackflow@/stackflow?host=/sock/dir")  a PostgreSQL table
    stackflow.backends.open_records("s3://bucket/team/records?endpoint=...&region=...")  S3 objects

Each kind of store lives with its kind of backend (`stackflow.backends.<kind>`), and
`stackflow.backends.open_records(url)` opens the one a URL names.
"""

from __future__ import annotations

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
    "update",
]
