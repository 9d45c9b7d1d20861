"""Connections and databases on the project's PostgreSQL (as its superuser, over the socket)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql

from stackflow.postgres.errors import PostgresError
from stackflow.postgres.server import PostgresServer, open_connection

_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


@contextmanager
def connect(
    server: PostgresServer, database: str = "postgres"
) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """A superuser connection over the socket (autocommit), closed after the block."""
    conn = open_connection(server, database, 10)
    try:
        yield conn
    finally:
        conn.close()


def _checked_name(name: str) -> str:
    if not _NAME.match(name):
        raise PostgresError(
            f"database name {name!r} is not accepted: lowercase letters, digits and _, "
            "starting with a letter or _, at most 63 characters"
        )
    return name


def create_database(server: PostgresServer, name: str) -> bool:
    """Create database `name` (owned by the server's role) unless it exists.

    Returns:
        True if it was created now.

    Raises:
        PostgresError: the name is not a plain lowercase identifier.
    """
    with connect(server) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (_checked_name(name),))
        if found.fetchone() is not None:
            return False
        try:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        except psycopg.errors.DuplicateDatabase:
            return False  # another caller created it meanwhile
        except psycopg.errors.UniqueViolation:
            return False  # the same race, seen in the catalog's index
        return True


def drop_database(server: PostgresServer, name: str) -> bool:
    """Drop database `name` and end its sessions (tests' fresh databases).

    Returns:
        True if it existed.
    """
    with connect(server) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (_checked_name(name),))
        if found.fetchone() is None:
            return False
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        return True
