"""The secure values of a project's stack file, decrypted with the project's own passphrase.

Pulumi's passphrase secrets provider keeps `encryptionsalt: v1:<salt>:v1:<nonce>:<sealed "pulumi">`
in the stack file and each secret as `secure: v1:<nonce>:<ciphertext>`: AES-256-GCM under a key
derived with PBKDF2-SHA256 (1,000,000 rounds) from the passphrase and the salt. The passphrase is
read from where `pulumi` reads it, PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE.
Other providers (a cloud KMS key, Pulumi Cloud) are refused, naming the keys they protect.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from stackflow.errors import echo
from stackflow.rehearse.project import ProjectError

_ROUNDS = 1_000_000
_CHECK = "pulumi"  # what the salt's sealed message says when the passphrase is right

Decrypt = Callable[[str], str]


class SecureValueError(ProjectError):
    """A stack file's secure values cannot be decrypted here: names the file, keys and why."""


@dataclass(frozen=True)
class Passphrase:
    """The project's passphrase and the variable it came from; its repr never shows it."""

    value: str = field(repr=False)
    source: str


def passphrase_from(environ: Mapping[str, str]) -> Passphrase | None:
    """The project's passphrase as `pulumi` finds it (None: neither variable is set).

    Raises:
        SecureValueError: PULUMI_CONFIG_PASSPHRASE_FILE names a file that cannot be read.
    """
    if "PULUMI_CONFIG_PASSPHRASE" in environ:
        return Passphrase(environ["PULUMI_CONFIG_PASSPHRASE"], "PULUMI_CONFIG_PASSPHRASE")
    named = environ.get("PULUMI_CONFIG_PASSPHRASE_FILE")
    if not named:
        return None
    try:
        text = Path(named).expanduser().read_text(encoding="utf-8").strip()
        return Passphrase(text, f"PULUMI_CONFIG_PASSPHRASE_FILE ({named})")
    except (OSError, UnicodeDecodeError) as exc:
        raise SecureValueError(
            f"PULUMI_CONFIG_PASSPHRASE_FILE: {named} cannot be read "
            f"({getattr(exc, 'strerror', None) or exc}). Nothing was changed."
        ) from None


def decrypter(
    stack_file: Path, settings: Mapping[str, object], keys: list[str], passphrase: Passphrase | None
) -> Decrypt:
    """What decrypts the secure values of `stack_file` (whose top-level `settings` are given).

    Args:
        keys: the config keys holding secure values, named in the refusals.
        passphrase: the project's passphrase (None: not given).

    Raises:
        SecureValueError: another secrets provider, no passphrase, or the wrong one.
    """
    shown = ", ".join(keys)
    provider = str(settings.get("secretsprovider") or "")
    salt_state = settings.get("encryptionsalt")
    if provider not in ("", "passphrase") or not isinstance(salt_state, str):
        which = provider or "Pulumi Cloud's (the stack file has no encryptionsalt)"
        raise SecureValueError(
            f"{stack_file}: the secure values of {shown} are encrypted by the secrets provider "
            f"{which}; stackflow decrypts passphrase-encrypted values only. Re-encrypt them with "
            "`pulumi stack change-secrets-provider passphrase`, or give them as plain values in "
            "a stack file of a rehearsal stack of your own. Nothing was changed."
        )
    if passphrase is None:
        raise SecureValueError(
            f"{stack_file}: the secure values of {shown} need the project's passphrase: set "
            "PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE as for `pulumi up`. "
            "Nothing was changed."
        )
    try:
        version, salt_text, sealed = salt_state.split(":", 2)
        if version != "v1":
            raise ValueError(version)
        key = hashlib.pbkdf2_hmac(
            "sha256", passphrase.value.encode(), base64.b64decode(salt_text), _ROUNDS, 32
        )
    except (ValueError, binascii.Error):
        raise SecureValueError(
            f"{stack_file}: encryptionsalt is not one Pulumi's passphrase provider wrote "
            "(v1:<salt>:<check>). Nothing was changed."
        ) from None
    if _open(key, sealed) != _CHECK:
        raise SecureValueError(
            f"{stack_file}: the passphrase from {passphrase.source} is not the one its secure "
            f"values ({shown}) were encrypted with. Nothing was changed."
        )

    def decrypt(ciphertext: str) -> str:
        plain = _open(key, ciphertext)
        if plain is None:
            raise SecureValueError(
                f"{stack_file}: a secure value {echo(ciphertext, 24)} cannot be decrypted with "
                "the project's passphrase. Nothing was changed."
            )
        return plain

    return decrypt


def _open(key: bytes, value: str) -> str | None:
    """`v1:<nonce>:<ciphertext>` opened with `key`; None when it does not open."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    try:
        version, nonce, sealed = value.split(":")
        if version != "v1":
            return None
        plain = AESGCM(key).decrypt(base64.b64decode(nonce), base64.b64decode(sealed), None)
        return plain.decode("utf-8")
    except (ValueError, binascii.Error, InvalidTag, UnicodeDecodeError):
        return None
