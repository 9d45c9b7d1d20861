"""Checks of a pending file against the live server before anything runs: DEFINER clauses naming
another user, statements over max_allowed_packet, and the live columns the lint judges a
narrowing MODIFY against."""

from __future__ import annotations

import re
from collections.abc import Sequence

from stackflow.migrator.connection import MysqlConnection
from stackflow.migrator.errors import (
    MigrationDefinerError,
    MigrationRefused,
    MigrationStatementTooLarge,
)
from stackflow.migrator.files import Migration
from stackflow.migrator.lint import (
    ROW_STATEMENTS,
    ColumnLookup,
    LiveColumn,
    foreign_definers,
    strip_definer,
)
from stackflow.migrator.splitter import Statement

STRIP_DEFINER = "--strip-definer (for every run: strip_definer = true under [migrations] in environments/<name>.toml)"


def live_columns(conn: MysqlConnection, database: str) -> ColumnLookup:
    """A lookup of the schema's columns as information_schema has them now (one query, lazily)."""
    cache: dict[tuple[str, str], LiveColumn] | None = None

    def lookup(table: str, column: str) -> LiveColumn | None:
        nonlocal cache
        if cache is None:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, "
                    "CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE, IS_NULLABLE "
                    "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s",
                    (database,),
                )
                cache = {
                    (str(t).lower(), str(c).lower()): LiveColumn(
                        str(dt).lower(),
                        str(ct).lower(),
                        None if ln is None else int(ln),
                        None if p is None else int(p),
                        None if sc is None else int(sc),
                        nl == "YES",
                    )
                    for t, c, dt, ct, ln, p, sc, nl in cur.fetchall()
                }
        return cache.get((table.lower(), column.lower()))

    return lookup


def prepared_statements(m: Migration, user: str, strip_definers: bool) -> tuple[Statement, ...]:
    """The statements to send: DEFINER clauses stripped when asked.

    Raises:
        MigrationDefinerError: a DEFINER names a user other than `user` and stripping is off.
    """
    foreign = foreign_definers(m.statements, user)
    if not foreign:
        return m.statements
    if not strip_definers:
        number, clause = foreign[0]
        raise MigrationDefinerError(
            f"{m.filename}: statement {number} has {clause}, a user other than the migration user "
            f"'{user}' (creating it needs SUPER or SET USER). Drop the clauses with "
            f"{STRIP_DEFINER} so the migration user owns the objects, or edit the file"
        )
    return tuple(
        s if s.keyword in ROW_STATEMENTS else Statement(s.number, s.line, strip_definer(s.sql))
        for s in m.statements
    )


def server_limits(conn: MysqlConnection) -> tuple[int, bool]:
    """The server's max_allowed_packet (bytes), and whether it compares database and table names
    ignoring case (lower_case_table_names 1 or 2; 0, Linux's default, compares them as written)."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@max_allowed_packet, @@lower_case_table_names")
        row = cur.fetchone()
    if not row:
        return 16 * 1024 * 1024, False
    return int(row[0]), int(row[1] or 0) != 0


# Flyway's placeholders (its default prefix and suffix), which it replaces anywhere in a file.
_PLACEHOLDER_RE = re.compile(r"\$\{[^}\n]*\}")


def check_placeholders(m: Migration) -> None:
    """Refuse a pending file holding a Flyway `${placeholder}`: stackflow replaces none, and the
    server would get the text as it is.

    Raises:
        MigrationRefused: naming the file, the line and the placeholder; nothing ran.
    """
    found = _PLACEHOLDER_RE.search(m.sql) if "${" in m.sql else None
    if found is not None:
        line = m.sql.count("\n", 0, found.start()) + 1
        raise MigrationRefused(
            f"{m.filename}: line {line} holds the Flyway placeholder {found[0]}, which stackflow "
            "does not replace (nothing was changed); write the value into the file (as a new "
            "version, if this one was applied)"
        )


def check_sizes(m: Migration, statements: Sequence[Statement], limit: int) -> None:
    """Raises MigrationStatementTooLarge naming the first statement larger than `limit` bytes."""
    for st in statements:
        text = st.sql
        size = (len(text) if text.isascii() else len(text.encode("utf-8"))) + 1  # command byte
        if size > limit:
            raise MigrationStatementTooLarge(
                f"{m.filename}: statement {st.number} (line {st.line}) is {size} bytes, over the "
                f"server's max_allowed_packet of {limit}; split it (e.g. a multi-row INSERT into "
                "several) or raise max_allowed_packet on the server"
            )
