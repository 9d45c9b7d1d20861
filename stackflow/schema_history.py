"""The name of the table where the migration runner records which files ran, and how its versions
order.

A neutral home: the runner (stackflow.migrator) writes the table, and the local cloud's stand-in
app reads its latest version; the local cloud must not import the runner for one name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

HISTORY_TABLE = "stackflow_schema_history"
# Flyway's own history table, read (never written) when the runner adopts a Flyway database.
FLYWAY_TABLE = "flyway_schema_history"

_VERSION_RE = re.compile(r"[0-9]+(?:[._][0-9]+)*", re.ASCII)


def version_parts(text: str) -> tuple[int, ...] | None:
    """A version's numbers as Flyway compares them: `1_1` and `1.1` are (1, 1), trailing zero
    parts dropped (`2.0` is (2,)); None when `text` is not such a version."""
    if not _VERSION_RE.fullmatch(text):
        return None
    parts = [int(p) for p in re.split(r"[._]", text)]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def latest_version(versions: Iterable[object]) -> str | None:
    """The highest of the history's versions (texts or numbers), compared part by part, as its
    numbers (`002` -> `2`, `2.0.1`); the history's NULLs (repeatable migrations) and anything
    that is not a version are skipped."""
    parsed = [version_parts(str(v)) for v in versions if v is not None]
    best = max((p for p in parsed if p is not None), default=None)
    return None if best is None else ".".join(str(p) for p in best)
