"""Typed settings, read from STACKFLOW_* environment variables and a `.env` file.

One small settings class per concern, nested under `Settings`; each reads its own prefix, so the
variable for a field is the prefix plus the field name (`STACKFLOW_DATABASE_INSTANCE_CLASS`).
Read them through `get_settings()`: a bad value raises `SettingsError` naming the variable and what
is accepted, before anything runs.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings import SettingsError as SourceParseError

from stackflow import PROJECT_ROOT
from stackflow.errors import ConfirmationRequired, DeletionProtected, SettingsError, echo

# Re-exported while other branches still import them from here; they live with the runner now.
from stackflow.migrations.target import MysqlTarget as MysqlTarget
from stackflow.migrations.target import parse_mysql_url as parse_mysql_url

ENV_PREFIX = "STACKFLOW_"

# AWS resource names (ALB, target group) allow 32 characters; ours add up to 12 of their own.
ENVIRONMENT_NAME_MAX = 20
_ENVIRONMENT_RE = re.compile(r"^[a-z](?:[a-z0-9]|-(?=[a-z0-9])){0,19}$")
_EPHEMERAL_RE = re.compile(r"^(pr|eph|preview)-[a-z0-9-]+$")
_REGION_RE = re.compile(
    r"^[a-z]{2}(-gov|-iso[a-z]?)?-(north|south|east|west|central|northeast|northwest|southeast|southwest)-\d$"
)
_FARGATE_CPU = (256, 512, 1024, 2048, 4096, 8192, 16384)


class EnvironmentKind(StrEnum):
    """What an environment is for; it picks the profile of defaults."""

    DEV = "dev"
    STAGING = "staging"
    PROD = "prod"
    EPHEMERAL = "ephemeral"


def validate_environment_name(name: str) -> str:
    """Check an environment name: lowercase, DNS-safe, short enough for AWS resource names.

    Raises:
        ValueError: naming what is accepted.
    """
    if not _ENVIRONMENT_RE.match(name):
        raise ValueError(
            f"environment name {echo(name)} is not accepted: use 1-{ENVIRONMENT_NAME_MAX} characters, "
            "lowercase letters, digits and single hyphens, starting with a letter and not ending "
            "with a hyphen (e.g. 'dev', 'prod', 'pr-123')"
        )
    return name


def kind_of(environment: str) -> EnvironmentKind:
    """The kind an environment name implies: prod*, staging*, pr-*/eph-* (ephemeral), else dev."""
    if environment == "prod" or environment.startswith("prod-"):
        return EnvironmentKind.PROD
    if environment == "staging" or environment.startswith("staging-"):
        return EnvironmentKind.STAGING
    if _EPHEMERAL_RE.match(environment):
        return EnvironmentKind.EPHEMERAL
    return EnvironmentKind.DEV


def _cidr(value: str) -> str:
    try:
        net = ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise ValueError(
            f"{value!r} is not an IPv4 CIDR block such as 10.0.0.0/16 ({exc})"
        ) from exc
    return str(net)


Cidr = Annotated[str, AfterValidator(_cidr)]


class _Section(BaseSettings):
    """Shared configuration: every section reads the environment and `.env`."""

    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        validate_default=True,
    )


class AwsSettings(_Section):
    """Where in AWS the environment lives."""

    model_config = SettingsConfigDict(env_prefix=f"{ENV_PREFIX}AWS_")

    region: str = Field("eu-west-1", description="AWS region, e.g. eu-west-1 or us-gov-west-1.")
    profile: str | None = Field(
        None, description="Named AWS CLI profile to deploy with (optional)."
    )

    @field_validator("region")
    @classmethod
    def _region(cls, value: str) -> str:
        if not _REGION_RE.match(value):
            raise ValueError(f"{value!r} is not an AWS region name such as eu-west-1 or us-east-2")
        return value


class NetworkSettings(_Section):
    """The networking stack: VPC, subnets, NAT, who may reach the database."""

    model_config = SettingsConfigDict(env_prefix=f"{ENV_PREFIX}NETWORK_")

    vpc_cidr: Cidr = Field("10.0.0.0/16", description="VPC CIDR block, /16 to /24.")
    az_count: int = Field(
        2, ge=2, le=6, description="Availability zones to spread subnets over (2-6)."
    )
    nat_gateway: bool | None = Field(
        None, description="Give private subnets a NAT gateway. Default from the profile (prod: on)."
    )
    migration_cidrs: list[Cidr] = Field(
        default_factory=list,
        description="CIDRs allowed to reach MySQL for the migration runner (JSON list). Default: none.",
    )

    @field_validator("vpc_cidr")
    @classmethod
    def _vpc_size(cls, value: str) -> str:
        prefix = ipaddress.IPv4Network(value).prefixlen
        if not 16 <= prefix <= 24:
            raise ValueError(
                f"VPC CIDR {value} must be between /16 and /24 (AWS limits), got /{prefix}"
            )
        return value


class DatabaseSettings(_Section):
    """The database stack: RDS MySQL."""

    model_config = SettingsConfigDict(env_prefix=f"{ENV_PREFIX}DATABASE_")

    engine_version: str = Field(
        "8.0", pattern=r"^8\.0(\.\d+)?$", description="MySQL engine version (8.0 or 8.0.x)."
    )
    instance_class: str = Field(
        "db.t4g.micro",
        pattern=r"^db\.[a-z0-9]+\.[a-z0-9]+$",
        description="RDS instance class, e.g. db.t4g.micro.",
    )
    allocated_storage_gb: int = Field(20, ge=20, le=65536, description="Storage in GiB (20-65536).")
    backup_retention_days: int | None = Field(
        None,
        ge=0,
        le=35,
        description="Automated backup retention (0-35 days). Default from the profile.",
    )
    multi_az: bool | None = Field(
        None, description="Multi-AZ standby. Default from the profile (prod: on)."
    )
    deletion_protection: bool | None = Field(
        None, description="RDS deletion protection. Default from the profile."
    )
    final_snapshot: bool | None = Field(
        None, description="Take a final snapshot on delete. Default from the profile."
    )
    publicly_accessible: bool = Field(
        False, description="Give the instance a public address (off unless you need it)."
    )
    name: str = Field(
        "app", pattern=r"^[A-Za-z][A-Za-z0-9_]{0,63}$", description="Schema (database) name."
    )
    username: str = Field(
        "stackflow", pattern=r"^[A-Za-z][A-Za-z0-9_]{0,15}$", description="Master user name."
    )
    port: int = Field(
        3306, ge=1150, le=65535, description="MySQL port (1150-65535, as RDS allows)."
    )


class AppSettings(_Section):
    """The app stack: ECS Fargate behind an application load balancer."""

    model_config = SettingsConfigDict(env_prefix=f"{ENV_PREFIX}APP_")

    image: str = Field(
        "public.ecr.aws/nginx/nginx:stable", min_length=1, description="Container image to run."
    )
    cpu: int = Field(
        256, description=f"Fargate CPU units, one of {', '.join(map(str, _FARGATE_CPU))}."
    )
    memory_mb: int = Field(
        512, ge=512, le=122880, description="Fargate memory in MiB (512-122880)."
    )
    desired_count: int | None = Field(
        None, ge=0, le=100, description="Tasks to run (0-100). Default from the profile."
    )
    port: int = Field(80, ge=1, le=65535, description="Container port the app listens on.")
    health_check_path: str = Field(
        "/", pattern=r"^/[^\s]*$", description="Health-check path, starting with '/'."
    )
    log_retention_days: int = Field(
        14,
        description="CloudWatch log retention in days (one of CloudWatch's values: 1, 3, 5, 7, 14, 30, 60, 90, ...).",
    )

    @field_validator("cpu")
    @classmethod
    def _cpu(cls, value: int) -> int:
        if value not in _FARGATE_CPU:
            raise ValueError(
                f"{value} is not a Fargate CPU size; accepted: {', '.join(map(str, _FARGATE_CPU))}"
            )
        return value

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        allowed = (
            1,
            3,
            5,
            7,
            14,
            30,
            60,
            90,
            120,
            150,
            180,
            365,
            400,
            545,
            731,
            1096,
            1827,
            2192,
            2557,
            2922,
            3288,
            3653,
        )
        if value not in allowed:
            raise ValueError(
                f"{value} is not a CloudWatch retention; accepted: {', '.join(map(str, allowed))}"
            )
        return value


class MigrationSettings(_Section):
    """Schema migrations run after the database stack."""

    model_config = SettingsConfigDict(env_prefix=f"{ENV_PREFIX}MIGRATIONS_")

    dir: Path = Field(
        PROJECT_ROOT / "migrations", description="Folder of V<version>__<description>.sql files."
    )
    wait_timeout_s: float = Field(
        600.0,
        gt=0,
        le=6 * 3600,
        description="How long to wait for the database to accept connections (seconds).",
    )
    connect_timeout_s: int = Field(
        10, ge=1, le=300, description="Connect timeout per attempt (seconds)."
    )
    read_timeout_s: int = Field(300, ge=1, le=6 * 3600, description="Read timeout (seconds).")
    write_timeout_s: int = Field(300, ge=1, le=6 * 3600, description="Write timeout (seconds).")
    lock_timeout_s: int = Field(
        300,
        ge=0,
        le=6 * 3600,
        description="How long a runner waits for another runner's GET_LOCK (seconds, up to 6 h).",
    )
    tls: bool = Field(False, description="Require TLS to the database.")
    tls_ca: Path | None = Field(None, description="CA bundle for TLS (e.g. the RDS global bundle).")
    allow_out_of_order: bool = Field(
        False, description="Apply a new file whose version is below the latest applied."
    )
    allow_missing: bool = Field(
        False, description="Go on although applied migration files are gone from the folder."
    )
    strip_definer: bool = Field(
        False,
        description="Drop DEFINER= clauses naming another user, so the migration user owns the objects.",
    )
    retries: int = Field(
        3, ge=0, le=20, description="Retries of the migrate step on transient errors."
    )


class ApprovalSettings(_Section):
    """The approval gate: `up` of a protected environment waits for someone to approve its plan."""

    model_config = SettingsConfigDict(env_prefix=f"{ENV_PREFIX}APPROVAL_")

    required: bool | None = Field(
        None,
        description="Pause every `up` for approval of its plan (stacks and migrations). Default "
        "from the profile (prod: on).",
    )
    timeout_s: int = Field(
        3600,
        ge=10,
        le=7 * 24 * 3600,
        description="How long a run waits for a decision before it ends, nothing applied "
        "(seconds, 10 s to 7 days).",
    )


class LocalCloudSettings(_Section):
    """The local cloud: moto's AWS server on loopback behind the project's own provider plugins."""

    model_config = SettingsConfigDict(env_prefix=f"{ENV_PREFIX}LOCALCLOUD_")

    port: int = Field(
        4566, ge=1024, le=65535, description="Port of the local cloud server on 127.0.0.1."
    )
    dir: Path | None = Field(
        None,
        description="Folder of the local cloud (its server record, journal, databases, Pulumi home). Default: localcloud/ in the state folder.",
    )


class Profile:
    """Defaults an environment kind implies; explicit settings win."""

    def __init__(self, kind: EnvironmentKind) -> None:
        prod = kind is EnvironmentKind.PROD
        self.kind = kind
        self.multi_az = prod
        self.deletion_protection = prod
        self.final_snapshot = prod or kind is EnvironmentKind.STAGING
        self.backup_retention_days = 14 if prod else 7 if kind is EnvironmentKind.STAGING else 1
        self.nat_gateway = prod or kind is EnvironmentKind.STAGING
        self.desired_count = 2 if prod else 1
        self.protected = prod  # destroy needs explicit confirmation


class Settings(_Section):
    """Everything stackflow reads. Sections are nested; each has its own variable prefix."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX)

    environment: str = Field(
        "dev", description="Environment name: lowercase, DNS-safe, <= 20 chars (dev, prod, pr-123)."
    )
    kind: EnvironmentKind | None = Field(
        None,
        description="Environment kind (dev, staging, prod, ephemeral). Default: implied by the name.",
    )
    ttl_hours: float = Field(
        24.0,
        gt=0,
        le=24 * 90,
        description="Ephemeral environments only: hours until cleanup destroys them.",
    )
    project: str = Field(
        "stackflow",
        pattern=r"^[a-z][a-z0-9-]{0,30}$",
        description="Project name; prefixes Pulumi projects.",
    )
    cloud: Literal["local", "aws"] = Field(
        "local",
        description="Where the Pulumi engine deploys: 'local' (moto's AWS APIs on loopback, MariaDB per database; nothing reaches AWS) or 'aws'.",
    )
    state_dir: Path = Field(
        PROJECT_ROOT / ".stackflow",
        description="Local state folder (Pulumi file backend, fingerprints).",
    )
    backend_url: str | None = Field(
        None,
        description="Pulumi backend: file://..., s3://bucket/prefix, or https://api.pulumi.com. Default: file backend in the state folder.",
    )
    state_passphrase: SecretStr | None = Field(
        None,
        description="Passphrase for the Pulumi secrets provider. Required on the aws cloud unless secrets_provider is set; the local cloud generates one (0600, in the state folder).",
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
    pulumi_org: str | None = Field(None, description="Pulumi Cloud organisation (optional).")
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

    @field_validator("environment")
    @classmethod
    def _environment(cls, value: str) -> str:
        return validate_environment_name(value)

    @field_validator("backend_url")
    @classmethod
    def _backend(cls, value: str | None) -> str | None:
        if value is None:
            return None
        scheme = urlsplit(value).scheme
        if scheme not in ("file", "s3", "azblob", "gs", "https"):
            raise ValueError(
                f"{value!r} is not a Pulumi backend URL; accepted: file://<path>, s3://<bucket>[/prefix], "
                "azblob://..., gs://..., https://api.pulumi.com"
            )
        if scheme == "s3" and not urlsplit(value).netloc:
            raise ValueError(f"{value!r} names no bucket; use s3://<bucket>[/prefix]")
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
                f"{value!r} is not a secrets provider; accepted: passphrase, awskms://..., "
                "azurekeyvault://..., gcpkms://..., hashivault://..."
            )
        return value

    @model_validator(mode="after")
    def _needs_passphrase(self) -> Settings:
        uses_passphrase = self.secrets_provider in (None, "passphrase")
        if self.cloud == "aws" and uses_passphrase and self.state_passphrase is None:
            raise ValueError(
                "the aws cloud needs STACKFLOW_STATE_PASSPHRASE (the Pulumi passphrase secrets "
                "provider) or STACKFLOW_SECRETS_PROVIDER=awskms://... (the local cloud generates "
                "its own)"
            )
        if (
            self.backend_url
            and self.backend_url.startswith("https://")
            and self.pulumi_access_token is None
        ):
            raise ValueError(
                "backend https://... (Pulumi Cloud) needs STACKFLOW_PULUMI_ACCESS_TOKEN"
            )
        return self

    # --- derived values ------------------------------------------------------------------------

    @cached_property
    def environment_kind(self) -> EnvironmentKind:
        return self.kind or kind_of(self.environment)

    @cached_property
    def profile(self) -> Profile:
        return Profile(self.environment_kind)

    def confirm_destroy(self, confirmed: bool) -> None:
        """Refuse to destroy a protected (prod) environment unless `confirmed`.

        Raises:
            ConfirmationRequired: naming the environment and how to confirm.
        """
        if self.profile.protected and not confirmed:
            raise ConfirmationRequired(
                f"environment {self.environment!r} is {self.environment_kind.value}: destroying it "
                "needs explicit confirmation (CLI: --yes; flow parameter: confirm=true). "
                "Nothing was changed."
            )

    def confirm_database_deletable(self) -> None:
        """Refuse, before anything is deleted, to destroy a database with deletion protection on.

        AWS refuses too, but only when a destroy reaches the database, after the app is gone.

        Raises:
            DeletionProtected: naming the environment, the setting and how to lift it.
        """
        if not self.deletion_protection:
            return
        raise DeletionProtected(
            f"the database of {self.environment!r} has RDS deletion protection on (the "
            f"{self.environment_kind.value} profile, or STACKFLOW_DATABASE_DELETION_PROTECTION): "
            "a destroy would fail at the database after the app was already gone. Lift it first "
            "with STACKFLOW_DATABASE_DELETION_PROTECTION=false python flows/run.py up --env "
            f"{self.environment} --stacks database, then destroy with the same setting. "
            "Nothing was deleted."
        )

    @property
    def approval_required(self) -> bool:
        """Whether `up` waits for an approval of its plan (STACKFLOW_APPROVAL_REQUIRED, else the
        profile: prod)."""
        if self.approval.required is not None:
            return self.approval.required
        return self.profile.protected

    @property
    def resolved_backend_url(self) -> str:
        """The Pulumi backend: explicit, else a file backend per cloud in the state folder."""
        if self.backend_url:
            return self.backend_url
        return f"file://{self.state_dir / f'pulumi-{self.cloud}'}"

    @property
    def localcloud_root(self) -> Path:
        """The local cloud's folder: its server, journal, data plane and Pulumi home."""
        return self.localcloud.dir or self.state_dir / "localcloud"

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
        return (
            self.profile.final_snapshot
            if self.database.final_snapshot is None
            else self.database.final_snapshot
        )

    @property
    def backup_retention_days(self) -> int:
        b = self.database.backup_retention_days
        return self.profile.backup_retention_days if b is None else b

    @property
    def nat_gateway(self) -> bool:
        return (
            self.profile.nat_gateway
            if self.network.nat_gateway is None
            else self.network.nat_gateway
        )

    @property
    def desired_count(self) -> int:
        return (
            self.profile.desired_count if self.app.desired_count is None else self.app.desired_count
        )

    def secret_values(self) -> list[str]:
        """Every secret these settings hold, for the redactor."""
        values = [self.state_passphrase, self.pulumi_access_token]
        return [v.get_secret_value() for v in values if v is not None and v.get_secret_value()]


_SECTION_PREFIX: dict[str, type[_Section]] = {
    "aws": AwsSettings,
    "network": NetworkSettings,
    "database": DatabaseSettings,
    "app": AppSettings,
    "migrations": MigrationSettings,
    "approval": ApprovalSettings,
    "localcloud": LocalCloudSettings,
}


def _variable_name(section: str | None, loc: tuple[Any, ...]) -> str:
    fields = [str(p) for p in loc if isinstance(p, str)]
    if section is not None:
        prefix = str(_SECTION_PREFIX[section].model_config.get("env_prefix", ""))
    else:
        if fields and fields[0] in _SECTION_PREFIX:
            prefix = str(_SECTION_PREFIX[fields[0]].model_config.get("env_prefix", ""))
            fields = fields[1:]
        else:
            prefix = ENV_PREFIX
    return (prefix + (fields[0] if fields else "")).upper()


def _format_errors(exc: ValidationError, section: str | None) -> list[str]:
    lines = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = tuple(err.get("loc", ()))
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if err.get("type") == "string_pattern_mismatch":
            # a regex says little to a user: say what is accepted instead
            cls = _SECTION_PREFIX[section] if section is not None else Settings
            info = cls.model_fields.get(str(loc[-1])) if loc else None
            if info is not None and info.description:
                msg = f"not accepted; accepted: {info.description}"
        # A whole-model check (loc without a field) names its variables in its own message.
        named = any(isinstance(p, str) for p in loc)
        lines.append(f"{_variable_name(section, loc)}: {msg}" if named else msg)
    return lines


_SOURCE_FIELD_RE = re.compile(r'field "(?P<field>[^"]+)"')


def _format_source_error(exc: SourceParseError, section: str | None) -> str:
    """A variable whose text could not be parsed (a list or dict field that is not JSON)."""
    match = _SOURCE_FIELD_RE.search(str(exc))
    field = match["field"] if match else ""
    cls = _SECTION_PREFIX[section] if section is not None else Settings
    info = cls.model_fields.get(field)
    accepted = info.description if info is not None and info.description else "a JSON value"
    return f"{_variable_name(section, (field,))}: not valid JSON; accepted: {accepted}"


def _retired_variables() -> list[str]:
    """Refuse settings of the retired simulated engine, in the environment or `.env`.

    Silently ignoring them would turn a rehearsal someone meant to be offline into a real deploy.
    """
    from dotenv import dotenv_values

    seen = dict(os.environ)
    if Path(".env").is_file():
        seen |= {k: v or "" for k, v in dotenv_values(".env").items()}
    problems = []
    for key in sorted(k for k in seen if k.startswith(f"{ENV_PREFIX}SIM_")):
        problems.append(
            f"{key}: no longer a setting (the simulated engine was retired; every run uses the "
            "real Pulumi engine). Latency, faults and drift are rehearsed on the local cloud "
            "(STACKFLOW_CLOUD=local, see 'Local cloud' in the README); remove the variable"
        )
    engine = seen.get(f"{ENV_PREFIX}ENGINE")
    if engine is not None and engine.strip().lower() != "automation":
        problems.append(
            f"{ENV_PREFIX}ENGINE: {engine[:40]!r} is no longer accepted (the simulated engine was "
            "retired; every run uses the real Pulumi engine). Choose where it deploys with "
            "STACKFLOW_CLOUD=local|aws and remove STACKFLOW_ENGINE"
        )
    return problems


def get_settings(**overrides: Any) -> Settings:
    """Read and validate settings; keyword overrides win over the environment (e.g. environment="prod").

    Raises:
        SettingsError: one line per bad value, naming its variable and what is accepted.
    """
    sections: dict[str, Any] = {}
    problems: list[str] = _retired_variables()
    for name, cls in _SECTION_PREFIX.items():
        try:
            sections[name] = cls(**(overrides.pop(name, None) or {}))
        except ValidationError as exc:
            problems += _format_errors(exc, name)
        except SourceParseError as exc:
            problems.append(_format_source_error(exc, name))
    if not problems:
        try:
            return Settings(**sections, **overrides)
        except ValidationError as exc:
            problems += _format_errors(exc, None)
        except SourceParseError as exc:
            problems.append(_format_source_error(exc, None))
    raise SettingsError("invalid settings:\n  " + "\n  ".join(problems))


def settings_table() -> list[tuple[str, str, str]]:
    """(variable, default, description) for every setting; the README's table comes from this."""
    rows: list[tuple[str, str, str]] = []
    sections: list[tuple[type[_Section], str]] = [(Settings, ENV_PREFIX)]
    sections += [(c, str(c.model_config.get("env_prefix", ""))) for c in _SECTION_PREFIX.values()]
    for cls, prefix in sections:
        for name, field in cls.model_fields.items():
            if name in _SECTION_PREFIX:
                continue
            default: Any = field.default
            if field.default_factory is not None:
                default = field.default_factory()  # type: ignore[call-arg]
            if isinstance(default, Path):
                default = str(default).replace(str(PROJECT_ROOT), ".")
            shown = (
                ""
                if default is None
                else json.dumps(default)
                if isinstance(default, list | dict)
                else str(default)
            )
            rows.append((f"{prefix}{name}".upper(), shown, field.description or ""))
    return rows


def environ_snapshot() -> dict[str, str]:
    """The STACKFLOW_* variables in the process environment (for subprocesses)."""
    return {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIX)}
