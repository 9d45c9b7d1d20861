"""Errors of the local MariaDB servers (the root, `LocalDatabaseError`, is in stackflow.errors)."""

from __future__ import annotations

from pathlib import Path

from stackflow.errors import LocalDatabaseError


class MariaDBBootstrapError(LocalDatabaseError):
    """`mariadb-install-db` failed on every try; `log` is its log file."""

    def __init__(self, message: str, log: Path) -> None:
        super().__init__(message)
        self.log = log
