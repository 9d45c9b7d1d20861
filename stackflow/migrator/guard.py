"""Statements a migration may never run, refused before any statement of any pending file runs.

A file runs inside the database it migrates, beside the runner's history table. Dropping that
database (`DROP DATABASE`, MariaDB's `CREATE OR REPLACE DATABASE`) or dropping, emptying, renaming
or altering the history table would destroy the record of what ran, so the next run would start
over on a half-built schema. mysql client commands (`source file`, `\\. file`, `\\g` ...) are not
SQL: the server would refuse them after the statements before them had run. `USE` of another
schema and drops of other schemas stay allowed, as the mysql client allows them (the lint flags
the drops).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from stackflow.migrator.errors import MigrationRefused
from stackflow.migrator.lint import IDENT, QUALIFIED, ROW_STATEMENTS, normalise
from stackflow.migrator.splitter import Statement, one_line
from stackflow.schema_history import HISTORY_TABLE

# The mysql client's named commands it runs itself when a statement starts with them (`help`,
# `use` and `delimiter` are left out: the server or the splitter handles those).
CLIENT_COMMANDS = frozenset(
    "charset clear connect edit ego exit go nopager notee nowarning pager print prompt quit "
    "rehash resetconnection query_attributes source ssl_session_data_print status system tee "
    "warnings".upper().split()
)
# Code outside strings, quoted names and comments, taken in one possessive match: it stops at a
# backslash there, a client command (`\N` aside: the client passes it on, and the server reads it
# as NULL), or at what it cannot take (then one character is stepped over).
_CODE_RUN_RE = re.compile(
    r"(?:[^'\"`#/\\-]++|'[^'\\]*+(?:(?:\\.|'')[^'\\]*+)*+'|\"[^\"\\]*+(?:(?:\\.|\"\")[^\"\\]*+)*+\""
    r"|`[^`]*+(?:``[^`]*+)*+`|(?:--(?=\s|$)|#)[^\n]*+|(?>/\*(?!!).*?\*/)|/|-|\\N)*+",
    re.S,
)
_USE_RE = re.compile(rf"^USE\s+({IDENT})", re.I)
_DROP_DATABASE_RE = re.compile(
    rf"^(?:DROP\s+(?:DATABASE|SCHEMA)\s+(?:IF\s+EXISTS\s+)?|CREATE\s+OR\s+REPLACE\s+"
    rf"(?:DATABASE|SCHEMA)\s+(?:IF\s+NOT\s+EXISTS\s+)?)({IDENT})",
    re.I,
)
_TABLE_STATEMENTS = [  # (pattern of the names it acts on, what it does to the history table)
    (rf"^DROP\s+TABLES?\s+(?:IF\s+EXISTS\s+)?({QUALIFIED}(?:\s*,\s*{QUALIFIED})*)", "drops"),
    (rf"^TRUNCATE\s+(?:TABLE\s+)?({QUALIFIED})", "empties"),
    (r"^RENAME\s+TABLES?\s+(.*)", "renames"),
    (rf"^ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+(?:IF\s+EXISTS\s+)?({QUALIFIED})", "alters"),
    (rf"^CREATE\s+OR\s+REPLACE\s+TABLE\s+({QUALIFIED})", "replaces"),
]
_TABLE_RES = [(re.compile(p, re.I), verb) for p, verb in _TABLE_STATEMENTS]
_NAME_RE = re.compile(rf"({IDENT})(?:\s*\.\s*({IDENT}))?")


@dataclass(frozen=True)
class Refusal:
    """One statement a migration may not run: where it is, what it would do, what to do."""

    filename: str
    statement: int
    line: int
    text: str
    why: str
    todo: str

    def describe(self) -> str:
        return (
            f"{self.filename}: statement {self.statement} (line {self.line}) `{self.text}` "
            f"{self.why}; {self.todo}"
        )


def _plain(name: str, fold_case: bool) -> str:
    """A name as the server compares it: unquoted, and case-folded when the server ignores case
    (lower_case_table_names 1 or 2); as written otherwise (0, Linux's default)."""
    plain = name.strip("`").replace("``", "`")
    return plain.casefold() if fold_case else plain


def _names(text: str, current: str, fold_case: bool) -> Iterable[tuple[str, str]]:
    """(schema, table) of each name in `text`, unqualified ones in the `current` schema."""
    for match in _NAME_RE.finditer(text):
        if match[1].upper() == "TO":
            continue
        if match[2] is None:
            yield current, _plain(match[1], fold_case)
        else:
            yield _plain(match[1], fold_case), _plain(match[2], fold_case)


def _client_command(st: Statement) -> tuple[str, int] | None:
    """The client command in `st` and its line, if it holds one."""
    if st.keyword in CLIENT_COMMANDS:
        return st.sql.split("\n", 1)[0].strip(), st.line
    sql, offset = st.sql, 0
    if "\\" not in sql:
        return None
    while True:
        offset = _CODE_RUN_RE.match(sql, offset).end()  # type: ignore[union-attr]
        if offset >= len(sql):
            return None
        if sql[offset] == "\\":
            begins = sql.rfind("\n", 0, offset) + 1
            shown = sql[begins:].split("\n", 1)[0].strip()
            return shown, st.line + sql.count("\n", 0, offset)
        offset += 1


def refusals(
    filename: str,
    statements: Sequence[Statement],
    database: str,
    start: int = 1,
    fold_case: bool = False,
) -> list[Refusal]:
    """The statements of one file (from statement `start` on) that may never run.

    Args:
        filename: the file's name, for the messages.
        statements: the file's statements, in order (earlier ones too: a USE changes the schema).
        database: the database being migrated, where the history table is.
        start: the first statement that will run (a resumed file's earlier ones already ran).
        fold_case: the server compares database and table names ignoring case
            (lower_case_table_names 1 or 2); otherwise `Chinook` is not `chinook`.
    """
    target, history = _plain(database, fold_case), _plain(HISTORY_TABLE, fold_case)
    current = target
    out: list[Refusal] = []
    for st in statements:
        if st.keyword in ROW_STATEMENTS:  # rows: only a client command can hide in one
            command = _client_command(st) if st.number >= start else None
            if command is not None:
                out.append(Refusal(filename, st.number, command[1], *_command_refusal(command)))
            continue
        text = normalise(st.sql)
        refused = _refusal(st, text, current, target, history, fold_case)
        if refused is not None and st.number >= start:
            shown, line, why, todo = refused
            out.append(Refusal(filename, st.number, line, shown, why, todo))
        if (use := _USE_RE.match(text)) is not None:
            current = _plain(use[1], fold_case)
    return out


def _command_refusal(command: tuple[str, int]) -> tuple[str, str, str]:
    """(text shown, why, what to do) for a client command."""
    return (
        one_line(command[0], 80),
        "is a mysql client command, which the server cannot run",
        "a migration holds SQL only: put a sourced file's statements in the migration "
        "itself (or in a migration of their own), and end statements with ; (not \\g)",
    )


def _refusal(
    st: Statement, text: str, current: str, target: str, history: str, fold_case: bool
) -> tuple[str, int, str, str] | None:
    """(text shown, line, why, what to do) when `st` may not run."""
    command = _client_command(st)
    if command is not None:
        shown, why, todo = _command_refusal(command)
        return shown, command[1], why, todo
    drop = _DROP_DATABASE_RE.match(text)
    if drop is not None and _plain(drop[1], fold_case) == target:
        return (
            one_line(st.sql),
            st.line,
            f"drops the database being migrated ({target}), and with it the history table "
            f"{HISTORY_TABLE} that records which files ran",
            "migrations run inside the database: strip the schema lines of a dump (DROP/CREATE "
            "SCHEMA or DATABASE, and USE of it) from the file",
        )
    for pattern, verb in _TABLE_RES:
        match = pattern.match(text)
        if match is None:
            continue
        if (target, history) in set(_names(match[1], current, fold_case)):
            return (
                one_line(st.sql),
                st.line,
                f"{verb} the history table {HISTORY_TABLE}, where the runner records which files "
                "ran",
                "remove the statement: the table is the runner's (to change a record, use "
                "`migrate --repair`; to start over, drop the database outside migrations)",
            )
        break
    return None


def check_refusals(found: Sequence[Refusal]) -> None:
    """Raise, listing every refused statement, when there are any.

    Raises:
        MigrationRefused: naming each file, statement and line, and what to do; nothing ran.
    """
    if found:
        raise MigrationRefused(
            "pending migrations hold statements a migration may not run (nothing was changed):\n  "
            + "\n  ".join(r.describe() for r in found)
        )
