"""A stack's settings file in its LocalWorkspace (`Pulumi.<stack>.yaml`), read and mended without
`pulumi`: its config (so an unchanged config is not set again) and its cached passphrase salt;
and the workspace files older versions left a backend password in, scrubbed."""

from __future__ import annotations

import os
import stat
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from stackflow.state import private_folder

if TYPE_CHECKING:
    import pulumi.automation as auto

    from stackflow.engine.base import StackSpec


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


def forget_cached_salt(work_dir: Path, stack_name: str, current: str | None = None) -> bool:
    """Drop the passphrase salt a workspace's `Pulumi.<stack>.yaml` keeps for a stack, so the CLI
    takes the one in the stack's checkpoint (PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER) and saves
    it there again. With `current` (the checkpoint's salt), only a copy that differs from it is
    dropped: a file that agrees is left as it is.

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
    cached = [line for line in lines if line.startswith("encryptionsalt:")]
    if not cached or (current is not None and cached[0].split(":", 1)[1].strip() == current):
        return False
    kept = [line for line in lines if not line.startswith("encryptionsalt:")]
    staging = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write("".join(kept))
    os.replace(staging, path)
    return True


def private_file(path: Path) -> None:
    """Make `path` its owner's alone (0600), creating it empty if missing: a writer that rewrites
    it in place (the SDK's Pulumi.yaml, the CLI's stack file) keeps that mode."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
    except FileExistsError:
        if stat.S_IMODE(path.stat().st_mode) & 0o077:
            path.chmod(0o600)


def scrub_workspaces(root: Path) -> int:
    """Make the workspaces under `root` (`<cloud>/<project>/<environment>/`) private, and take
    the `backend` entry out of each Pulumi.yaml that has one: versions before this one wrote the
    backend's URL there, a database password with it. The CLI reads PULUMI_BACKEND_URL instead.

    Returns:
        How many Pulumi.yaml files held a backend entry.
    """
    import yaml

    if not root.is_dir():
        return 0
    scrubbed = 0
    for path in (root, *root.rglob("*")):
        mode = stat.S_IMODE(path.lstat().st_mode)
        if path.is_symlink() or not mode & 0o077:
            pass
        elif path.is_dir():
            path.chmod(0o700)
        else:
            path.chmod(0o600)
        if path.name != "Pulumi.yaml" or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        if "backend:" not in text:
            continue
        found = yaml.safe_load(text)
        if not isinstance(found, dict) or "backend" not in found:
            continue
        del found["backend"]
        staging = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            yaml.safe_dump(found, out, sort_keys=False)
        os.replace(staging, path)
        scrubbed += 1
    return scrubbed


def scrub_selections(pulumi_home: Path) -> int:
    """Forget the stacks the CLI selected under a backend URL that holds a secret: it keeps them
    in `<PULUMI_HOME>/workspaces/*-workspace.json` keyed by the URL as given, which versions
    before this one gave with the database password in it. stackflow names the stack on every
    command, so nothing depends on the selection.

    Returns:
        How many selections were forgotten.
    """
    import json

    from stackflow.backends import url_secrets

    forgotten = 0
    for path in sorted((pulumi_home / "workspaces").glob("*-workspace.json")):
        try:
            found = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        stacks = found.get("stacks") if isinstance(found, dict) else None
        if not isinstance(stacks, dict):
            continue
        kept = {url: stack for url, stack in stacks.items() if not url_secrets(str(url))}
        if len(kept) == len(stacks):
            continue
        forgotten += len(stacks) - len(kept)
        if kept or found.get("stack"):
            found["stacks"] = kept
            staging = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
            fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(found, out, indent=4)
            os.replace(staging, path)
        else:
            path.unlink(missing_ok=True)  # the CLI removes a file it has nothing left to keep in
    return forgotten


def scrub_once(workspaces: Path, pulumi_home: Path | None) -> None:
    """Clean what versions before this one wrote with the backend's password: the workspaces
    under `workspaces`, and the CLI's selections in `pulumi_home` (None: the user's own). Once
    per state folder: a marker in its workspaces folder says it was done."""
    marker = workspaces / ".scrubbed"
    if marker.exists():
        return
    scrub_workspaces(workspaces)
    scrub_selections(pulumi_home or Path(os.environ.get("PULUMI_HOME") or Path.home() / ".pulumi"))
    private_folder(workspaces)
    private_file(marker)


def apply_config(
    stack: auto.Stack, spec: StackSpec, wanted: dict[str, auto.ConfigValue], work_dir: Path
) -> None:
    """Make the stack's config `wanted`: every value set, and the keys it no longer has removed (a
    value taken out of a rehearsed project's stack file must not linger). Nothing runs when the
    stack file already holds exactly these plain values; a secret value is always set (the file
    holds it encrypted: equality cannot be seen there)."""
    stored = stored_config(work_dir, spec.environment)

    def full(key: str) -> str:  # the file names a project's own key with its project
        return key if ":" in key else f"{spec.pulumi_project}:{key}"

    asked = {full(key) for key in wanted}
    stale = [] if spec.partial_config else [key for key in stored if key not in asked]
    plain_and_same = not any(item.secret for item in wanted.values()) and all(
        stored.get(full(key)) == item.value for key, item in wanted.items()
    )
    if not plain_and_same:
        stack.set_all_config(wanted)
    if stale:
        stack.remove_all_config(stale)
