"""Environment names and kinds, and the profile of defaults each kind implies."""

from __future__ import annotations

import re
from enum import StrEnum

from stackflow.errors import echo

# AWS resource names (ALB, target group) allow 32 characters; ours add up to 12 of their own.
ENVIRONMENT_NAME_MAX = 20
_ENVIRONMENT_RE = re.compile(r"^[a-z](?:[a-z0-9]|-(?=[a-z0-9])){0,19}$")
_EPHEMERAL_RE = re.compile(r"^(pr|eph|preview)-[a-z0-9-]+$")
EPHEMERAL_FORMS = "pr-<n>, eph-<name>, preview-<name>"


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


def is_ephemeral_name(name: str) -> bool:
    """Whether a name has an ephemeral environment's form (pr-123, eph-x, preview-x)."""
    return bool(_EPHEMERAL_RE.match(name))


def kind_of(environment: str) -> EnvironmentKind:
    """The kind a name implies when its file says none: prod*, staging*, pr-*/eph-*/preview-*
    (ephemeral), else dev."""
    if environment == "prod" or environment.startswith("prod-"):
        return EnvironmentKind.PROD
    if environment == "staging" or environment.startswith("staging-"):
        return EnvironmentKind.STAGING
    if is_ephemeral_name(environment):
        return EnvironmentKind.EPHEMERAL
    return EnvironmentKind.DEV


class Profile:
    """Defaults an environment kind implies; what the environment's file says wins."""

    def __init__(self, kind: EnvironmentKind) -> None:
        prod = kind is EnvironmentKind.PROD
        self.kind = kind
        self.multi_az = prod
        self.deletion_protection = prod
        self.final_snapshot = prod or kind is EnvironmentKind.STAGING
        self.backup_retention_days = 14 if prod else 7 if kind is EnvironmentKind.STAGING else 1
        self.nat_gateway = prod or kind is EnvironmentKind.STAGING
        self.desired_count = 2 if prod else 1
        # The one answer to "is this environment protected?": destroy needs confirmation, up
        # waits for approval, and destructive migrations need an approved plan.
        self.protected = prod
        # How the policy packs' rules are enforced: a violation stops a prod run, elsewhere it shows.
        self.policy_enforcement = "mandatory" if prod else "advisory"
