"""Errors of stackflow's records."""

from __future__ import annotations

from stackflow.errors import StackflowError


class RecordsError(StackflowError):
    """stackflow's records could not be read or written."""


class RecordConflict(RecordsError):
    """A conditional write lost: the record was created, changed or deleted meanwhile.

    Attributes:
        key: the record's key.
        expected: the version the writer expected (None: that it did not exist).
        found: the version found (None: it does not exist).
    """

    def __init__(self, key: str, expected: int | None, found: int | None) -> None:
        want = "absent" if expected is None else f"at version {expected}"
        have = "absent" if found is None else f"at version {found}"
        super().__init__(f"record {key!r}: expected it {want}, found it {have}")
        self.key, self.expected, self.found = key, expected, found


class RecordKeyError(RecordsError, ValueError):
    """A record key that is not accepted (segments of letters, digits, '.', '_', '-')."""


class DamagedRecord(RecordsError, ValueError):
    """A stored record is not what stackflow writes (not JSON, or not a versioned object)."""


class RecordsUnavailable(RecordsError):
    """The records' store did not answer (database down, bucket unreachable)."""
