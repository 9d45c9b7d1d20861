"""What the three programs share: tags, resource names within AWS limits, argument types.

Programs import only pulumi, pulumi_aws, pulumi_random, pydantic and the standard library, so a
program module can be read (and fingerprinted) on its own.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, TypeVar, cast

import pulumi
from pulumi.output import UNKNOWN as UNKNOWN
from pulumi.output import Unknown as _PulumiUnknown
from pydantic import AfterValidator, BaseModel, Field, PlainSerializer, PlainValidator

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

T = TypeVar("T")

UNKNOWN_WIRE = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
"""How Pulumi writes "known after apply" on the wire (and how a fingerprint records it)."""


def _unknown(value: Any) -> _PulumiUnknown:
    if isinstance(value, _PulumiUnknown):
        return value
    raise ValueError("expected a value, or Pulumi's UNKNOWN for one known only after an update")


Unknown = Annotated[
    _PulumiUnknown,
    PlainValidator(_unknown),
    PlainSerializer(lambda _: UNKNOWN_WIRE, return_type=str),
]
"""An argument another stack's preview cannot know yet (`UNKNOWN`, Pulumi's own unknown value):
an argument taken from another stack's outputs is `X | Unknown`, and a preview shows whatever
depends on it as "known after apply". An `up` always gets the values."""

Id = Annotated[str, Field(min_length=1)]
"""An identifier, name or address one stack hands to another."""

Ids = Annotated[Sequence[Id | Unknown], Field(min_length=2)] | Unknown
"""Identifiers another stack hands on, one per availability zone (at least two)."""


def holds(value: Any, test: Callable[[Any], bool]) -> bool:
    """Whether `value`, or anything inside it (lists, tuples, dicts), passes `test`."""
    if test(value):
        return True
    if isinstance(value, Mapping):
        return any(holds(v, test) for v in value.values())
    if isinstance(value, list | tuple):
        return any(holds(v, test) for v in value)
    return False


def contains_unknown(value: Any) -> bool:
    """Whether `value` (an argument, or a list or dict of them) holds an `UNKNOWN`."""
    return holds(value, lambda item: isinstance(item, _PulumiUnknown))


def given(value: T | _PulumiUnknown) -> pulumi.Input[T]:
    """An argument from another stack as a resource input (Pulumi sends `UNKNOWN` as unknown)."""
    return cast("pulumi.Input[T]", value)


def given_all(
    values: Sequence[T | _PulumiUnknown] | _PulumiUnknown,
) -> pulumi.Input[Sequence[pulumi.Input[T]]]:
    """A list argument from another stack as a resource input: the list, or some of its items,
    may be unknown in a preview."""
    return cast("pulumi.Input[Sequence[pulumi.Input[T]]]", values)


def as_text(value: int | str | _PulumiUnknown) -> pulumi.Output[str]:
    """An argument from another stack as text (a container's environment variable)."""
    return pulumi.Output.from_input(given(value)).apply(str)


class BaseArgs(BaseModel, frozen=True):
    """Arguments every program takes: which project and environment it deploys."""

    project: str = Field(min_length=1)
    environment: str = Field(min_length=1)

    def name(self, suffix: str, max_length: int | None = None) -> str:
        """The physical name `<project>-<environment>-<suffix>`, fitted to `max_length` if given."""
        full = f"{self.project}-{self.environment}-{suffix}"
        return full if max_length is None else fit_name(full, max_length)
