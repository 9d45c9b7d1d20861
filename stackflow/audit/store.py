"""Where the audit log lives and what every kind of log offers: append the next entry (atomic
against every other writer, whatever machine it runs on) and read every entry back in order.
Nothing here updates or deletes an entry.

The log lives beside stackflow's records (`records_url`), keyed by project as the records are:

    a folder         <records>/projects/<project>/audit.log       one line per entry, fsynced
    postgres://      table stackflow_audit, rows (project, seq)    insert-only (a trigger refuses
                                                                  UPDATE, DELETE and TRUNCATE)
    s3://            <prefix>projects/<project>/audit/<seq>.audit  one object per entry, created
                                                                  with If-None-Match: *

Each kind lives in its own module (`stackflow.audit.filelog`, `.pglog`, `.s3log`); a kind of
backend hands its log out through `Backend.audit` as it hands out its records.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from stackflow.audit.chain import Head, Stored
from stackflow.records.errors import RecordsError

Build = Callable[[int, str], bytes]
"""Makes the entry to append from its position and the previous entry's hash."""

APPEND_TRIES = 20  # writers racing for one position: each try reads the winner's entry afresh
LOG_FILE = "audit.log"


class AuditUnavailable(RecordsError):
    """The audit log could not be read or appended to (its store did not answer, or other writers
    took every position tried)."""


class AuditLog(Protocol):
    """One project's audit log in one store."""

    @property
    def where(self) -> str:
        """Where the log lives, as a user may be shown it (no password)."""
        ...

    def append(self, build: Build) -> Head:
        """Append `build(seq, prev)` as the next entry: `seq` is one more than the last entry's,
        `prev` the last entry's hash. Two writers never take one position; the loser builds its
        entry again on the winner's.

        Returns:
            The new entry's position and hash.

        Raises:
            AuditUnavailable: the store did not answer, or lost every try to other writers.
        """
        ...

    def entries(self) -> list[Stored]:
        """Every entry, in the log's order, as stored.

        Raises:
            AuditUnavailable: the store did not answer.
        """
        ...

    def close(self) -> None:
        """Let go of connections."""
        ...


def project_log_key(project: str) -> str:
    """The part of a log's place that is the project's (a folder's path, an object's prefix)."""
    return f"projects/{project}/"


def log_path(folder: Path, project: str) -> Path:
    """The audit log's file in a records folder."""
    return folder / project_log_key(project) / LOG_FILE
