"""The URLs that point Prefect's server, the Pulumi CLI and stackflow's records at the project's
PostgreSQL, each to a database of its own, over the server's private Unix socket.

None holds a password: the socket's folder (0700) is the guard. Verified forms (PostgreSQL 15):

    Prefect 3.8.8    postgresql+asyncpg://stackflow@/prefect?host=/state/postgres/run
    Pulumi 3.259.0   postgres://stackflow@/pulumi?host=/state/postgres/run
                     (its keys in table pulumi_state are prefixed with the database name: pulumi/...)
    stackflow        postgresql://stackflow@/stackflow?host=/state/postgres/run   (psycopg, libpq)

`?port=N` follows when the server's port is not 5432.
"""

from __future__ import annotations

from stackflow.backends.postgres import RECORDS_DATABASE as RECORDS_DATABASE
from stackflow.backends.postgres import socket_url
from stackflow.postgres.server import PostgresServer

PREFECT_DATABASE = "prefect"
PULUMI_DATABASE = "pulumi"


def prefect_database_url(server: PostgresServer, database: str = PREFECT_DATABASE) -> str:
    """For PREFECT_API_DATABASE_CONNECTION_URL (SQLAlchemy with asyncpg)."""
    return socket_url("postgresql+asyncpg", server.user, database, server.socket_dir, server.port)


def pulumi_backend_url(server: PostgresServer, database: str = PULUMI_DATABASE) -> str:
    """For PULUMI_BACKEND_URL: the Pulumi CLI's self-hosted PostgreSQL backend (lib/pq)."""
    return socket_url("postgres", server.user, database, server.socket_dir, server.port)


def records_url(server: PostgresServer, database: str = RECORDS_DATABASE) -> str:
    """For `stackflow.backends.open_records` (psycopg)."""
    return socket_url("postgresql", server.user, database, server.socket_dir, server.port)
