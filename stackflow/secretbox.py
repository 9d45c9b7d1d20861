"""Encrypts secret values at rest with a key derived from the state passphrase."""

from __future__ import annotations

import base64
import json
import os
import secrets
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from stackflow.errors import SettingsError
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


def local_passphrase(settings: Settings) -> str:
    """The configured state passphrase, else one generated once and kept in the state folder (0600),
    so local simulated rehearsals need no setup. The automation engine never uses the generated one."""
    if settings.state_passphrase is not None:
        return settings.state_passphrase.get_secret_value()
    path = settings.state_dir / "passphrase"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        stacks = (settings.state_dir / "simulated" / "stacks").glob("*/*.json")
        sealed = [p for p in stacks if '"ciphertext"' in p.read_text()]
        if sealed and not path.exists():  # (not generated meanwhile by a concurrent operation)
            # A new passphrase would not open their secrets, and an `up` would re-seal them with
            # the new one: refuse, before anything is written.
            raise SettingsError(
                f"STACKFLOW_STATE_PASSPHRASE is not set, but the stacks in {settings.state_dir} "
                "hold secrets sealed with a passphrase: set it to the one that sealed them"
            )
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32))
    return path.read_text().strip()


def state_passphrase(settings: Settings) -> str | None:
    """The passphrase that seals secrets at rest: the configured one, else the one generated for
    the local cloud (or the simulated engine); None on AWS with a KMS secrets provider."""
    if settings.state_passphrase is not None:
        return settings.state_passphrase.get_secret_value()
    if settings.engine == "simulated":
        return local_passphrase(settings)
    if settings.cloud == "local":
        from stackflow.localcloud.paths import passphrase

        return passphrase(settings.localcloud_root)
    return None
