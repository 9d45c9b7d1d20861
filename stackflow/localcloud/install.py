"""Install the local cloud's provider plugins into a Pulumi home of the project's own.

The engine finds a resource plugin at `$PULUMI_HOME/plugins/resource-<name>-v<version>/
pulumi-resource-<name>`; ours is a small script that runs this project's Python. The versions are
the installed SDK packages' (pulumi-aws, pulumi-random), which are the versions the programs ask
for, so the engine loads ours exactly where it would load the real ones. Only this Pulumi home is
touched: the user's ~/.pulumi keeps the real plugins for their other projects.
"""

from __future__ import annotations

import shlex
import sys
from importlib.metadata import version as package_version
from pathlib import Path

from stackflow.localcloud.plugin import PACKAGES
from stackflow.pulumi_cli.plugins import install_plugin, plugin_folder

_MARKER = "# stackflow local-cloud plugin"


def plugin_dir(pulumi_home: Path, package: str) -> Path:
    """The folder the engine looks in for `package`'s plugin at the installed SDK's version."""
    return plugin_folder(pulumi_home, "resource", package, package_version(PACKAGES[package]))


def _script(package: str) -> str:
    python = shlex.quote(sys.executable)
    return (
        f"#!/bin/sh\n{_MARKER} ({package}): serves the local cloud, never AWS\n"
        f'exec {python} -m stackflow.localcloud.plugin {package} "$@"\n'
    )


def install_plugins(pulumi_home: Path) -> list[Path]:
    """Write (or refresh) the aws and random plugin executables (rewritten only when their text
    would change: another Python, another version); returns their paths."""
    return [
        install_plugin(plugin_dir(pulumi_home, p), f"pulumi-resource-{p}", _script(p))
        for p in PACKAGES
    ]
