"""Whether a passphrase opens a stack, answered as the Pulumi CLI answers it, without `pulumi`.

The CLI's passphrase secrets provider keeps, in each checkpoint's `secrets_providers` (and in a
workspace's `Pulumi.<stack>.yaml` as `encryptionsalt`), a state of the form

    v1:<base64 salt>:v1:<base64 nonce>:<base64 AES-256-GCM ciphertext of "pulumi">

with the key PBKDF2-HMAC-SHA256(passphrase, salt, 1,000,000 iterations, 32 bytes)
(`pkg/secrets/passphrase/manager.go` and `sdk/go/common/resource/config/crypt.go` in Pulumi
v3.259.0). A passphrase opens the stack when that ciphertext decrypts to "pulumi". The CLI itself
does not refuse a wrong passphrase until it must decrypt or encrypt a value (it loads a "locked"
secrets manager), so a stack holding no secret seems to accept any passphrase; this check does not.
It costs about half a second of CPU (the key derivation), as it does in the CLI.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping
from typing import Any

PASSPHRASE_TYPE = "passphrase"
_ITERATIONS = 1_000_000
_CHECK = b"pulumi"


def passphrase_salt(secrets_provider: Mapping[str, Any] | None) -> str | None:
    """The passphrase provider's salt state in a checkpoint's `secrets_providers`, or None when
    the checkpoint names another provider (or none)."""
    if not secrets_provider or secrets_provider.get("type") != PASSPHRASE_TYPE:
        return None
    state = secrets_provider.get("state")
    salt = state.get("salt") if isinstance(state, Mapping) else None
    return salt if isinstance(salt, str) and salt else None


def passphrase_opens(salt_state: str, passphrase: str) -> bool:
    """Whether `passphrase` is the one `salt_state` was made with (see the module).

    Raises:
        ValueError: `salt_state` is not a state the CLI writes (names the form, never the value).
    """
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    parts = salt_state.split(":")
    if len(parts) != 5 or parts[0] != "v1" or parts[2] != "v1":
        raise ValueError("not a Pulumi passphrase state (v1:<salt>:v1:<nonce>:<ciphertext>)")
    try:
        salt, nonce, sealed = (base64.b64decode(parts[i], validate=True) for i in (1, 3, 4))
    except (binascii.Error, ValueError):
        raise ValueError("not a Pulumi passphrase state: its parts are not base64") from None
    key = hashlib.pbkdf2_hmac("sha256", passphrase.encode(), salt, _ITERATIONS, 32)
    try:
        return AESGCM(key).decrypt(nonce, sealed, None) == _CHECK
    except (InvalidTag, ValueError):
        return False
