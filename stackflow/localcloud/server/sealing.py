"""Secret fields of AWS requests, sealed (Fernet) before the journal keeps them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

SECRET_FIELDS = frozenset(
    {
        "MasterUserPassword",
        "SecretString",
        "SecretBinary",
        "Password",
        "NewPassword",
        "OldPassword",
        "AuthToken",
        "SecretAccessKey",
        "PrivateKey",
    }
)


def is_secret_field(name: str) -> bool:
    """Whether a parameter holds a secret: by its last dotted segment (`Foo.member.1.Password`)."""
    last = name.rsplit(".", 1)[-1]
    return last in SECRET_FIELDS or last.endswith("Password")


def seal(value: Any, fernet: Fernet) -> Any:
    """`value` with every secret field replaced by {"sealed": "<fernet token>"} (recursively)."""
    if isinstance(value, dict):
        return {
            k: (
                {"sealed": fernet.encrypt(json.dumps(v).encode()).decode()}
                if is_secret_field(str(k)) and v is not None
                else seal(v, fernet)
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [seal(v, fernet) for v in value]
    return value


def unseal(value: Any, fernet: Fernet) -> Any:
    """The inverse of `seal`."""
    if isinstance(value, dict):
        if set(value) == {"sealed"} and isinstance(value["sealed"], str):
            return json.loads(fernet.decrypt(value["sealed"].encode()))
        return {k: unseal(v, fernet) for k, v in value.items()}
    if isinstance(value, list):
        return [unseal(v, fernet) for v in value]
    return value
