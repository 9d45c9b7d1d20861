"""Where a MySQL is: `MysqlTarget`, read from a mysql:// URL or from a database stack's outputs.

Values only (no driver, no connection), so settings and the local MariaDB can name a target
without importing the runner; `stackflow.migrator.connection` connects to one.
"""

from __future__ import annotations

from typing import Protocol
from urllib.parse import unquote, urlsplit

from pydantic import SecretStr


class DatabaseAddress(Protocol):
    """Anything that says where a database is and how to log in (a database stack's outputs)."""

    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def user(self) -> str: ...
    @property
    def password(self) -> SecretStr: ...
    @property
    def database(self) -> str: ...


class MysqlTarget:
    """Where a MySQL is: host, port, user, password (kept secret), database."""

    def __init__(self, host: str, port: int, user: str, password: SecretStr, database: str) -> None:
        self.host, self.port, self.user, self.password, self.database = (
            host,
            port,
            user,
            password,
            database,
        )

    @classmethod
    def from_outputs(cls, outputs: DatabaseAddress) -> MysqlTarget:
        """The target a database stack's outputs (or anything with host, port, user, password
        and database attributes) describe; the one place that conversion is written."""
        password = SecretStr(outputs.password.get_secret_value())
        return cls(outputs.host, int(outputs.port), outputs.user, password, outputs.database)

    @property
    def address(self) -> str:
        """host:port/database, for logs and reports (no user, no password)."""
        return f"{self.host}:{self.port}/{self.database}"

    @property
    def login(self) -> str:
        """user@host:port/database, for errors about connecting (never the password)."""
        return f"{self.user}@{self.address}"

    def __repr__(self) -> str:
        return f"MysqlTarget({self.login}, password=**********)"


def parse_mysql_url(url: str) -> MysqlTarget:
    """Parse mysql://user:password@host:port/database.

    Raises:
        ValueError: naming what is wrong, never echoing the password.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("mysql", "mariadb", "mysql+pymysql"):
        raise ValueError(
            "database URL must start with mysql:// (form: mysql://user:password@host:port/database)"
        )
    try:
        port = parts.port or 3306
    except ValueError as exc:
        raise ValueError(
            "database URL has a port that is not a number 1-65535; if its password holds "
            "@ : / ? # or %, percent-encode those characters (@ is %40, : is %3A, / is %2F)"
        ) from exc
    database = parts.path.lstrip("/")
    if not parts.hostname or not parts.username or not database:
        raise ValueError(
            "database URL needs a user, a host and a database: mysql://user:password@host:port/database"
        )
    return MysqlTarget(
        host=parts.hostname,
        port=port,
        user=unquote(parts.username),
        password=SecretStr(unquote(parts.password or "")),
        database=database,
    )
