"""What the three programs share: tags, resource names within AWS limits, argument types.

Programs import only pulumi, pulumi_aws, pulumi_random, pydantic and the standard library, so a
program module can be read (and fingerprinted) on its own.
"""

from __future__ import annotations

import hashlib
import ipaddress
from typing import Annotated

from pydantic import AfterValidator, BaseModel, Field

MANAGED_BY = "stackflow"

# ALB and target group names: AWS allows 32 characters.
LB_NAME_MAX = 32
# RDS instance identifiers: AWS allows 63 characters.
RDS_IDENTIFIER_MAX = 63


def tags(project: str, environment: str, stack: str) -> dict[str, str]:
    """The tags every taggable resource carries: project, environment, stack and managed-by."""
    return {
        "project": project,
        "environment": environment,
        "stack": stack,
        "managed-by": MANAGED_BY,
    }


def fit_name(name: str, max_length: int) -> str:
    """`name` if it fits in `max_length`, else a prefix of it plus a hash of the whole name.

    Deterministic, so the same arguments always give the same physical name, and two long names
    that share a prefix still differ. The result never ends with a hyphen (AWS rejects that).

    Raises:
        ValueError: `max_length` is too small to hold a prefix and the hash.
    """
    if len(name) <= max_length:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    keep = max_length - len(digest) - 1
    if keep < 1:
        raise ValueError(f"max_length {max_length} leaves no room for a name before the hash")
    return f"{name[:keep].rstrip('-')}-{digest}"


def _cidr(value: str) -> str:
    try:
        return str(ipaddress.IPv4Network(value, strict=True))
    except ValueError as exc:
        raise ValueError(
            f"{value!r} is not an IPv4 CIDR block such as 10.0.0.0/16 ({exc})"
        ) from exc


Cidr = Annotated[str, AfterValidator(_cidr)]
"""An IPv4 CIDR block in its canonical form (host bits must be zero)."""

Port = Annotated[int, Field(ge=1, le=65535)]


class BaseArgs(BaseModel, frozen=True):
    """Arguments every program takes: which project and environment it deploys."""

    project: str = Field(min_length=1)
    environment: str = Field(min_length=1)

    def name(self, suffix: str, max_length: int | None = None) -> str:
        """The physical name `<project>-<environment>-<suffix>`, fitted to `max_length` if given."""
        full = f"{self.project}-{self.environment}-{suffix}"
        return full if max_length is None else fit_name(full, max_length)
