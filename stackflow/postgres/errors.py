"""Errors of the project's own PostgreSQL."""

from __future__ import annotations

from stackflow.errors import StackflowError


class PostgresError(StackflowError):
    """The local PostgreSQL could not be initialised, started, stopped or set up."""


class PostgresNotInstalled(PostgresError):
    """PostgreSQL's server programs (initdb, postgres) are not installed on this machine."""


class PostgresFolderError(PostgresError, PermissionError):
    """The server's folder cannot be used by the OS user the server runs as."""
