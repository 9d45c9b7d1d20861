"""stackflow's records in PostgreSQL: one row per record in table `stackflow_records`.

Each write is one statement, atomic by itself: `INSERT ... ON CONFLICT DO NOTHING` creates only
what is absent, `UPDATE ... WHERE version = %s` replaces only what is unchanged, and the version
column grows by one on every write. The table is created on first use. The database is the URL's
(the project's own server: `stackflow.postgres.records_url`; a team's: any URL libpq accepts; a
Pulumi backend URL's `table=` option is ignored, so the records may sit beside `pulumi_state`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psycopg.types.json import Jsonb

from stackflow.backends import mask_url, postgres_location
from stackflow.postgres.client import SharedConnection
from stackflow.records.base import ABSENT, Expect, Record, check_key, damaged, first_version
from stackflow.records.errors import RecordConflict, RecordsUnavailable

TABLE = "stackflow_records"
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    key TEXT PRIMARY KEY,
    value JSONB NOT NULL,
    version BIGINT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
)
"""


class PostgresRecords:
    """Records in a PostgreSQL database, over one connection its threads share."""

    def __init__(self, url: str) -> None:
        self._where = mask_url(url)
        self._db = SharedConnection(
            postgres_location(url).conninfo,
            f"stackflow's records at {self._where}",
            setup=_SCHEMA,
            unavailable=RecordsUnavailable,
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
