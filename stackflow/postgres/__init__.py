"""The project's own PostgreSQL: one server under a folder of the state folder (team mode on one
machine, and tests), and the URLs that point Prefect, the Pulumi CLI and stackflow's records at it.
"""

from __future__ import annotations

from stackflow.postgres.databases import connect, create_database, drop_database
from stackflow.postgres.errors import PostgresError, PostgresFolderError, PostgresNotInstalled
from stackflow.postgres.server import (
    PostgresServer,
    ensure_postgres,
    postgres_status,
    stop_postgres,
)
from stackflow.postgres.urls import prefect_database_url, pulumi_backend_url, records_url

__all__ = [
    "PostgresError",
    "PostgresFolderError",
    "PostgresNotInstalled",
    "PostgresServer",
    "connect",
    "create_database",
    "drop_database",
    "ensure_postgres",
    "postgres_status",
    "prefect_database_url",
    "pulumi_backend_url",
    "records_url",
    "stop_postgres",
]
