"""What the IAM modules of the local cloud share: AWS's not-found code and policy documents as
AWS takes them."""

from __future__ import annotations

import json
from typing import Any

GONE = ("NoSuchEntity",)


def document(value: Any) -> str:
    """A policy document input as AWS takes it: JSON text (pulumi-aws also accepts a dict)."""
    return value if isinstance(value, str) else json.dumps(value)
