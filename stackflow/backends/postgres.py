"""The PostgreSQL backend: the Pulumi state in the CLI's table, stackflow's records in table
`stackflow_records` of the `stackflow` database on the same server; locks are left to
`pulumi cancel`.

    postgres://user@/database?host=/socket/folder      (or user@host:port; `table` picks the
                                                        CLI's table, pulumi_state by default)

The CLI's table holds rows key TEXT, data JSON {"data": <base64 of the file>}, updated_at; every
key is prefixed with the URL's path, i.e. the database name and a "/" (the CLI's blob prefix).
A password belongs in STACKFLOW_BACKEND_URL on each machine (or PGPASSWORD / ~/.pgpass), never in
a committed file; a password holding @ : / ? # or % is percent-encoded in the URL.

Records: each write is one statement, atomic by itself: `INSERT ... ON CONFLICT DO NOTHING`
creates only what is absent, `UPDATE ... WHERE version = %s` replaces only what is unchanged, and
the version column grows by one on every write. The table is created on first use.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from stackflow.backends.base import (
    Backend,
    BackendURLError,
    Blob,
    StateBackendUnavailable,
    StateBlobs,
    key_prefix,
    mask_url,
)
from stackflow.errors import StackflowError
from stackflow.records.base import (
    ABSENT,
    Expect,
    Record,
    Records,
    check_key,
    damaged,
    first_version,
)
from stackflow.records.errors import RecordConflict, RecordsUnavailable

if TYPE_CHECKING:
    from stackflow.backends.pgconnection import SharedConnection

RECORDS_DATABASE = "stackflow"
TABLE = "stackflow_records"
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    key TEXT PRIMARY KEY,
    value JSONB NOT NULL,
    version BIGINT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
)
"""


@dataclass(frozen=True)
class PostgresLocation:
    """Where a postgres:// URL points, as the Pulumi CLI reads it.

    Attributes:
        conninfo: the URL for psycopg/libpq (the CLI's own `table` option removed).
        table: the Pulumi CLI's state table (`pulumi_state` unless `table=` says otherwise).
        prefix: the CLI prefixes every key with the URL's path (the database name) and a "/".
    """

    conninfo: str
    table: str
    prefix: str


def postgres_location(url: str) -> PostgresLocation:
    """Parse a postgres:// backend URL.

    Raises:
        BackendURLError: not postgres(ql)://, or a table name that is not a plain identifier.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise BackendURLError(f"{mask_url(url)} is not a postgres:// URL")
    query = parse_qsl(parts.query, keep_blank_values=True)
    table = next((v for k, v in query if k == "table"), "") or "pulumi_state"
    if not table.replace("_", "").isalnum() or table[0].isdigit():
        raise BackendURLError(f"{mask_url(url)}: table {table!r} is not a plain identifier")
    rest = urlencode([(k, v) for k, v in query if k != "table"], safe="/")
    conninfo = urlunsplit((parts.scheme, parts.netloc, parts.path, rest, ""))
    return PostgresLocation(conninfo=conninfo, table=table, prefix=key_prefix(parts.path))


def socket_url(scheme: str, user: str, database: str, socket_dir: Path, port: int) -> str:
    """A URL to `database` as `user` over the Unix socket in `socket_dir` (no password: the
    socket's folder is the guard). Port 5432 is left out, as every client defaults to it."""
    query = {"host": str(socket_dir)}
    if port != 5432:
        query["port"] = str(port)
    return f"{scheme}://{quote(user)}@/{quote(database)}?{urlencode(query, safe='/')}"


def _connection(
    url: str, what: str, unavailable: type[StackflowError], setup: str | None = None
) -> SharedConnection:
    # imported here: a file backend's run never pays for the PostgreSQL driver
    from stackflow.backends.pgconnection import SharedConnection

    return SharedConnection(
        postgres_location(url).conninfo, what, setup=setup, unavailable=unavailable
    )


class PostgresBlobs:
    """The CLI's PostgreSQL backend: one query per read."""

    def __init__(self, url: str) -> None:
        location = postgres_location(url)
        self._table, self._prefix = location.table, location.prefix
        self.where = mask_url(url)
        self._db = _connection(url, f"the Pulumi backend {self.where}", StateBackendUnavailable)

    def _query(self, query: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        import psycopg

        try:
            return self._db.run(query, params)
        except psycopg.errors.UndefinedTable:
            return []  # the CLI creates its table on first login: nothing stored yet

    def _blobs(self, rows: list[tuple[Any, ...]]) -> list[Blob]:
        # `data` is JSON {"data": base64}; ->> hands it over as text, decoded here.
        return [
            Blob(str(key)[len(self._prefix) :], base64.b64decode(data), modified)
            for key, data, modified in rows
        ]

    def latest(self, keys: Sequence[str]) -> Blob | None:
        rows = self._query(
            f"SELECT key, data->>'data', updated_at FROM {self._table} WHERE key = ANY(%s) "
            "ORDER BY updated_at DESC, key DESC LIMIT 1",  # on a tie the CLI takes the later key
            ([self._prefix + k for k in keys],),
        )
        found = self._blobs(rows)
        return found[0] if found else None

    def under(self, prefix: str) -> list[Blob]:
        rows = self._query(
            f"SELECT key, data->>'data', updated_at FROM {self._table} "
            "WHERE starts_with(key, %s) ORDER BY key",
            (self._prefix + prefix,),
        )
        return self._blobs(rows)

    def names(self, prefix: str) -> list[str]:
        rows = self._query(
            f"SELECT key FROM {self._table} WHERE starts_with(key, %s) ORDER BY key",
            (self._prefix + prefix,),
        )
        return [str(r[0])[len(self._prefix) :] for r in rows]

    def close(self) -> None:
        self._db.close()


class PostgresRecords:
    """Records in a PostgreSQL database, over one connection its threads share. The database is
    the URL's (a Pulumi backend URL's `table=` option is ignored)."""

    def __init__(self, url: str) -> None:
        self._where = mask_url(url)
        self._db = _connection(
            url, f"stackflow's records at {self._where}", RecordsUnavailable, _SCHEMA
        )
        self._run = self._db.run

    @property
    def where(self) -> str:
        return self._where

    def _row(self, key: str) -> Record | None:
        rows = self._run(f"SELECT value, version FROM {TABLE} WHERE key = %s", (key,))
        if not rows:
            return None
        value, version = rows[0]
        if not isinstance(value, dict):
            raise damaged(
                f"{key!r} in table {TABLE} at {self._where}", "its value is not an object"
            )
        return Record(value, int(version))

    def _found(self, key: str) -> int | None:
        current = self._row(key)
        return None if current is None else current.version

    def get(self, key: str) -> Record | None:
        """See `Records.get`."""
        return self._row(check_key(key))

    def put(self, key: str, value: Mapping[str, Any], *, expect_version: Expect) -> int:
        """See `Records.put`."""
        from psycopg.types.json import Jsonb

        check_key(key)
        body = Jsonb(dict(value))
        if expect_version is ABSENT:
            rows = self._run(
                f"INSERT INTO {TABLE} (key, value, version) VALUES (%s, %s, %s) "
                "ON CONFLICT (key) DO NOTHING RETURNING version",
                (key, body, first_version()),
                write=True,
            )
            if not rows:
                raise RecordConflict(key, None, self._found(key))
        elif expect_version is None:
            rows = self._run(
                f"INSERT INTO {TABLE} AS r (key, value, version) VALUES (%s, %s, %s) "
                "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, "
                "version = r.version + 1, updated_at = now() RETURNING version",
                (key, body, first_version()),
                write=True,
            )
        else:
            rows = self._run(
                f"UPDATE {TABLE} SET value = %s, version = version + 1, updated_at = now() "
                "WHERE key = %s AND version = %s RETURNING version",
                (body, key, expect_version),
                write=True,
            )
            if not rows:
                raise RecordConflict(key, expect_version, self._found(key))
        return int(rows[0][0])

    def delete(self, key: str, *, expect_version: int | None = None) -> bool:
        """See `Records.delete`."""
        check_key(key)
        if expect_version is None:
            deleted = self._run(
                f"DELETE FROM {TABLE} WHERE key = %s RETURNING 1", (key,), write=True
            )
            return bool(deleted)
        rows = self._run(
            f"DELETE FROM {TABLE} WHERE key = %s AND version = %s RETURNING 1",
            (key, expect_version),
            write=True,
        )
        if not rows:
            raise RecordConflict(key, expect_version, self._found(key))
        return True

    def list(self, prefix: str = "") -> list[str]:
        """See `Records.list`."""
        rows = self._run(
            f"SELECT key FROM {TABLE} WHERE starts_with(key, %s) ORDER BY key", (prefix,)
        )
        return [str(r[0]) for r in rows]

    def close(self) -> None:
        """Close the connection."""
        self._db.close()


class PostgresBackend(Backend):
    name = "PostgreSQL"
    schemes = ("postgres", "postgresql")
    form = "postgres://<user>@<host>/<database> (or ?host=<socket folder>)"

    def check(self, url: str) -> None:
        super().check(url)
        postgres_location(url)

    def for_cli(self, url: str) -> tuple[str, dict[str, str]]:
        # lib/pq, the CLI's driver, reads PGPASSWORD as libpq does
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
        given = [v for k, v in query if k == "password"]
        password = unquote(parts.password) if parts.password else (given[-1] if given else "")
        if not password:
            return url, {}
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            netloc = f"{userinfo.split(':', 1)[0]}@{host}"
        rest = urlencode([(k, v) for k, v in query if k != "password"], safe="/")
        return urlunsplit((parts.scheme, netloc, parts.path, rest, "")), {"PGPASSWORD": password}

    def blobs(self, url: str) -> StateBlobs:
        return PostgresBlobs(url)

    def records(self, url: str) -> Records:
        return PostgresRecords(url)

    def restore(self, url: str) -> str:
        return (
            "`python flows/run.py server restore FILE` from a `server backup` (the project's own "
            f"PostgreSQL), or restore the database of {mask_url(url)} from its own backup with "
            "pg_restore"
        )

    def records_beside(self, url: str) -> str | None:
        parts = urlsplit(url)
        query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != "table"], safe="/")
        return urlunsplit(("postgresql", parts.netloc, f"/{RECORDS_DATABASE}", query, ""))


BACKEND = PostgresBackend()
