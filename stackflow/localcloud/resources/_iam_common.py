"""What the IAM modules of the local cloud share: AWS's not-found code, policy documents as AWS
takes them, and IAM's dates as pulumi-aws reports them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

GONE = ("NoSuchEntity",)


def document(value: Any) -> str:
    """A policy document input as AWS takes it: JSON text (pulumi-aws also accepts a dict)."""
    return value if isinstance(value, str) else json.dumps(value)


def timestamp(value: Any) -> str:
    """An IAM date as pulumi-aws reports it: RFC 3339 in UTC, to the second."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(value)
