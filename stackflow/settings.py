"""Settings: the one door to stackflow's configuration (the package `stackflow.config` holds it).

What an environment deploys lives in its file (`environments/<name>.toml`), what the team shares
in `stackflow.toml`, and what belongs to this machine in `STACKFLOW_*` variables; see
`stackflow.config.sources`. Read them with `get_settings(environment, cloud)`: a bad value raises
`SettingsError` naming the file and key, or the variable, and what is accepted.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import SecretStr

from stackflow.config.kinds import (
    ENVIRONMENT_NAME_MAX,
    EnvironmentKind,
    Profile,
    is_ephemeral_name,
    kind_of,
    validate_environment_name,
)
from stackflow.config.load import get_settings
from stackflow.config.model import Settings, SettingsSource
from stackflow.config.sections import (
    ApprovalSettings,
    AppSettings,
    AwsSettings,
    DatabaseSettings,
    LocalCloudSettings,
    MigrationSettings,
    NetworkSettings,
)
from stackflow.config.sources import UnknownEnvironment, declared_environments

__all__ = [
    "ENVIRONMENT_NAME_MAX",
    "AppSettings",
    "ApprovalSettings",
    "AwsSettings",
    "DatabaseSettings",
    "EnvironmentKind",
    "LocalCloudSettings",
    "MigrationSettings",
    "MysqlTarget",
    "NetworkSettings",
    "Profile",
    "Settings",
    "SettingsSource",
    "UnknownEnvironment",
    "declared_environments",
    "get_settings",
    "is_ephemeral_name",
    "kind_of",
    "parse_mysql_url",
    "validate_environment_name",
]


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

    def __repr__(self) -> str:
        return (
            f"MysqlTarget({self.user}@{self.host}:{self.port}/{self.database}, password=**********)"
        )


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
        raise ValueError("database URL has a port that is not a number 1-65535") from exc
    database = parts.path.lstrip("/")
    if not parts.hostname or not parts.username or not database:
        raise ValueError(
            "database URL needs a user, a host and a database: mysql://user:password@host:port/database"
        )
    from urllib.parse import unquote

    return MysqlTarget(
        host=parts.hostname,
        port=port,
        user=unquote(parts.username),
        password=SecretStr(unquote(parts.password or "")),
        database=database,
    )
