"""How a file's statements commit, and the units their progress is recorded by.

A data statement commits in one transaction with its progress record; a session statement (SET,
USE) is replayed when a file resumes; a DDL statement commits implicitly, so it is marked in
flight before it runs. A `LOCK TABLES ... UNLOCK TABLES` region as mysqldump writes it (rows and
DDL inside, nothing that ends a transaction) keeps progress per statement: the history table is
locked with the file's tables, so the file's own session records each statement, and a run
stopped inside the region resumes at the next statement. Any other region (an explicit
transaction, a LOCK region holding COMMIT or another LOCK) is one unit, marked in flight.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from stackflow.migrator.splitter import Statement
from stackflow.schema_history import HISTORY_TABLE

StatementKind = Literal["data", "session", "ddl", "open", "close"]
_DATA = {"INSERT", "UPDATE", "DELETE", "REPLACE", "SELECT", "WITH", "VALUES", "DO", "LOAD"}
_LOCK_TABLES_RE = re.compile(r"^((?:\s|/\*!\d*)*LOCK\s+TABLES?\s+)", re.I)


def statement_kind(st: Statement) -> StatementKind:
    """How a statement commits: data (in a transaction), session (SET, USE: replayed when a file
    resumes), ddl (implicit commit), or the open/close of a LOCK TABLES or transaction region."""
    word = st.keyword
    if word == "SET":
        rest = st.sql.upper()
        global_like = re.match(r"(?:\s|/\*!\d*)*SET\s+(GLOBAL|PASSWORD|DEFAULT|ROLE)\b", rest)
        return "ddl" if global_like else "session"
    if word == "USE":
        return "session"
    if word in _DATA:
        return "data"
    if word in ("LOCK", "START"):
        return "open"
    if word == "BEGIN":
        return "ddl" if re.search(r"^\W*BEGIN\s+NOT\b", st.sql.upper()) else "open"
    if word in ("UNLOCK", "COMMIT", "ROLLBACK"):
        return "close"
    return "ddl"


@dataclass(frozen=True)
class Unit:
    """Statements recorded together: one data statement (atomic with its record), one DDL
    statement, or a LOCK TABLES / transaction region (marked in flight while it runs). `lock`:
    the number of the LOCK TABLES statement of the region the unit runs in, when that region
    keeps progress per statement (0: none)."""

    first: int
    last: int
    atomic: bool
    lock: int = 0


def _per_statement_region(statements: Sequence[Statement], opened: int) -> int:
    """The last statement of the LOCK TABLES region opened at `opened` when it can keep progress
    per statement (its UNLOCK, or the file's end), else 0."""
    if not _LOCK_TABLES_RE.match(statements[opened - 1].sql):
        return 0
    for st in statements[opened:]:
        kind = statement_kind(st)
        if kind in ("open", "close"):
            return st.number if st.keyword == "UNLOCK" else 0
    return len(statements)


def units_of(statements: Sequence[Statement]) -> list[Unit]:
    """Group a file's statements into the units their progress is recorded by."""
    out: list[Unit] = []
    region: int | None = None
    locked_until = lock = 0
    for st in statements:
        kind = statement_kind(st)
        if st.number <= locked_until:  # UNLOCK is a close: not atomic
            out.append(Unit(st.number, st.number, kind in ("data", "session"), lock))
            continue
        if region is not None:
            if kind == "close" or st.number == len(statements):
                out.append(Unit(region, st.number, False))
                region = None
            continue
        if kind == "open" and st.number < len(statements):
            locked_until = _per_statement_region(statements, st.number)
            if locked_until:
                lock = st.number
                out.append(Unit(st.number, st.number, False, lock))
            else:
                region = st.number
        else:
            out.append(Unit(st.number, st.number, kind in ("data", "session", "close")))
    return out


def session_replay(statements: Sequence[Statement], before: int) -> list[Statement]:
    """The statements a file resumed at statement `before` runs again first, in a new session:
    its earlier session statements (sql_mode, FK checks, character set, user variables, the
    current database), and the LOCK TABLES of a region it resumes inside."""
    units = {u.first: u for u in units_of(statements)}
    inside = units.get(before)
    lock = inside.lock if inside is not None and inside.lock < before else 0
    return [
        s for s in statements[: before - 1] if statement_kind(s) == "session" or s.number == lock
    ]


def lock_with_history(sql: str, database: str) -> str:
    """A LOCK TABLES statement that also locks the history table, so the session holding the
    lock can record its own progress (a locked session may use only the tables it locked)."""
    quoted = database.replace("`", "``")
    return _LOCK_TABLES_RE.sub(lambda m: f"{m[1]}`{quoted}`.{HISTORY_TABLE} WRITE, ", sql, count=1)
