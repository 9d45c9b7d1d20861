"""A stack's settings file in its LocalWorkspace (`Pulumi.<stack>.yaml`), read and mended without
`pulumi`: its config (so an unchanged config is not set again) and its cached passphrase salt."""

from __future__ import annotations

import os
import uuid
from pathlib import Path


def stored_config(work_dir: Path, stack_name: str) -> dict[str, object]:
    """The config of the stack's settings file (secret values as their ciphertext envelopes)."""
    import yaml  # type: ignore[import-untyped]

    path = work_dir / f"Pulumi.{stack_name.rsplit('/', 1)[-1]}.yaml"
    try:
        found = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return {}
    config = found.get("config") if isinstance(found, dict) else None
    return {str(k): v for k, v in config.items()} if isinstance(config, dict) else {}


def forget_cached_salt(work_dir: Path, stack_name: str) -> bool:
    """Drop the passphrase salt a workspace's `Pulumi.<stack>.yaml` keeps for a stack, so the CLI
    takes the one in the stack's checkpoint (PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER) and saves
    it there again.

    The salt in that file is a copy: after the team's passphrase was rotated or the stack moved to
    another backend, a worker's old copy would fail every operation with "incorrect passphrase"
    although its passphrase is right. Nothing else of the file is lost: stackflow's config holds no
    `secure:` value and is written whole before every operation. Replaced atomically, so a
    `pulumi` reading the file meanwhile sees the old file or the new one.

    Returns:
        True if a salt was dropped.
    """
    path = work_dir / f"Pulumi.{stack_name.rsplit('/', 1)[-1]}.yaml"
    try:
        lines = path.read_text().splitlines(keepends=True)
    except FileNotFoundError:
        return False
    kept = [line for line in lines if not line.startswith("encryptionsalt:")]
    if len(kept) == len(lines):
        return False
    staging = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    staging.write_text("".join(kept))
    os.replace(staging, path)
    return True
