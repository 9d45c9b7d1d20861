"""Encrypts secret values at rest with a key derived from the state passphrase."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from stackflow.settings import Settings


class SecretBox:
    """Fernet with a key from scrypt(passphrase, salt); the salt is stored beside the ciphertext."""

    def __init__(self, passphrase: str, salt: bytes) -> None:
        key = Scrypt(salt=salt, length=32, n=2**14, r=8, p=1).derive(passphrase.encode())
        self._fernet = Fernet(base64.urlsafe_b64encode(key))

    @staticmethod
    def new_salt() -> str:
        return base64.b64encode(secrets.token_bytes(16)).decode()

    @classmethod
    def from_salt(cls, passphrase: str, salt_b64: str) -> SecretBox:
        return cls(passphrase, base64.b64decode(salt_b64))

    def seal(self, value: Any) -> str:
        return self._fernet.encrypt(json.dumps(value).encode()).decode()

    def open(self, token: str) -> Any:
        """Decrypt; raises ValueError('incorrect passphrase') when the key does not fit."""
        try:
            return json.loads(self._fernet.decrypt(token.encode()))
        except InvalidToken:
            raise ValueError("incorrect passphrase") from None


class StampSeal:
    """Deterministic sealing for a stack's stamp: AES-SIV with a key from scrypt(passphrase,
    salt), the salt derived from the stack's fingerprint. The same values under the same inputs
    seal to the same token, so an update applied under a saved Pulumi plan records exactly the
    stamp its preview planned (a random nonce would read as a change the plan did not allow).
    It reveals only that two seals hold equal values, which the fingerprint says anyway."""

    _CONTEXT = b"stackflow stack stamp v1"

    def __init__(self, passphrase: str, fingerprint: str) -> None:
        self.salt = base64.b64encode(hashlib.sha256(fingerprint.encode()).digest()[:16]).decode()
        key = Scrypt(salt=base64.b64decode(self.salt), length=64, n=2**14, r=8, p=1).derive(
            passphrase.encode()
        )
        self._use(key)

    def _use(self, key: bytes) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESSIV

        self._key = key
        self._siv = AESSIV(key)

    @property
    def key(self) -> str:
        """The derived key (base64): what seals this one stamp, never the passphrase itself. A
        project's program process gets it to seal its own stamp (`keyed`); the passphrase stays
        in stackflow's process."""
        return base64.b64encode(self._key).decode()

    @classmethod
    def keyed(cls, salt: str, key: str) -> StampSeal:
        """The seal of one stamp from its derived key (see `key`)."""
        seal = cls.__new__(cls)
        seal.salt = salt
        seal._use(base64.b64decode(key))
        return seal

    def seal(self, value: Any) -> str:
        data = json.dumps(value, sort_keys=True).encode()
        return base64.urlsafe_b64encode(self._siv.encrypt(data, [self._CONTEXT])).decode()

    def open(self, token: str) -> Any:
        """Decrypt; raises ValueError('incorrect passphrase') when the key does not fit."""
        from cryptography.exceptions import InvalidTag

        try:
            return json.loads(self._siv.decrypt(base64.urlsafe_b64decode(token), [self._CONTEXT]))
        except (InvalidTag, ValueError):
            raise ValueError("incorrect passphrase") from None


def passphrase_source(settings: Settings) -> str:
    """Where `state_passphrase` reads the passphrase from, as an error names it."""
    if settings.state_passphrase is not None:
        return "STACKFLOW_STATE_PASSPHRASE"
    if settings.cloud == "local":
        from stackflow.localcloud.paths import passphrase_file

        return f"the local cloud's passphrase file {passphrase_file(settings.localcloud_root)}"
    return "no passphrase (STACKFLOW_STATE_PASSPHRASE is not set)"


def state_passphrase(settings: Settings) -> str | None:
    """The passphrase that seals secrets at rest: the configured one, else the one generated for
    the local cloud; None on AWS with a KMS secrets provider."""
    if settings.state_passphrase is not None:
        return settings.state_passphrase.get_secret_value()
    if settings.cloud == "local":
        from stackflow.localcloud.paths import passphrase

        return passphrase(settings.localcloud_root)
    return None
