"""One project's records in a store that several projects may share (one team PostgreSQL, one
bucket, one state folder): every key sits under `projects/<project>/`, as Pulumi keeps each
project's stacks apart. Two checkouts naming different projects never see, list or delete each
other's environments, runs or marks.

Records written before projects had keys of their own (`environments/dev`, `stacks/dev/app`, ...)
are moved under the project that opens the store first, once: each is created at its new key
(unless one is there already) and deleted at its old one only at the version that was copied.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from stackflow.records.base import ABSENT, Expect, Record, Records
from stackflow.records.errors import DamagedRecord, RecordConflict

ROOT = "projects/"


def project_prefix(project: str) -> str:
    return f"{ROOT}{project}/"


class ProjectRecords:
    """The records of `project` in `store`; keys are the project's own (without the prefix)."""

    def __init__(self, store: Records, project: str) -> None:
        self.store, self.project = store, project
        self._prefix = project_prefix(project)

    @property
    def where(self) -> str:
        return f"{self.store.where} (project {self.project})"

    def get(self, key: str) -> Record | None:
        """See `Records.get`."""
        return self.store.get(self._prefix + key)

    def put(self, key: str, value: Mapping[str, Any], *, expect_version: Expect) -> int:
        """See `Records.put`."""
        return self.store.put(self._prefix + key, value, expect_version=expect_version)

    def delete(self, key: str, *, expect_version: int | None = None) -> bool:
        """See `Records.delete`."""
        return self.store.delete(self._prefix + key, expect_version=expect_version)

    def list(self, prefix: str = "") -> list[str]:
        """See `Records.list`."""
        return [k[len(self._prefix) :] for k in self.store.list(self._prefix + prefix)]

    def close(self) -> None:
        """Let go of the store's connections."""
        self.store.close()


def adopt_unkeyed(store: Records, project: str) -> list[str]:
    """Move every record that has no project in its key under `project` (see the module).

    A damaged one is left where it is (the project's `status` cannot name it; deleting it is the
    owner's decision). A record another writer changed meanwhile stays for the next open.

    Returns:
        The keys moved.
    """
    moved = []
    for key in store.list():
        if key.startswith(ROOT):
            continue
        try:
            found = store.get(key)
        except DamagedRecord:
            continue
        if found is None:
            continue  # deleted meanwhile
        with contextlib.suppress(RecordConflict):  # already moved by another process
            store.put(project_prefix(project) + key, found.value, expect_version=ABSENT)
        with contextlib.suppress(RecordConflict):  # changed meanwhile: moved on a later open
            store.delete(key, expect_version=found.version)
            moved.append(key)
    return moved


def project_records(store: Records, project: str) -> ProjectRecords:
    """`project`'s records in `store`, after moving the records written before projects had
    keys of their own under it."""
    adopt_unkeyed(store, project)
    return ProjectRecords(store, project)
