"""Putting a plugin executable where the Pulumi CLI finds it: a Pulumi home's plugin folder."""

from __future__ import annotations

import os
from pathlib import Path


def plugin_folder(pulumi_home: Path, kind: str, name: str, version: str) -> Path:
    """Where the CLI looks for the `kind` plugin `name` at `version` (`resource`, `analyzer`)."""
    return pulumi_home / "plugins" / f"{kind}-{name}-v{version}"


def install_plugin(folder: Path, executable: str, text: str) -> Path:
    """Write the script `executable` with `text` into `folder`; returns its path.

    Idempotent and cheap: rewritten only when its text would change, through a temporary file
    and a rename, so a running CLI never reads half of it; a `.partial` marker beside the folder,
    which makes the CLI take it for a broken download, is removed.
    """
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / executable
    if not path.is_file() or path.read_text() != text:
        scratch = path.with_name(f".{executable}.{os.getpid()}.tmp")
        scratch.write_text(text)
        scratch.chmod(0o755)
        scratch.replace(path)
    folder.with_name(folder.name + ".partial").unlink(missing_ok=True)
    return path
