"""Settings: the one door to stackflow's configuration (the package `stackflow.config` holds it).

What an environment deploys lives in its file (`environments/<name>.toml`), what the team shares
in `stackflow.toml`, and what belongs to this machine in `STACKFLOW_*` variables; see
`stackflow.config.sources`. Read them with `get_settings(environment, cloud)`: a bad value raises
`SettingsError` naming the file and key, or the variable, and what is accepted.
"""

from __future__ import annotations

from stackflow.config.approval import ApprovalSettings
from stackflow.config.kinds import (
    ENVIRONMENT_NAME_MAX,
    EnvironmentKind,
    Profile,
    is_ephemeral_name,
    kind_of,
    validate_environment_name,
)
from stackflow.config.load import get_settings, project_git
from stackflow.config.model import Settings, SettingsSource
from stackflow.config.sections import (
    AppSettings,
    AwsSettings,
    DatabaseSettings,
    GitSettings,
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
    "GitSettings",
    "LocalCloudSettings",
    "MigrationSettings",
    "NetworkSettings",
    "Profile",
    "Settings",
    "SettingsSource",
    "UnknownEnvironment",
    "declared_environments",
    "get_settings",
    "is_ephemeral_name",
    "kind_of",
    "project_git",
    "validate_environment_name",
]
