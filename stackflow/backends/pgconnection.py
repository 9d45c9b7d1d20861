"""One PostgreSQL connection shared by a store's threads: opened on first use, one statement at a
time, opened again after the server dropped it (for reads only: see `run`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from stackflow.errors import StackflowError

# pg_advisory_xact_lock key that serialises table setup (any bigint: "stackflo" in ASCII)
_SETUP_LOCK = 0x737461636B666C6F

Row = tuple[Any, ...]


class SharedConnection:
    """A lazily opened autocommit connection to `conninfo`.

    Args:
        conninfo: a libpq URL or key=value string (never shown: `where` is).
        where: how errors name the database (a masked URL).
        setup: a statement run once on each new connection (CREATE TABLE IF NOT EXISTS ...).
        unavailable: the error type raised when the server does not answer.
    """

    def __init__(
        self,
        conninfo: str,
        where: str,
        *,
        setup: str | None = None,
        unavailable: Callable[[str], StackflowError],
    ) -> None:
        self._conninfo, self._where, self._setup = conninfo, where, setup
        self._unavailable = unavailable
        self._conn: psycopg.Connection[Row] | None = None
        self._lock = threading.Lock()

    def _connection(self) -> psycopg.Connection[Row]:
        if self._conn is None or self._conn.closed:
            conn = psycopg.connect(self._conninfo, autocommit=True, connect_timeout=10)
            if self._setup is not None:
                # CREATE ... IF NOT EXISTS is not safe against itself: two processes creating one
                # table at once may both pass the check, and one fails on the catalog (its row
                # type: DuplicateObject). One setup at a time per database, then it is a no-op.
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SETUP_LOCK,))
                    conn.execute(self._setup)
            self._conn = conn
        return self._conn

    def run(self, query: str, params: Sequence[Any] = (), *, write: bool = False) -> list[Row]:
        """Run one statement; its rows ([] for a statement without any).

        A read is tried again on a new connection (the server may have restarted meanwhile); a
        write is not: had it reached the server, a second try could report our own write as
        another's.

        Raises:
            the `unavailable` error: the server did not answer (for a write: it may or may not
                have happened; read to know).
        """
        with self._lock:
            for attempt in (1, 2):
                try:
                    cur = self._connection().execute(query, params)
                    return cur.fetchall() if cur.description is not None else []
                except psycopg.OperationalError as exc:
                    self._drop()
                    if write or attempt == 2:
                        hint = "; read it back to know whether the write happened" if write else ""
                        raise self._unavailable(
                            f"{self._where} did not answer ({exc}){hint}"
                        ) from None
        raise AssertionError("unreachable: the second attempt returns or raises")

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    def close(self) -> None:
        """Close the connection (a later `run` opens a new one)."""
        with self._lock:
            self._drop()
