"""Install the local cloud's provider plugins into a Pulumi home of the project's own.

The engine finds a resource plugin at `$PULUMI_HOME/plugins/resource-<name>-v<version>/
pulumi-resource-<name>`; ours is a small script that runs this project's Python. The versions are
the installed SDK packages' (pulumi-aws, pulumi-random), which are the versions the programs ask
for, so the engine loads ours exactly where it would load the real ones. Only this Pulumi home is
touched: the user's ~/.pulumi keeps the real plugins for their other projects.
"""

from __future__ import annotations

import os
import shlex
import sys
from importlib.metadata import version as package_version
from pathlib import Path

from stackflow.localcloud.plugin import PACKAGES

_MARKER = "# stackflow local-cloud plugin"


def plugin_dir(pulumi_home: Path, package: str) -> Path:
    """The folder the engine looks in for `package`'s plugin at the installed SDK's version."""
    return pulumi_home / "plugins" / f"resource-{package}-v{package_version(PACKAGES[package])}"


def _script(package: str) -> str:
    python = shlex.quote(sys.executable)
    return (
        f"#!/bin/sh\n{_MARKER} ({package}): serves the local cloud, never AWS\n"
        f'exec {python} -m stackflow.localcloud.plugin {package} "$@"\n'
    )


def install_plugins(pulumi_home: Path) -> list[Path]:
    """Write (or refresh) the aws and random plugin executables; returns their paths.

    Idempotent and cheap: a script is rewritten only when its text would change (another Python,
    another version), through a temporary file and a rename, so a running engine never sees half.
    """
    written = []
    for package in PACKAGES:
        folder = plugin_dir(pulumi_home, package)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"pulumi-resource-{package}"
        text = _script(package)
        if not path.exists() or path.read_text() != text:
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text(text)
            tmp.chmod(0o755)
            tmp.replace(path)
        # A `.partial` marker would make the engine treat the folder as a broken download.
        folder.with_name(folder.name + ".partial").unlink(missing_ok=True)
        written.append(path)
    return written
