"""The settings sections, one small model per concern; every field typed, bounded and described.

Where each field may be set (an environment's file, the project file, or this machine's
variables) is declared in `stackflow.config.sources`; the models only say what is valid.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, Field, field_validator

from stackflow.config.approval import ApprovalSettings
from stackflow.config.notifications import NotificationSettings
from stackflow.config.policy import PolicySettings
from stackflow.config.section import Section

_FARGATE_CPU = (256, 512, 1024, 2048, 4096, 8192, 16384)
_LOG_RETENTION: tuple[int, ...] = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545)
_LOG_RETENTION += (731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)
_REGION_RE = re.compile(
    r"^[a-z]{2}(-gov|-iso[a-z]?)?-(north|south|east|west|central|northeast|northwest|southeast|southwest)-\d$"
)


def _cidr(value: str) -> str:
    try:
        net = ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise ValueError(
            f"{value!r} is not an IPv4 CIDR block such as 10.0.0.0/16 ({exc})"
        ) from exc
    return str(net)


Cidr = Annotated[str, AfterValidator(_cidr)]


class AwsSettings(Section):
    """Where in AWS the environment lives."""

    region: str = Field("eu-west-1", description="AWS region, e.g. eu-west-1 or us-gov-west-1.")
    profile: str | None = Field(
        None, description="Named AWS CLI profile to deploy with (this machine's credentials)."
    )

    @field_validator("region")
    @classmethod
    def _region(cls, value: str) -> str:
        if not _REGION_RE.match(value):
            raise ValueError(f"{value!r} is not an AWS region name such as eu-west-1 or us-east-2")
        return value


class NetworkSettings(Section):
    """The networking stack: VPC, subnets, NAT, who may reach the database."""

    vpc_cidr: Cidr = Field("10.0.0.0/16", description="VPC CIDR block, /16 to /24.")
    az_count: int = Field(
        2, ge=2, le=6, description="Availability zones to spread subnets over (2-6)."
    )
    nat_gateway: bool | None = Field(
        None, description="Give private subnets a NAT gateway. Default from the kind (prod: on)."
    )
    migration_cidrs: list[Cidr] = Field(
        default_factory=list,
        description="CIDRs allowed to reach MySQL for the migration runner. Default: none.",
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


class DatabaseSettings(Section):
    """The database stack: RDS MySQL."""

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
        description="Automated backup retention (0-35 days). Default from the kind.",
    )
    multi_az: bool | None = Field(
        None, description="Multi-AZ standby. Default from the kind (prod: on)."
    )
    deletion_protection: bool | None = Field(
        None, description="RDS deletion protection. Default from the kind."
    )
    final_snapshot: bool | None = Field(
        None, description="Take a final snapshot on delete. Default from the kind."
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


class AppSettings(Section):
    """The app stack: ECS Fargate behind an application load balancer."""

    image: str = Field(
        "public.ecr.aws/nginx/nginx:stable",
        min_length=1,
        max_length=512,
        description="Container image to run.",
    )
    cpu: int = Field(
        256, description=f"Fargate CPU units, one of {', '.join(map(str, _FARGATE_CPU))}."
    )
    memory_mb: int = Field(
        512, ge=512, le=122880, description="Fargate memory in MiB (512-122880)."
    )
    desired_count: int | None = Field(
        None, ge=0, le=100, description="Tasks to run (0-100). Default from the kind."
    )
    port: int = Field(80, ge=1, le=65535, description="Container port the app listens on.")
    health_check_path: str = Field(
        "/",
        pattern=r"^/[^\s]*$",
        max_length=1024,
        description="Health-check path, starting with '/'.",
    )
    log_retention_days: int = Field(
        14,
        description="CloudWatch log retention in days (one of CloudWatch's values: 1, 3, 5, 7, "
        "14, 30, 60, 90, ...).",
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
        if value not in _LOG_RETENTION:
            raise ValueError(
                f"{value} is not a CloudWatch retention; accepted: "
                f"{', '.join(map(str, _LOG_RETENTION))}"
            )
        return value


class MigrationSettings(Section):
    """Schema migrations run after the database stack."""

    dir: Path = Field(
        Path("migrations"),
        description="Folder of V<version>__<description>.sql files (relative: to the project).",
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


class LocalCloudSettings(Section):
    """The local cloud: moto's AWS server on loopback behind the project's own provider plugins."""

    port: int = Field(
        4566, ge=1024, le=65535, description="Port of the local cloud server on 127.0.0.1."
    )
    dir: Path | None = Field(
        None,
        description="Folder of the local cloud (its server record, journal, databases, Pulumi "
        "home). Default: localcloud/ in the state folder.",
    )


_BRANCH_RE = re.compile(r"^(?![/-])(?!.*//)(?!.*\.\.)(?!.*@\{)[^\s~^:?*\[\\]{1,200}(?<![/.])$")


def _branch(value: str) -> str:
    """A branch name git accepts (`git check-ref-format --branch`, the common cases)."""
    if not _BRANCH_RE.match(value) or value.endswith(".lock"):
        raise ValueError(
            f"{value!r} is not a git branch name (no spaces, ~ ^ : ? * [ \\, '..' or '//'; not "
            "starting with '/' nor ending with '/', '.' or '.lock')"
        )
    return value


class GitSettings(Section):
    """GitOps: the repository an environment follows, its branch, and review environments."""

    repository: str | None = Field(
        None,
        min_length=1,
        max_length=1000,
        description="Git repository the environments follow (a URL git can fetch, or a path). "
        "Credentials never go here: see credentials_block.",
    )
    branch: str | None = Field(
        None,
        description="Branch this environment follows: the sync/<env> deployment deploys each new "
        "commit of it. Unset: the environment follows no branch.",
    )
    interval_s: int = Field(
        60,
        ge=60,
        le=24 * 3600,
        description="How often gitops/poll (for every followed environment at once, the "
        "shortest of their intervals) and review/branches ask the repository for new commits "
        "(seconds, 60 to 86400); a push event starts a sync at once. Also the first back-off "
        "after a failed commit.",
    )
    review_branches: list[str] = Field(
        default_factory=list,
        description="Branch patterns (fnmatch, e.g. pr/*) that get a review environment each: "
        "pr/<n> becomes pr-<n>, other names eph-<name>. Empty: no review environments.",
    )
    max_export_mb: int = Field(
        200,
        ge=1,
        le=10_240,
        description="Largest commit a worker exports, in MiB (its files' sizes, measured before "
        "the export); a larger one is refused by name.",
    )
    max_export_files: int = Field(
        20_000,
        ge=10,
        le=1_000_000,
        description="Most files a commit a worker exports may hold; more is refused by name.",
    )
    notes: bool = Field(
        True,
        description="Whether a sync writes a git note (refs/notes/stackflow) on each commit it "
        "deployed, refused or failed, and pushes it to the repository: `git log "
        "--notes=stackflow` then shows where each commit runs. Set false on a worker that may "
        "not push.",
    )
    credentials_block: str | None = Field(
        None,
        pattern=r"^[a-z0-9][a-z0-9-]{0,62}$",
        description="Name of a Prefect Secret block holding an HTTPS token for the repository "
        "(sent as a header, never in a URL or a log). Unset: the worker's own git credentials.",
    )

    @field_validator("branch")
    @classmethod
    def _valid_branch(cls, value: str | None) -> str | None:
        return None if value is None else _branch(value)

    @field_validator("review_branches")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not pattern or any(c.isspace() for c in pattern) or len(pattern) > 200:
                raise ValueError(
                    f"{pattern!r} is not a branch pattern (1-200 characters, no spaces; e.g. "
                    "pr/* or review/*)"
                )
        return value

    @field_validator("repository")
    @classmethod
    def _repository(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from urllib.parse import urlsplit

        parts = urlsplit(value)
        if parts.password or (parts.username and parts.scheme in ("http", "https")):
            raise ValueError(
                "a repository URL holds no credentials (they would be stored in the repository "
                "and shown in logs): name a Prefect Secret block in credentials_block instead"
            )
        if value.startswith("-"):
            raise ValueError(f"{value!r} is not a repository (it starts with '-')")
        return value


SECTIONS: dict[str, type[Section]] = {
    "aws": AwsSettings,
    "network": NetworkSettings,
    "database": DatabaseSettings,
    "app": AppSettings,
    "migrations": MigrationSettings,
    "approval": ApprovalSettings,
    "localcloud": LocalCloudSettings,
    "git": GitSettings,
    "policy": PolicySettings,
    "notifications": NotificationSettings,
}
"""Every section, by its key in files and its part of a variable's name (STACKFLOW_<KEY>_...)."""
