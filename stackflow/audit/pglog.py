"""The audit log in PostgreSQL: table `stackflow_audit` in the records' database, one row per
entry, keyed by (project, seq).

Insert-only: stackflow only ever INSERTs, and a trigger refuses UPDATE, DELETE and TRUNCATE on the
table for everyone (lifting it takes ALTER TABLE, which the chain then still catches: an edited or
removed row breaks it). An append reads the last row and inserts the next position with
`ON CONFLICT DO NOTHING`: of two writers on one position exactly one row lands, and the other
builds its entry again on the winner's. The position is the chain's own count, never a PostgreSQL
SEQUENCE: a sequence skips the numbers of rolled-back inserts, and a gap must mean a removed entry.
The entry is stored as TEXT, its bytes exactly as hashed (JSONB would reorder them).
"""

from __future__ import annotations

from typing import Any

from stackflow.audit.chain import GENESIS, Head, Stored, digest
from stackflow.audit.store import APPEND_TRIES, AuditUnavailable, Build

TABLE = "stackflow_audit"
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    project TEXT NOT NULL,
    seq BIGINT NOT NULL CHECK (seq > 0),
    entry TEXT NOT NULL,
    written_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (project, seq)
);
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = '{TABLE}_append_only') THEN
        CREATE OR REPLACE FUNCTION {TABLE}_refuse() RETURNS trigger LANGUAGE plpgsql AS $body$
        BEGIN
            RAISE EXCEPTION '{TABLE} is append-only: % refused', TG_OP;
        END $body$;
        CREATE TRIGGER {TABLE}_append_only BEFORE UPDATE OR DELETE ON {TABLE}
            FOR EACH ROW EXECUTE FUNCTION {TABLE}_refuse();
        CREATE TRIGGER {TABLE}_no_truncate BEFORE TRUNCATE ON {TABLE}
            FOR EACH STATEMENT EXECUTE FUNCTION {TABLE}_refuse();
    END IF;
END $$;
"""


class PostgresAuditLog:
    """One project's audit log in the database at `url` (a records URL)."""

    def __init__(self, url: str, project: str) -> None:
        from stackflow.backends.base import mask_url
        from stackflow.backends.pgconnection import SharedConnection
        from stackflow.backends.postgres import postgres_location

        self._project = project
        self._where = f"table {TABLE} at {mask_url(url)} (project {project})"
        self._db = SharedConnection(
            postgres_location(url).conninfo,
            f"the audit log at {mask_url(url)}",
            setup=_SCHEMA,
            unavailable=AuditUnavailable,
        )

    @property
    def where(self) -> str:
        return self._where

    def _run(self, query: str, params: tuple[Any, ...], *, write: bool = False) -> list[Any]:
        import psycopg

        try:
            return self._db.run(query, params, write=write)
        except psycopg.Error as exc:  # a refusal of the server's, not a lost connection
            raise AuditUnavailable(f"{self._where}: {exc}") from None

    def append(self, build: Build) -> Head:
        """See `AuditLog.append`."""
        for _ in range(APPEND_TRIES):
            rows = self._run(
                f"SELECT seq, entry FROM {TABLE} WHERE project = %s ORDER BY seq DESC LIMIT 1",
                (self._project,),
            )
            seq, prev = (
                (int(rows[0][0]), digest(str(rows[0][1]).encode())) if rows else (0, GENESIS)
            )
            entry = build(seq + 1, prev)
            won = self._run(
                f"INSERT INTO {TABLE} (project, seq, entry) VALUES (%s, %s, %s) "
                "ON CONFLICT (project, seq) DO NOTHING RETURNING seq",
                (self._project, seq + 1, entry.decode("ascii")),
                write=True,
            )
            if won:
                return Head(seq + 1, digest(entry))
        raise AuditUnavailable(
            f"{self._where}: other writers took the next position {APPEND_TRIES} times in a row"
        )

    def entries(self) -> list[Stored]:
        """See `AuditLog.entries`."""
        rows = self._run(
            f"SELECT seq, entry FROM {TABLE} WHERE project = %s ORDER BY seq", (self._project,)
        )
        return [Stored(f"row {seq} of {self._where}", str(text).encode()) for seq, text in rows]

    def close(self) -> None:
        """Close the connection."""
        self._db.close()
