"""The PostgreSQL a team-mode Prefect server runs on (`stackflow.localprefect`), with Prefect's
database, the Pulumi backend and stackflow's records each a database of its own on it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from stackflow.state import StateLayout


class TeamDatabase:
    """The PostgreSQL a team-mode server runs on, and what the CLI and workers on this machine
    point at: Prefect's database, the Pulumi backend and stackflow's records, each its own
    database on it (Unix socket, no password in any URL)."""

    def __init__(self, state_dir: Path, say: Callable[[str], object] | None = None) -> None:
        from stackflow.postgres import create_database, ensure_postgres
        from stackflow.postgres.urls import (
            PREFECT_DATABASE,
            PULUMI_DATABASE,
            RECORDS_DATABASE,
            prefect_database_url,
            pulumi_backend_url,
            records_url,
        )

        def log(line: str) -> None:
            if say is not None:
                say(line)

        layout = StateLayout(state_dir)
        layout.give_passage()
        server = ensure_postgres(layout.postgres, log=log)
        for name in (PREFECT_DATABASE, PULUMI_DATABASE, RECORDS_DATABASE):
            create_database(server, name)
        self.prefect_url = prefect_database_url(server)
        self.backend_url = pulumi_backend_url(server)
        self.records_url = records_url(server)
