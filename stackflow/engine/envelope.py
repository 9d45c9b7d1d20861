"""How Pulumi marks a secret value in a checkpoint, an export or an event: an object holding its
signature key (beside `ciphertext`, or `plaintext` in an export made with --show-secrets)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SECRET_SIG = "4dabf18193072939515e22adb298388d"  # Pulumi's signature key of a secret value


def is_secret(value: Any) -> bool:
    """Whether a stored value is a secret envelope."""
    return isinstance(value, Mapping) and SECRET_SIG in value
