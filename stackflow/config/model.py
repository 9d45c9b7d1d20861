"""`Settings`: everything one run of one environment reads, validated before anything runs."""

from __future__ import annotations

import re
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    field_validator,
    model_validator,
)

from stackflow import PROJECT_ROOT
from stackflow.backends import BackendURLError, accepted, backend_for, url_secrets
from stackflow.config import guards
from stackflow.config.approval import ApprovalSettings
from stackflow.config.kinds import EnvironmentKind, Profile, kind_of, validate_environment_name
from stackflow.config.notifications import NotificationSettings
from stackflow.config.policy import PolicySettings
from stackflow.config.protection import Protection
from stackflow.config.section import no_control_characters
from stackflow.config.sections import (
    AppSettings,
    AwsSettings,
    DatabaseSettings,
    GitSettings,
    LocalCloudSettings,
    MigrationSettings,
    NetworkSettings,
)
from stackflow.state import StateLayout

if TYPE_CHECKING:
    from stackflow.policy.packs import PolicySet


class SettingsSource(BaseModel):
    """Which files and overrides made these settings (for the summary, artifact and --json)."""

    model_config = ConfigDict(frozen=True)

    project_dir: str = ""
    project_file: str | None = None
    environment_file: str | None = None
    template: bool = False  # the environment's kind's template, not a file of its own
    overrides: dict[str, str] = Field(default_factory=dict)  # setting -> where (values masked)
    ignored: tuple[str, ...] = ()  # variables that name settings they may not set

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump()


class Settings(BaseModel):
    """Everything stackflow reads for one environment. Build it with `get_settings()`."""

    model_config = ConfigDict(
        extra="forbid", validate_default=True, ignored_types=(cached_property,)
    )

    environment: str = Field(
        "dev", description="Environment name: lowercase, DNS-safe, <= 20 chars."
    )
    kind: EnvironmentKind | None = Field(
        None,
        description="Environment kind (dev, staging, prod, ephemeral). Default: from the name.",
    )
    ttl_hours: float = Field(
        24.0,
        gt=0,
        le=24 * 90,
        description="Ephemeral environments: hours until cleanup destroys them.",
    )
    project: str = Field(
        "stackflow",
        pattern=r"^[a-z][a-z0-9-]{0,30}$",
        description="Project name; prefixes Pulumi projects.",
    )
    cloud: Literal["local", "aws"] = Field(
        "local",
        description="Where the engine deploys: 'local' (moto's AWS APIs on loopback, a MariaDB per "
        "database; nothing reaches AWS) or 'aws'.",
    )
    project_dir: Path = Field(
        PROJECT_ROOT,
        description="The project's folder: stackflow.toml, environments/, migrations/.",
    )
    state_dir: Path = Field(
        PROJECT_ROOT / ".stackflow",
        description="This machine's state folder (caches, logs, local servers). Default: .stackflow in the project.",
    )
    backend_url: str | None = Field(
        None,
        description=f"Pulumi backend, one of: {accepted()}. A password in it belongs in "
        "STACKFLOW_BACKEND_URL, never in a file. Default: a file backend in the state folder.",
    )
    records_url: str | None = Field(
        None,
        description="Where stackflow's records live (environments, drift, commits). Default: "
        "beside the backend (a .stackflow folder or prefix, or the stackflow database on its "
        "PostgreSQL); with the default file backends, records/ in the state folder.",
    )
    state_passphrase: SecretStr | None = Field(
        None,
        description="Passphrase of the Pulumi secrets provider. Required on AWS unless "
        "secrets_provider is set; the local cloud generates one.",
    )
    secrets_provider: str | None = Field(
        None,
        description="Pulumi secrets provider other than the passphrase, e.g. awskms://alias/my-key.",
    )
    local_prefect_port: int = Field(
        4277,
        ge=1024,
        le=65535,
        description="Port of the local Prefect server the CLI starts when PREFECT_API_URL is unset.",
    )
    stack_retries: int = Field(
        3,
        ge=0,
        le=10,
        description="Retries of a stack operation on transient errors (lock held, throttling, network).",
    )
    retry_delay_s: float = Field(
        5.0,
        ge=0,
        le=600,
        description="First retry delay in seconds; doubles each retry, with jitter.",
    )
    stall_timeout_s: float = Field(
        2700.0,
        ge=1,
        le=86400,
        description=(
            "An engine command that prints nothing for this long (a provider call that never "
            "answers) is cancelled and the run ends interrupted; longer than AWS's slowest create "
            "(an RDS instance: up to 40 minutes)."
        ),
    )
    cancel_grace_s: float = Field(
        60.0,
        ge=1,
        le=3600,
        description=(
            "After a cancel (Ctrl-C, SIGTERM, Cancel in Prefect, a stall), how long Pulumi may "
            "take to finish the calls in flight before its process is stopped; what it left "
            "pending is imported or cleared by the next run."
        ),
    )
    graph: str = Field(
        "graph.nodes",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$",
        description="The module that declares the graph (its GRAPH), as a dotted module path "
        "resolved against the project's folder first.",
    )
    pulumi_org: str | None = Field(
        None, max_length=100, description="Pulumi Cloud organisation (optional)."
    )
    pulumi_access_token: SecretStr | None = Field(
        None, description="Pulumi Cloud access token (for the Cloud backend)."
    )

    aws: AwsSettings = Field(default_factory=AwsSettings)
    network: NetworkSettings = Field(default_factory=NetworkSettings)
    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    app: AppSettings = Field(default_factory=AppSettings)
    migrations: MigrationSettings = Field(default_factory=MigrationSettings)
    approval: ApprovalSettings = Field(default_factory=ApprovalSettings)
    localcloud: LocalCloudSettings = Field(default_factory=LocalCloudSettings)
    git: GitSettings = Field(default_factory=GitSettings)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    notifications: NotificationSettings = Field(default_factory=NotificationSettings)

    source: SettingsSource = Field(default_factory=SettingsSource, exclude=True, repr=False)
    # what the last successful `up` recorded: the gate follows the stronger of it and the file
    _recorded_protection: Protection | None = PrivateAttr(None)

    @field_validator("*", mode="before")
    @classmethod
    def _plain_text(cls, value: Any) -> Any:
        return no_control_characters(value)

    @field_validator("environment")
    @classmethod
    def _environment(cls, value: str) -> str:
        return validate_environment_name(value)

    @field_validator("backend_url")
    @classmethod
    def _backend(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            backend_for(value).check(value)  # one list of kinds: what a run can use
        except BackendURLError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("secrets_provider")
    @classmethod
    def _secrets_provider(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not re.match(
            r"^(passphrase|awskms://.+|azurekeyvault://.+|gcpkms://.+|hashivault://.+)$", value
        ):
            raise ValueError(
                "not a secrets provider; accepted: passphrase, awskms://..., "
                "azurekeyvault://..., gcpkms://..., hashivault://..."
            )
        return value

    @model_validator(mode="before")
    @classmethod
    def _state_in_project(cls, data: Any) -> Any:
        # The state folder's default follows the project folder (tests and other checkouts).
        if isinstance(data, dict) and data.get("state_dir") is None and data.get("project_dir"):
            data = {**data, "state_dir": Path(data["project_dir"]) / ".stackflow"}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        if not self.migrations.dir.is_absolute():
            self.migrations = self.migrations.model_copy(
                update={"dir": self.project_dir / self.migrations.dir}
            )
        uses_passphrase = self.secrets_provider in (None, "passphrase")
        if self.cloud == "aws" and uses_passphrase and self.state_passphrase is None:
            raise ValueError(
                "the aws cloud needs STACKFLOW_STATE_PASSPHRASE (the Pulumi passphrase secrets "
                "provider) or secrets_provider=awskms://... (the local cloud generates its own)"
            )
        kind = backend_for(self.backend_url) if self.backend_url else None
        if kind is not None and kind.needs_access_token and self.pulumi_access_token is None:
            raise ValueError(
                f"backend {kind.form} ({kind.name}) needs STACKFLOW_PULUMI_ACCESS_TOKEN"
            )
        return self

    # --- derived values ------------------------------------------------------------------------

    @property
    def state(self) -> StateLayout:
        """This machine's state folder and every path under it."""
        return StateLayout(self.state_dir)

    @cached_property
    def environment_kind(self) -> EnvironmentKind:
        return self.kind or kind_of(self.environment)

    @cached_property
    def profile(self) -> Profile:
        return Profile(self.environment_kind)

    @property
    def protected(self) -> bool:
        """Whether this environment is protected (its kind, or the protection recorded)."""
        return guards.protected(self)

    @property
    def file_protection(self) -> Protection:
        """The protection the environment's file gives (see `stackflow.config.guards`)."""
        return guards.file_protection(self)

    def with_recorded_protection(self, recorded: Protection | None) -> Settings:
        """These settings, guarded by the stronger of the file's and the `recorded` protection
        (raises `ProtectionLowered` as `stackflow.config.guards.with_recorded_protection`)."""
        return guards.with_recorded_protection(self, recorded)

    def lowered_protection(self, recorded: Protection | None = None) -> list[str]:
        """What the file lowers (raises as `stackflow.config.guards.lowered_protection`)."""
        return guards.lowered_protection(self, recorded)

    @property
    def exact_commit(self) -> str | None:
        """Why runs of this environment must deploy an exact commit, or None."""
        return guards.exact_commit(self)

    def confirm_destroy(self, confirmed: bool) -> None:
        """Refuse to destroy a protected environment unless `confirmed` (ConfirmationRequired)."""
        guards.confirm_destroy(self, confirmed)

    def confirm_database_deletable(self) -> None:
        """Refuse to destroy a database with deletion protection on (DeletionProtected)."""
        guards.confirm_database_deletable(self)

    @property
    def approval_required(self) -> bool:
        """Whether `up` waits for approval of its plan (see `stackflow.config.guards`)."""
        return guards.approval_required(self)

    @cached_property
    def policies(self) -> PolicySet | None:
        """The policy packs its previews and `up`s run, read once (None: none; raises as
        `stackflow.policy.packs.resolve`)."""
        from stackflow.policy.packs import resolve

        return resolve(
            self.policy,
            self.project_dir,
            self.source.environment_file,
            self.profile.policy_enforcement,
        )

    @property
    def resolved_backend_url(self) -> str:
        """The Pulumi backend: explicit, else a file backend per cloud in the state folder."""
        if self.backend_url:
            return self.backend_url
        return f"file://{self.state.file_backend(self.cloud)}"

    @property
    def resolved_records_url(self) -> str:
        """Where stackflow's records live: explicit, else beside the team's backend; one store in
        the state folder for the default file backends (both clouds', so an environment deployed
        on one cloud is refused on the other)."""
        if self.records_url:
            return self.records_url
        if not self.backend_url:
            return str(self.state.records)
        beside = backend_for(self.backend_url).records_beside(self.backend_url)
        return beside or str(self.state.records)

    @property
    def localcloud_root(self) -> Path:
        """The local cloud's folder: its server, journal, data plane and Pulumi home."""
        return self.localcloud.dir or self.state.localcloud

    @property
    def target_label(self) -> str:
        """Where runs act, in the words every report uses: "local cloud" or "AWS"."""
        return "local cloud" if self.cloud == "local" else "AWS"

    @property
    def multi_az(self) -> bool:
        return self.profile.multi_az if self.database.multi_az is None else self.database.multi_az

    @property
    def deletion_protection(self) -> bool:
        d = self.database.deletion_protection
        return self.profile.deletion_protection if d is None else d

    @property
    def final_snapshot(self) -> bool:
        f = self.database.final_snapshot
        return self.profile.final_snapshot if f is None else f

    @property
    def backup_retention_days(self) -> int:
        b = self.database.backup_retention_days
        return self.profile.backup_retention_days if b is None else b

    @property
    def nat_gateway(self) -> bool:
        n = self.network.nat_gateway
        return self.profile.nat_gateway if n is None else n

    @property
    def desired_count(self) -> int:
        d = self.app.desired_count
        return self.profile.desired_count if d is None else d

    def secret_values(self) -> list[str]:
        """Every secret these settings hold, for the redactor (a backend URL's password too)."""
        values = [self.state_passphrase, self.pulumi_access_token]
        found = [v.get_secret_value() for v in values if v is not None and v.get_secret_value()]
        return found + url_secrets(self.backend_url or "") + url_secrets(self.records_url or "")
